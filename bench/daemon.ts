// The daemon beside the CLI, in one run on 4 practice hosts (engine boot delays 0):
//   1. `up` start to ready, in-process and through `launcher serve --control`, at 1 and 4 nodes:
//      what the daemon adds (target <= 1.0 s at 4 nodes) and the 4-to-1 ratio each way;
//   2. a boot's log line on the node to the client seeing it through `attach` (target 200 ms):
//      each phase change's docker timestamp on the head against the moment attach printed it.
// Run as root: npx tsx bench/daemon.ts
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { advanceBoot, INITIAL_BOOT, splitTimestamp } from "../src/engine/boot-log.js";
import { adapterOf } from "../src/engine/registry.js";
import { launcher, launcherProcess, onHost, rigDown, rigUp, startGateway, variant } from "../test/integration/practice-cluster.js";

const ROUNDS = 5;
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

/** For each phase change the client printed: when it printed it, minus the head's log line that made it. */
async function attachLatency(recipe: string, daemonUrl: string): Promise<number[]> {
  const env = { LAUNCHER_DAEMON: daemonUrl };
  const r = await launcher(["up", recipe, "--detach"], 60_000, env);
  if (r.code !== 0) throw new Error(`up --detach failed:\n${r.stderr}`);
  const name = r.stdout.trim();
  const child = launcherProcess(["attach", name], env);
  const seen = new Map<string, number>();
  let buffer = "";
  child.stderr.on("data", (d: Buffer) => {
    const now = Date.now();
    buffer += d.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const l of lines) {
      const m = /\] n1 +(\S+)/.exec(l);
      if (m?.[1] !== undefined && !seen.has(m[1])) seen.set(m[1], now);
    }
  });
  await new Promise((resolve) => child.on("close", resolve));
  const adapter = adapterOf("vllm");
  if (adapter === undefined) throw new Error("no vllm adapter");
  const log = onHost(1, ["sh", "-c", `docker logs --timestamps launcher-${name}-r0 2>&1`]).split("\n");
  let state = INITIAL_BOOT;
  const latencies: number[] = [];
  for (const raw of log) {
    const { time, text } = splitTimestamp(raw);
    const next = advanceBoot(adapter, state, text);
    if (next.phase !== state.phase && time !== undefined) {
      const shown = seen.get(next.phase);
      if (shown !== undefined) latencies.push((shown - Date.parse(time)) / 1000);
    }
    state = next;
  }
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
  return latencies;
}

try {
  await rigUp(4);
  await launcher(["status"]);
  const daemon = await startGateway(["--control"]);
  try {
    const recipes: [number, string][] = [
      [1, variant(dir, "bench-1x", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\n${FAST}`)],
      [4, variant(dir, "bench-4x", "practice-4x", `[env]\n${FAST}`)],
    ];
    const times = new Map<string, number[]>();
    const add = (key: string, t: number): void => void (times.get(key) ?? times.set(key, []).get(key))?.push(t);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [nodes, recipe] of recipes) {
        add(`here ${nodes}`, await timeUp(recipe, { LAUNCHER_DAEMON: "none" }));
        add(`daemon ${nodes}`, await timeUp(recipe, { LAUNCHER_DAEMON: daemon.url }));
      }
    }
    const m = (key: string): number => median(times.get(key) ?? []);
    console.log(`launcher up, start to ready, median of ${ROUNDS} (engine boot delays 0): in-process | through the daemon`);
    for (const [nodes] of recipes) console.log(`  ${nodes} node${nodes === 1 ? " " : "s"}: ${m(`here ${nodes}`).toFixed(2)} s | ${m(`daemon ${nodes}`).toFixed(2)} s; the daemon adds ${(m(`daemon ${nodes}`) - m(`here ${nodes}`)).toFixed(2)} s (target <= 1.0 s at 4)`);
    console.log(`  4-to-1 ratio: ${(m("here 4") / m("here 1")).toFixed(2)}x | ${(m("daemon 4") / m("daemon 1")).toFixed(2)}x (target <= 1.3)`);
    const slow = variant(dir, "bench-attach", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_PHASE_DELAY_MS = "500"\n`);
    const latencies = await attachLatency(slow, daemon.url);
    console.log(`  a boot's log line on the node to attach printing it: median ${median(latencies).toFixed(3)} s, max ${Math.max(...latencies).toFixed(3)} s over ${latencies.length} phase changes (target 0.200 s)`);
  } finally {
    await daemon.stop();
  }
} finally {
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
