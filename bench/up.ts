// Times `launcher up` from start to ready on 1, 2 and 4 practice hosts in one run, with the
// practice engine's boot delays at zero, and prints the overhead per node count and the 4-to-1
// ratio; also how long after the engine's ready line launcher noticed it. Each up runs with
// --trace, and the trace of the median 4-node up is printed (where launcher's own time goes).
// Beside each: the machine's CPU time while up ran (the rig's nodes are namespaces of this machine,
// so a boot's every process shares its cores) and launcher's own process's share of it.
// Run as root: npx tsx bench/up.ts [--rounds N] [--baseline DIR]     (rounds default 3)
// Targets (issue 26): overhead <= 1.0 s at 4 nodes, 4-node <= 1.3 x 1-node, ready line to up's return <= 200 ms.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { launcher, launcherProcess, onHost, rigDown, rigUp, variant } from "../test/integration/practice-cluster.js";
import { builtMain } from "../test/built-cli.js";
import { formatTrace, type TraceRecord } from "../src/remote/trace.js";

// `--baseline DIR`: a checkout of another commit with node_modules (e.g. `git archive HEAD`): its
// built CLI runs the same ups in the same rounds, each pair in alternating order, so that the two
// columns share the machine's load (timings on a shared 2-core machine drift by 50 % between runs).
const { values } = parseArgs({ options: { baseline: { type: "string" }, rounds: { type: "string", default: process.env.BENCH_ROUNDS ?? "3" } } });
const ROUNDS = Number(values.rounds);
process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
if (values.baseline !== undefined) spawnSync("npm", ["run", "build"], { stdio: "ignore", cwd: values.baseline });
const FAST = `PRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\n`;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-"));

interface Timed {
  total: number;
  /** The machine's CPU time (every process: launcher, ssh, sshd, docker, the engines) while up ran, in seconds. */
  cpu: number;
  notice: number;
  engine: number;
  trace?: TraceRecord;
}

/** One CLI: this tree's build (traced), or the baseline's (its own flags only). */
interface Cli {
  readonly name: string;
  run(args: string[]): Promise<{ code: number | null; stderr: string }>;
  readonly trace: boolean;
}

