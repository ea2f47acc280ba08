// The daemon beside the CLI, in one run on 4 practice hosts (engine boot delays 0):
//   1. `up` start to ready, in-process and through `launcher serve --control`, at 1 and 4 nodes:
//      what the daemon adds (target <= 1.0 s at 4 nodes) and the 4-to-1 ratio each way;
//      and, for one 4-node boot through the daemon, when each of its steps happened (where the
//      time goes);
//   2. a boot's log line on the node to the client seeing it through `attach` (target 200 ms):
//      each phase change's docker timestamp on the head against the moment attach printed it,
//      split at the daemon's event for it; changes from before attach connected (replayed) apart.
// Run as root: npx tsx bench/daemon.ts   (BENCH_PART=attach: only 2., on one practice host)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { advanceBoot, INITIAL_BOOT, splitTimestamp } from "../src/engine/boot-log.js";
import { adapterOf } from "../src/engine/registry.js";
import { CONTROL_PATHS } from "../src/daemon/protocol.js";
import { decodeEvent } from "../src/boot/up-events.js";
import { launcher, launcherProcess, onHost, rigDown, rigUp, startGateway, variant } from "../test/integration/practice-cluster.js";

const ROUNDS = 5;
const ATTACH_ROUNDS = 3;
process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const FAST = `PRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\n`;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-daemon-"));
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function timeUp(recipe: string, env: NodeJS.ProcessEnv): Promise<number> {
  const start = Date.now();
  const r = await launcher(["up", recipe, "--json"], 120_000, env);
  const end = Date.now();
  if (r.code !== 0) throw new Error(`up failed:\n${r.stderr}`);
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
  return (end - start) / 1000;
}

/** One `up` through the daemon, its events read beside it: each step's time from the CLI's start. */
async function daemonTimeline(recipe: string, daemonUrl: string): Promise<string[]> {
  const start = Date.now();
  const run = launcher(["up", recipe, "--json"], 120_000, { LAUNCHER_DAEMON: daemonUrl });
  const steps: string[] = [];
  // The boot's name is not known before the daemon accepts it: poll its list (bounded).
  let name: string | undefined;
  for (let i = 0; i < 100 && name === undefined; i++) {
    const list = (await fetch(`${daemonUrl}${CONTROL_PATHS.boots}`).then((r) => r.json(), () => ({ boots: [] }))) as { boots: { deployment: string; running: boolean }[] };
    name = list.boots.find((b) => b.running)?.deployment;
    if (name === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  if (name !== undefined) {
    const res = await fetch(`${daemonUrl}${CONTROL_PATHS.events(name)}`, { signal: AbortSignal.timeout(120_000) }).catch(() => undefined);
    let rest = "";
    const shown = new Set<string>();
    for await (const chunk of res?.body ?? []) {
      rest += Buffer.from(chunk as Uint8Array).toString("utf8");
      const lines = rest.split("\n");
      rest = lines.pop() ?? "";
      for (const line of lines) {
        const e = line.trim() === "" ? undefined : decodeEvent(line);
        if (e === undefined) continue;
        const what = e.type === "node" ? `${e.node} ${e.state.phase}` : e.type === "note" || e.type === "say" ? e.text.slice(0, 60) : e.type;
        if (e.type === "node" && shown.has(what)) continue;
        shown.add(what);
        steps.push(`${((e.t - start) / 1000).toFixed(2).padStart(6)} s  ${what}`);
      }
    }
  }
  const r = await run;
  steps.push(`${((Date.now() - start) / 1000).toFixed(2).padStart(6)} s  the CLI's up returned (exit ${r.code})`);
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
  return steps;
}

interface AttachSample {
  readonly phase: string;
  /** The head's log line (docker's timestamp) to `attach` printing the phase it starts: the target's figure. */
  readonly total: number;
  /** The log line to the daemon's event for it (docker logs over SSH, parsing). */
  readonly toDaemon: number;
  /** The daemon's event to `attach` printing it (HTTP stream, client, terminal). */
  readonly toClient: number;
  /** The event happened before `attach` had printed anything: it was replayed, not followed. */
  readonly replayed: boolean;
}

/**
 * One boot submitted with --detach and followed by `attach` (a new CLI process, as a user runs
 * it) and, to split the time, by a plain HTTP follower of the same events in this process. For
 * each phase change of the head: the docker timestamp of the log line that made it, the daemon's
 * time on its event, and when `attach` printed it.
 */
async function attachLatency(recipe: string, daemonUrl: string): Promise<AttachSample[]> {
  const env = { LAUNCHER_DAEMON: daemonUrl };
  const r = await launcher(["up", recipe, "--detach"], 60_000, env);
  if (r.code !== 0) throw new Error(`up --detach failed:\n${r.stderr}`);
  const name = r.stdout.trim();
  const daemonAt = new Map<string, number>();
  const follower = new AbortController();
  const following = fetch(`${daemonUrl}${CONTROL_PATHS.events(name)}`, { signal: follower.signal })
    .then(async (res) => {
      let rest = "";
      for await (const chunk of res.body ?? []) {
        rest += Buffer.from(chunk as Uint8Array).toString("utf8");
        const lines = rest.split("\n");
        rest = lines.pop() ?? "";
        for (const line of lines) {
          const e = line.trim() === "" ? undefined : decodeEvent(line);
          if (e?.type === "node" && e.node === "n1" && !daemonAt.has(e.state.phase)) daemonAt.set(e.state.phase, e.t);
        }
      }
    })
    .catch(() => undefined);
  const child = launcherProcess(["attach", name], env);
  const seen = new Map<string, number>();
  let firstOutput: number | undefined;
  let buffer = "";
  child.stderr.on("data", (d: Buffer) => {
    const now = Date.now();
    firstOutput ??= now;
    buffer += d.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const l of lines) {
      const m = /\] n1 +(\S+)/.exec(l);
      if (m?.[1] !== undefined && !seen.has(m[1])) seen.set(m[1], now);
    }
  });
  await new Promise((resolve) => child.on("close", resolve));
  follower.abort();
  await following;
  const adapter = adapterOf("vllm");
  if (adapter === undefined) throw new Error("no vllm adapter");
  const log = onHost(1, ["sh", "-c", `docker logs --timestamps launcher-${name}-r0 2>&1`]).split("\n");
  let state = INITIAL_BOOT;
  const samples: AttachSample[] = [];
  for (const raw of log) {
    const { time, text } = splitTimestamp(raw);
    const next = advanceBoot(adapter, state, text);
    if (next.phase !== state.phase && time !== undefined) {
      const shown = seen.get(next.phase);
      const evented = daemonAt.get(next.phase);
      const at = Date.parse(time);
      if (shown !== undefined && evented !== undefined) {
        samples.push({ phase: next.phase, total: (shown - at) / 1000, toDaemon: (evented - at) / 1000, toClient: (shown - evented) / 1000, replayed: firstOutput === undefined || evented < firstOutput });
      }
    }
    state = next;
  }
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
  return samples;
}

