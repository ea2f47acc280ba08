// Times `launcher up` from start to ready on 1, 2 and 4 practice hosts in one run, with the
// practice engine's boot delays at zero, and prints the overhead per node count and the 4-to-1
// ratio; also how long after the engine's ready line launcher noticed it.
// Run as root: npx tsx bench/up.ts     (targets: <= 1.5 s at 4 nodes, 4-node <= 1.3 x 1-node)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { launcher, onHost, rigDown, rigUp, variant } from "../test/integration/practice-cluster.js";

const ROUNDS = 3;
process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const FAST = `PRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\n`;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-"));

async function timeUp(recipe: string, nodes: number): Promise<{ total: number; notice: number; engine: number }> {
  const start = Date.now();
  const r = await launcher(["up", recipe, "--json"]);
  const end = Date.now();
  if (r.code !== 0) throw new Error(`up failed on ${nodes} nodes:\n${r.stderr}`);
  const log = onHost(1, ["sh", "-c", "docker logs --timestamps $(docker ps -q --filter label=launcher.rank=0) 2>&1"]).split("\n");
  const at = (line: string | undefined): number => Date.parse(line?.split(" ")[0] ?? "");
  const readyAt = at(log.find((l) => l.includes("Application startup complete")));
  const firstAt = at(log[0]);
  await launcher(["down", "--all", "--grace", "1"]);
  return { total: (end - start) / 1000, notice: (end - readyAt) / 1000, engine: (readyAt - firstAt) / 1000 };
}

try {
  await rigUp(4);
  // Open each node's shared SSH connection once, as any earlier command within a minute has.
  await launcher(["status"]);
  const recipes: [number, string][] = [
    [1, variant(dir, "bench-1x", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\n${FAST}`)],
    [2, variant(dir, "bench-2x", "practice-2x", `[env]\n${FAST}`)],
    [4, variant(dir, "bench-4x", "practice-4x", `[env]\n${FAST}`)],
  ];
  const results = new Map<number, number[]>();
  const notices: number[] = [];
  const engine = new Map<number, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [nodes, recipe] of recipes) {
      const t = await timeUp(recipe, nodes);
      (results.get(nodes) ?? results.set(nodes, []).get(nodes))?.push(t.total);
      notices.push(t.notice);
      (engine.get(nodes) ?? engine.set(nodes, []).get(nodes))?.push(t.engine);
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  console.log(`launcher up, start to ready, median of ${ROUNDS} (engine boot delays 0)`);
  for (const [nodes, times] of results) {
    const own = median(engine.get(nodes) ?? []);
    console.log(`  ${nodes} node${nodes === 1 ? " " : "s"}: ${median(times).toFixed(2)} s; the head engine's own boot ${own.toFixed(2)} s; launcher overhead ${(median(times) - own).toFixed(2)} s (target <= 1.5 s at 4)`);
  }
  const one = median(results.get(1) ?? []);
  const four = median(results.get(4) ?? []);
  console.log(`  4-to-1 ratio: ${(four / one).toFixed(2)}x (target <= 1.3)`);
  console.log(`  ready line to up returning: median ${median(notices).toFixed(3)} s, max ${Math.max(...notices).toFixed(3)} s (includes the readiness chat request and process exit)`);
} finally {
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
