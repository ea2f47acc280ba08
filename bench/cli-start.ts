// How long the built CLI takes to start, beside `node -e 0` in the same run: `launcher --version`,
// `launcher lanes --help`, `launcher status --help` and `launcher validate recipes/practice-2x`,
// each as the installed command runs it (node and the package.json "bin" file). Rounds are
// interleaved (each round runs every command once, in an order that rotates), so a busy moment of
// the machine falls on all of them alike; printed: the median of each, and that median over
// `node -e 0`'s (target: at most 2 x for --version, lanes --help and validate), and the quickest
// of each likewise.
// Columns: this tree's CLI with its compile cache warm (the first, uncounted round fills it), the
// same with the cache off (NODE_DISABLE_COMPILE_CACHE=1: what the cache pays), and with
// `--baseline DIR` (a checkout of another commit, with node_modules) that build's CLI, built and
// run in the same rounds.
// Run: node --import tsx bench/cli-start.ts [--rounds 15] [--baseline DIR] [--no-build]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { builtBin } from "../test/built-cli.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "15" }, baseline: { type: "string" }, "no-build": { type: "boolean", default: false } } });
const ROUNDS = Number(values.rounds);
const RECIPE = path.resolve("recipes/practice-2x");
const COMMANDS: readonly (readonly string[])[] = [["--version"], ["lanes", "--help"], ["status", "--help"], ["validate", RECIPE]];
const TARGETED = new Set(["--version", "lanes --help", `validate ${RECIPE}`]);

const build = (cwd: string): void => {
  const r = spawnSync("npm", ["run", "build"], { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`npm run build in ${cwd} failed:\n${r.stdout}${r.stderr}`);
};
const shortHead = (cwd: string): string => spawnSync("git", ["-C", cwd, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).stdout.trim() || path.basename(cwd);

// The compile cache's own folder for this run (NODE_COMPILE_CACHE overrides where
// module.enableCompileCache() puts it: Node's doc/api/module.md, "Module compile cache"), so a
// cache left by another tree or run neither helps nor hinders; removed at the end.
const cacheDir = mkdtempSync(path.join(tmpdir(), "launcher-bench-cli-start-"));
const { NODE_OPTIONS: _o, NODE_COMPILE_CACHE: _c, NODE_DISABLE_COMPILE_CACHE: _d, ...clean } = process.env;
interface Column {
  readonly name: string;
  readonly bin: string;
  readonly env: NodeJS.ProcessEnv;
}
const columns: Column[] = [];
if (values.baseline !== undefined) {
  if (!values["no-build"]) build(values.baseline);
  // No NODE_COMPILE_CACHE: that variable alone would turn the cache on for a build that never asked for it.
  columns.push({ name: `baseline ${shortHead(values.baseline)}`, bin: builtBin(values.baseline), env: clean });
}
if (!values["no-build"]) build(".");
const here = `this ${shortHead(".")}`;
columns.push({ name: `${here} (cache off)`, bin: builtBin("."), env: { ...clean, NODE_DISABLE_COMPILE_CACHE: "1" } });
columns.push({ name: here, bin: builtBin("."), env: { ...clean, NODE_COMPILE_CACHE: cacheDir } });

interface Run {
  readonly label: string;
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
}
const runs: Run[] = [{ label: "node -e 0", argv: ["-e", "0"], env: clean }];
for (const c of columns) for (const cmd of COMMANDS) runs.push({ label: `${c.name}\t${cmd.join(" ")}`, argv: [c.bin, ...cmd], env: c.env });

/** One start, wall time in ms; a command that fails stops the bench (a broken build is no result). */
function time(run: Run): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [...run.argv], { env: run.env, encoding: "utf8", cwd: path.dirname(RECIPE) });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${run.label.replace("\t", " ")} exited ${r.status}:\n${r.stderr}`);
  return ms;
}
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

try {
  console.log(`Node ${process.version}, ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")} at the start; ${ROUNDS} rounds`);
  for (const r of runs) time(r); // fills the compile cache; not counted
  const samples = new Map<string, number[]>(runs.map((r) => [r.label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < runs.length; i++) {
      const run = runs[(i + round) % runs.length] as Run;
      samples.get(run.label)?.push(time(run));
    }
  }
  // The quickest start beside the median: a machine busy with other work adds to every start, and
  // the quickest is the one it added least to.
  for (const [what, of] of [["median", median], ["quickest", (xs: readonly number[]) => Math.min(...xs)]] as const) {
    const base = of(samples.get("node -e 0") ?? []);
    console.log(`\n${what} of ${ROUNDS}; node -e 0: ${base.toFixed(1)} ms`);
    const cell = (label: string): string => {
      const m = of(samples.get(label) ?? []);
      return `${m.toFixed(1).padStart(7)} ms ${(m / base).toFixed(2).padStart(5)} x`;
    };
    console.log(["command".padEnd(32), ...columns.map((c) => c.name.padStart(24))].join(" "));
    for (const cmd of COMMANDS) {
      const name = cmd.join(" ");
      const shown = name.replace(RECIPE, "recipes/practice-2x");
      console.log([`${shown}${TARGETED.has(name) ? " *" : ""}`.padEnd(32), ...columns.map((c) => cell(`${c.name}\t${name}`).padStart(24))].join(" "));
    }
  }
  console.log(`\n* target: at most 2.00 x node -e 0 (the medians; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")} at the end)`);
} finally {
  rmSync(cacheDir, { recursive: true, force: true });
}