const ATTACH_ONLY = process.env.BENCH_PART === "attach";

try {
  await rigUp(ATTACH_ONLY ? 1 : 4);
  await launcher(["status"]);
  const daemon = await startGateway(["--control"]);
  try {
    if (!ATTACH_ONLY) await upTimes(daemon.url);
    await attachTimes(daemon.url);
  } finally {
    await daemon.stop();
  }
} finally {
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}

/** 1. `up` in-process and through the daemon at 1 and 4 nodes, and one 4-node boot's steps. */
async function upTimes(daemonUrl: string): Promise<void> {
  const recipes: [number, string][] = [
    [1, variant(dir, "bench-1x", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\n${FAST}`)],
    [4, variant(dir, "bench-4x", "practice-4x", `[env]\n${FAST}`)],
  ];
  const times = new Map<string, number[]>();
  const add = (key: string, t: number): void => void (times.get(key) ?? times.set(key, []).get(key))?.push(t);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [nodes, recipe] of recipes) {
      add(`here ${nodes}`, await timeUp(recipe, { LAUNCHER_DAEMON: "none" }));
      add(`daemon ${nodes}`, await timeUp(recipe, { LAUNCHER_DAEMON: daemonUrl }));
    }
  }
  const m = (key: string): number => median(times.get(key) ?? []);
  console.log(`launcher up, start to ready, median of ${ROUNDS} (engine boot delays 0): in-process | through the daemon`);
  for (const [nodes] of recipes) console.log(`  ${nodes} node${nodes === 1 ? " " : "s"}: ${m(`here ${nodes}`).toFixed(2)} s | ${m(`daemon ${nodes}`).toFixed(2)} s; the daemon adds ${(m(`daemon ${nodes}`) - m(`here ${nodes}`)).toFixed(2)} s (target <= 1.0 s at 4)`);
  console.log(`  4-to-1 ratio: ${(m("here 4") / m("here 1")).toFixed(2)}x | ${(m("daemon 4") / m("daemon 1")).toFixed(2)}x (target <= 1.3)`);
  const four = recipes.find(([n]) => n === 4)?.[1];
  if (four !== undefined) {
    console.log("  one 4-node up through the daemon, each step from the CLI's start (the daemon's clock):");
    for (const line of await daemonTimeline(four, daemonUrl)) console.log(`    ${line}`);
  }
}

/** 2. A boot's log line on the head to `attach` printing it. */
async function attachTimes(daemonUrl: string): Promise<void> {
  const slow = variant(dir, "bench-attach", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_PHASE_DELAY_MS = "500"\n`);
  const samples: AttachSample[] = [];
  for (let round = 0; round < ATTACH_ROUNDS; round++) samples.push(...(await attachLatency(slow, daemonUrl)));
  const live = samples.filter((x) => !x.replayed);
  const replayed = samples.filter((x) => x.replayed);
  const figures = (xs: readonly number[]): string => `median ${median(xs).toFixed(3)} s, max ${Math.max(...xs).toFixed(3)} s`;
  console.log(`  a boot's log line on the head to attach printing it, ${ATTACH_ROUNDS} boots: ${figures(live.map((x) => x.total))} over ${live.length} phase changes followed live (target 0.200 s)`);
  console.log(`    of which line -> daemon's event ${figures(live.map((x) => x.toDaemon))}; event -> attach printing it ${figures(live.map((x) => x.toClient))}`);
  if (replayed.length > 0) console.log(`    and ${replayed.length} phase changes from before attach had started (replayed when it connected): ${figures(replayed.map((x) => x.total))}`);
  const worst = [...live].sort((a, b) => b.total - a.total)[0];
  if (worst !== undefined) console.log(`    slowest live: phase ${worst.phase}, ${worst.total.toFixed(3)} s (line -> event ${worst.toDaemon.toFixed(3)} s, event -> attach ${worst.toClient.toFixed(3)} s)`);
}