const thisTree: Cli = { name: "this tree", run: (args) => launcher(args), trace: true };
function baselineCli(root: string): Cli {
  const main = builtMain(root);
  const run = (args: string[]): Promise<{ code: number | null; stderr: string }> =>
    new Promise((resolve) => {
      const child = launcherProcess(args, {}, undefined, main);
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.stdout.resume();
      const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
      child.on("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });
  return { name: `baseline ${path.basename(root)}`, run, trace: false };
}

/**
 * The machine's busy CPU time so far, in seconds: /proc/stat's first line is the jiffies (USER_HZ,
 * 100 a second on Linux) every CPU spent in each state (proc(5), /proc/stat): user, nice, system,
 * irq and softirq are busy; idle, iowait and steal are not, and guest time is counted in user
 * already. The rig's nodes are namespaces of this machine, so this counts all of a boot.
 */
function busyCpuSeconds(): number {
  const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").trim().split(/\s+/).slice(1).map(Number);
  return [0, 1, 2, 5, 6].reduce((sum, i) => sum + (fields[i] ?? 0), 0) / 100;
}

async function timeUp(cli: Cli, recipe: string, nodes: number): Promise<Timed> {
  const start = Date.now();
  const cpu0 = busyCpuSeconds();
  const r = await cli.run(["up", recipe, "--json", ...(cli.trace ? ["--trace"] : [])]);
  const end = Date.now();
  const cpu = busyCpuSeconds() - cpu0;
  if (r.code !== 0) throw new Error(`up (${cli.name}) failed on ${nodes} nodes:\n${r.stderr}`);
  const log = onHost(1, ["sh", "-c", "docker logs --timestamps $(docker ps -q --filter label=launcher.rank=0) 2>&1"]).split("\n");
  const at = (line: string | undefined): number => Date.parse(line?.split(" ")[0] ?? "");
  const readyAt = at(log.find((l) => l.includes("Application startup complete")));
  const firstAt = at(log[0]);
  await launcher(["down", "--all", "--grace", "1"]);
  const line = r.stderr.split("\n").find((l) => l.startsWith('{"trace":'));
  const trace = line === undefined ? undefined : (JSON.parse(line) as { trace: TraceRecord }).trace;
  return { total: (end - start) / 1000, cpu, notice: (end - readyAt) / 1000, engine: (readyAt - firstAt) / 1000, ...(trace === undefined ? {} : { trace }) };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** The figures of one CLI's ups, against the targets. */
function report(cli: Cli, runs: Map<number, Timed[]>): void {
  const of = (nodes: number, pick: (t: Timed) => number): number => median((runs.get(nodes) ?? []).map(pick));
  console.log(`${cli.name}:`);
  for (const nodes of runs.keys()) {
    const total = of(nodes, (t) => t.total);
    const own = of(nodes, (t) => t.engine);
    const cpu = of(nodes, (t) => t.cpu);
    const ownCpu = of(nodes, (t) => (t.trace?.cpu_ms ?? NaN) / 1000);
    const before = of(nodes, (t) => (t.trace?.process_ms ?? NaN) / 1000);
    const ownText = Number.isNaN(ownCpu) ? "" : `, launcher's own process ${ownCpu.toFixed(2)} s of it (${before.toFixed(2)} s of start before its trace)`;
    console.log(`  ${nodes} node${nodes === 1 ? " " : "s"}: ${total.toFixed(2)} s; the head engine's own boot ${own.toFixed(2)} s; launcher overhead ${(total - own).toFixed(2)} s (target <= 1.0 s at 4); the machine's CPU busy ${cpu.toFixed(2)} s (${(cpu / total).toFixed(2)} of its ${cpus().length} cores)${ownText}`);
  }
  console.log(`  4-to-1 ratio: ${(of(4, (t) => t.total) / of(1, (t) => t.total)).toFixed(2)}x (target <= 1.3)`);
  const notices = [...runs.values()].flat().map((t) => t.notice);
  console.log(`  ready line to up returning: median ${median(notices).toFixed(3)} s, max ${Math.max(...notices).toFixed(3)} s (target <= 0.200 s; includes the readiness chat request and process exit)`);
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
  const clis = [thisTree, ...(values.baseline === undefined ? [] : [baselineCli(path.resolve(values.baseline))])];
  const results = new Map<Cli, Map<number, Timed[]>>(clis.map((c) => [c, new Map()]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [nodes, recipe] of recipes) {
      // Each pair in the other order each round: neither column always runs on a warmer machine.
      for (const cli of round % 2 === 0 ? clis : [...clis].reverse()) {
        const runs = results.get(cli) as Map<number, Timed[]>;
        (runs.get(nodes) ?? runs.set(nodes, []).get(nodes))?.push(await timeUp(cli, recipe, nodes));
      }
    }
  }
  console.log(`launcher up, start to ready, median of ${ROUNDS} (engine boot delays 0; node ${process.version})`);
  for (const cli of clis) report(cli, results.get(cli) as Map<number, Timed[]>);
  if (clis.length > 1) {
    const total = (cli: Cli, nodes: number): number => median((results.get(cli)?.get(nodes) ?? []).map((t) => t.total));
    console.log(`  this tree / baseline, start to ready: ${[1, 2, 4].map((n) => `${n} node${n === 1 ? "" : "s"} ${(total(thisTree, n) / total(clis[1] as Cli, n)).toFixed(2)}x`).join(", ")}`);
  }
  const fours = [...(results.get(thisTree)?.get(4) ?? [])].sort((a, b) => a.total - b.total);
  const mid = fours[Math.floor(fours.length / 2)];
  if (mid?.trace !== undefined) console.log(`the median 4-node up's ${formatTrace(mid.trace).join("\n")}`);
} finally {
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
