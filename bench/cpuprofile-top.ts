// The functions a V8 CPU profile (`node --cpu-prof`, a .cpuprofile file) spent its time in:
// self time (the function itself, on top of the stack) and total time (it or what it called), by
// function, and self time summed by where the code lives (launcher's own, each package under
// node_modules, Node's internals, GC, idle). Used on the gateway under a burst of requests:
//   npx tsx bench/gateway.ts --node-options=--cpu-prof --cpu-prof-dir=/tmp/prof
//   npx tsx bench/cpuprofile-top.ts /tmp/prof/*.cpuprofile [--top 40] [--own]
// --own: the function tables list launcher's own frames only (dist/ or src/, not node_modules).
// The format: Chrome DevTools Protocol, Profiler.Profile (nodes with callFrame and children,
// samples[i] the leaf node of sample i, timeDeltas[i] the µs before it):
// https://chromedevtools.github.io/devtools-protocol/tot/Profiler/#type-Profile
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Where a frame's code lives: launcher's own, a package (by name), Node's internals, or V8's pseudo-frames. */
export function placeOf(url: string, functionName: string): string {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  if (url.startsWith("node:")) return "node internals";
  const nm = url.lastIndexOf("/node_modules/");
  if (nm !== -1) {
    const rest = url.slice(nm + "/node_modules/".length).split("/");
    return rest[0]?.startsWith("@") === true ? `${rest[0]}/${rest[1] ?? ""}` : (rest[0] ?? "?");
  }
  return /\/(dist|src)\//.test(url) ? "launcher" : "other";
}

const keyOf = (f: CallFrame): string => `${f.functionName || "(anonymous)"} ${f.url === "" ? "" : `${path.basename(f.url)}:${f.lineNumber + 1}`}`.trim();

/** Self and total µs by function key, and self µs by place, over every sample of the profile. */
export function summarise(p: Profile): { self: Map<string, number>; total: Map<string, number>; places: Map<string, number>; sampledUs: number; frames: Map<string, CallFrame> } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const places = new Map<string, number>();
  const frames = new Map<string, CallFrame>();
  const add = (m: Map<string, number>, k: string, v: number): void => {
    m.set(k, (m.get(k) ?? 0) + v);
  };
  let sampledUs = 0;
  for (const [i, leaf] of p.samples.entries()) {
    // A sample's time is the gap to the next one (the last sample gets the one before it).
    const us = p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0;
    sampledUs += us;
    const node = byId.get(leaf);
    if (node === undefined) continue;
    const key = keyOf(node.callFrame);
    frames.set(key, node.callFrame);
    add(self, key, us);
    add(places, placeOf(node.callFrame.url, node.callFrame.functionName), us);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)?.callFrame;
      if (f === undefined) break;
      const k = keyOf(f);
      frames.set(k, f);
      if (!seen.has(k)) add(total, k, us);
      seen.add(k);
    }
  }
  return { self, total, places, sampledUs, frames };
}

const isMain = import.meta.url === `file://${process.argv[1] ?? ""}` || process.argv[1]?.endsWith("cpuprofile-top.ts") === true;
if (isMain) {
  // Piped into head: the reader going away ends the listing, not with a stack.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: "string", default: "30" }, own: { type: "boolean", default: false } } });
  const top = Number(values.top);
  for (const file of positionals) {
    const s = summarise(JSON.parse(readFileSync(file, "utf8")) as Profile);
    const busy = s.sampledUs - (s.places.get("(idle)") ?? 0);
    const ms = (us: number): string => (us / 1000).toFixed(1).padStart(9);
    const pctOf = (us: number): string => `${((100 * us) / Math.max(1, busy)).toFixed(1).padStart(5)} %`;
    console.log(`${file}: ${(s.sampledUs / 1000).toFixed(0)} ms sampled, ${(busy / 1000).toFixed(0)} ms not idle (percentages below are of that)`);
    console.log("\nself time by place:");
    for (const [k, v] of [...s.places].sort((a, b) => b[1] - a[1])) if (k !== "(idle)") console.log(`${ms(v)} ms ${pctOf(v)}  ${k}`);
    const own = (k: string): boolean => !values.own || placeOf(s.frames.get(k)?.url ?? "", k) === "launcher";
    for (const [title, m] of [["self", s.self], ["total (self + callees)", s.total]] as const) {
      console.log(`\ntop ${top} by ${title}${values.own ? ", launcher's own frames" : ""}:`);
      for (const [k, v] of [...m].filter(([k]) => own(k) && !k.startsWith("(idle)") && !k.startsWith("(root)")).sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(v)} ms ${pctOf(v)}  ${k}`);
    }
  }
}
