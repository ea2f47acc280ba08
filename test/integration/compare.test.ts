import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { DOMParser } from "@xmldom/xmldom";
import type { Comparison, Verdict } from "../../src/measure/compare/compare.js";
import { launcher, ok, practiceSuite, variant } from "./practice-cluster.js";

// One host: the lane swap stops A on it and boots B there.
const HOSTS = 1;
const dir = practiceSuite(HOSTS, "launcher-compare-it-");
const LANE = "ab";
const solo = (name: string, env: string): string => variant(dir, name, "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\n${env}`);

describe("launcher compare --run on the practice cluster", { concurrency: false }, () => {
  test("A (slow, half its answers wrong) then B (fast, all right) in one lane: B is called faster and better, and the lane ends serving B", { timeout: 300_000 }, async () => {
    const slow = solo("ab-slow", `PRACTICE_TOKENS_PER_SEC = "40"\nPRACTICE_WRONG_ANSWERS = "0.5"\n`);
    const fast = solo("ab-fast", `PRACTICE_TOKENS_PER_SEC = "160"\n`);
    const set = path.join(dir, "sums.jsonl");
    writeFileSync(set, `${Array.from({ length: 24 }, (_, i) => JSON.stringify({ id: `s${i}`, prompt: `What is ${i} + ${i * 3}?`, expected: String(i * 4), grader: "exact" })).join("\n")}\n`);
    const plot = path.join(dir, "ab.svg");
    // Five runs a side: with three, one run slowed by a busy machine (122 tok/s beside 154 and 154)
    // leaves Welch two degrees of freedom, and the Bonferroni-corrected interval spans zero.
    const r = ok(await launcher(["compare", slow, fast, "--run", "--lane", LANE, "--concurrency", "1,2", "--requests", "4", "--runs", "5", "--output-len", "16", "--set", set, "--json", "--plot", plot]), "compare --run");
    const c = JSON.parse(r.stdout) as Comparison;
    const verdict = (metric: string, k: number): string | undefined => c.bench.find((m) => m.metric === metric && m.concurrency === k)?.verdict;
    assert.equal(verdict("output_throughput", 1), "faster", r.stdout);
    assert.equal(verdict("mean_tpot_ms", 2), "faster", r.stdout);
    assert.equal(c.eval?.b.correct, 24);
    assert.equal(c.eval?.verdict, "better", JSON.stringify(c.eval));
    assert.deepEqual([c.a.runs, c.b.runs], [5, 5]);
    const lanes = JSON.parse(ok(await launcher(["lanes", "--json"]), "lanes").stdout) as { lanes: { lane: string; state: string; deployment?: string }[] };
    const lane = lanes.lanes.find((l) => l.lane === LANE);
    assert.deepEqual([lane?.state, lane?.deployment], ["serving", "ab-fast"]);
    const svg = new DOMParser().parseFromString(readFileSync(plot, "utf8"), "image/svg+xml");
    const texts = Array.from(svg.getElementsByTagName("text")).map((t) => t.textContent ?? "");
    assert.ok(texts.includes(`A: ${slow}`) && texts.includes(`B: ${fast}`), texts.join(" | "));
    // The stored runs compare the same way afterwards, by deployment.
    const again = ok(await launcher(["compare", "deployment/ab-slow", "deployment/ab-fast"]), "compare stored");
    assert.match(again.stdout, /output tok\/s.*faster/);

    // Two series of one deployment (the lane's B, identical in everything) are "within noise" on
    // the figures its token rate sets: throughput and end-to-end latency at one stream.
    const series = async (): Promise<string> => {
      const b = ok(await launcher(["bench", `deployment/ab-fast`, "--concurrency", "1", "--requests", "4", "--runs", "3", "--output-len", "16", "--json"]), "bench");
      return (JSON.parse(b.stdout) as { series: string }).series;
    };
    const [s1, s2] = [await series(), await series()];
    const same = JSON.parse(ok(await launcher(["compare", `series/${s1}`, `series/${s2}`, "--json"]), "compare of two series").stdout) as Comparison;
    const noise: Verdict = "within noise";
    for (const metric of ["output_throughput", "mean_e2el_ms"]) {
      assert.equal(same.bench.find((m) => m.metric === metric && m.concurrency === 1)?.verdict, noise, `${metric}: ${JSON.stringify(same.bench.filter((m) => m.metric === metric))}`);
    }
  });
});
