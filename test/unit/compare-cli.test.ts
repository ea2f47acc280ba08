import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { DOMParser } from "@xmldom/xmldom";
import { Store, storeDir } from "../../src/store/store.js";
import { VERDICTS } from "../../src/measure/compare/compare.js";
import { evalRun, series } from "./compare-fixture.js";
import { cliArgs } from "../built-cli.js";

let dir = "";

/** `launcher compare ...` as a user runs it, on a store of its own in a temp folder. */
function run(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [...cliArgs(), "compare", ...args], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "", NO_COLOR: "1", XDG_STATE_HOME: path.join(dir, "state") },
  });
}

before(() => {
  dir = mkdtempSync(path.join(tmpdir(), "launcher-compare-"));
  const env = { XDG_STATE_HOME: path.join(dir, "state") };
  mkdirSync(storeDir(env, dir), { recursive: true });
  const store = new Store(path.join(storeDir(env, dir), "launcher.db"));
  try {
    for (const r of series("slow", { rate: 50, ttftMs: 50, noise: 0.03 }, 3, 1)) store.saveBenchRun(r);
    for (const r of series("fast", { rate: 60, ttftMs: 40, noise: 0.03 }, 3, 2)) store.saveBenchRun(r);
    store.saveEvalRun({ ...evalRun("slow-eval", 40, (i) => i < 30), subject: { target: "chat", deployment: "slow", recipe: "slow" } });
    store.saveEvalRun({ ...evalRun("fast-eval", 40, (i) => i < 31), subject: { target: "chat", deployment: "fast", recipe: "fast" } });
  } finally {
    store.close();
  }
});

after(() => rmSync(dir, { recursive: true, force: true }));

test("compare A B reads the stored runs of two deployments and calls the faster one faster", () => {
  const r = run(["deployment/slow", "fast"]);
  assert.equal(r.status, 0, r.stderr);
  const line = r.stdout.split("\n").find((l) => l.trim().startsWith("output tok/s"));
  assert.match(line ?? "", /faster \+\d+\.\d% \(Welch \d+(\.\d)?% CI/);
  assert.match(r.stdout, /score\s+30\/40\s+31\/40 \(\+1\)\s+within noise/);
});

test("--json is the comparison, each verdict one of the exported list; --plot writes an SVG with both sides", () => {
  const svg = path.join(dir, "ab.svg");
  const r = run(["slow", "fast", "--json", "--plot", svg]);
  assert.equal(r.status, 0, r.stderr);
  const c = JSON.parse(r.stdout) as { a: { series: string }; b: { series: string }; bench: Array<{ verdict: string; metric: string }>; eval: { verdict: string }; warnings: string[] };
  assert.deepEqual([c.a.series, c.b.series], ["slow", "fast"]);
  for (const m of c.bench) assert.ok((VERDICTS as readonly string[]).includes(m.verdict), m.verdict);
  assert.ok(c.bench.some((m) => m.metric === "output_throughput"));
  const doc = new DOMParser().parseFromString(readFileSync(svg, "utf8"), "image/svg+xml");
  const texts = Array.from(doc.getElementsByTagName("text")).map((t) => t.textContent ?? "");
  assert.ok(texts.includes("A: slow") && texts.includes("B: fast"), texts.join(" | "));
});

test("--markdown prints the table as markdown", () => {
  const r = run(["slow", "fast", "--markdown"]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^\| \| A: slow \| B: fast \| B vs A \|\n\|---\|---\|---\|---\|/);
});

test("a side with no stored runs is a user error naming it, with what to do, and no stack", () => {
  const r = run(["slow", "nothing-here"]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no stored bench or eval run for nothing-here/);
  assert.match(r.stderr, /launcher bench/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});
