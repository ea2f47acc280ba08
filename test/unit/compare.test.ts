import assert from "node:assert/strict";
import { test } from "node:test";
import { DOMParser } from "@xmldom/xmldom";
import { compare, VERDICTS, type Comparison, type MetricComparison } from "../../src/measure/compare/compare.js";
import { bootstrapInterval, mcnemarExact, welchInterval } from "../../src/measure/compare/stats.js";
import { markdownTable, textTable } from "../../src/measure/compare/table.js";
import { plotSvg, PLOTTED_METRICS } from "../../src/measure/compare/svg.js";
import { assertGolden } from "./golden.js";
import { evalRun, series } from "./compare-fixture.js";

const close = (actual: number, expected: number, what: string): void => assert.ok(Math.abs(actual - expected) < 1e-9, `${what}: ${actual} != ${expected}`);

test("Welch's interval is the one scipy's ttest_ind(equal_var=False) gives", () => {
  // scipy.stats.ttest_ind([3,4,5,7.5], [1,2,3,4], equal_var=False).confidence_interval(0.95)
  const i = welchInterval([1, 2, 3, 4], [3, 4, 5, 7.5]);
  assert.equal(i.method, "welch");
  close(i.difference, 2.375, "difference");
  close(i.low, -0.5707110036688667, "low");
  close(i.high, 5.320711003668867, "high");
});

test("two sides without any spread get a zero-width interval at their difference, not NaN", () => {
  const i = welchInterval([10, 10], [12, 12]);
  assert.deepEqual([i.low, i.high], [2, 2]);
});

test("McNemar's exact test is the two-sided binomial test on the discordant items (scipy's binomtest)", () => {
  const pairs = (aOnly: number, bOnly: number, both: number): Array<readonly [boolean, boolean]> => [
    ...Array.from({ length: aOnly }, () => [true, false] as const),
    ...Array.from({ length: bOnly }, () => [false, true] as const),
    ...Array.from({ length: both }, () => [true, true] as const),
  ];
  // scipy.stats.binomtest(0, 10, 0.5).pvalue, binomtest(2, 12, 0.5).pvalue
  close(mcnemarExact(pairs(0, 10, 50)).p, 0.001953125, "0 vs 10");
  close(mcnemarExact(pairs(2, 10, 50)).p, 0.03857421875, "2 vs 10");
  assert.deepEqual(mcnemarExact(pairs(0, 0, 5)), { paired: 5, a_only: 0, b_only: 0, p: 1 });
  assert.equal(mcnemarExact(pairs(3, 3, 0)).p, 1);
});

test("the bootstrap interval is the same every time and covers a clear shift, not zero", () => {
  const a = Array.from({ length: 40 }, (_, i) => 100 + (i % 7));
  const b = a.map((x) => x + 20);
  const one = bootstrapInterval(a, b);
  assert.deepEqual(bootstrapInterval(a, b), one);
  assert.equal(one.method, "bootstrap");
  assert.ok(one.low > 15 && one.high < 25, `${one.low}..${one.high}`);
});

const fast = { rate: 60, ttftMs: 40, noise: 0.03 };
const slow = { rate: 50, ttftMs: 50, noise: 0.03 };

const metric = (c: Comparison, key: string, concurrency: number): MetricComparison => {
  const m = c.bench.find((x) => x.metric === key && x.concurrency === concurrency);
  assert.ok(m, `${key} at ${concurrency}`);
  return m;
};

test("a faster series is called faster, with Welch over three runs a side; the slower one slower", () => {
  const c = compare({ label: "slow", bench: series("slow", slow, 3, 1) }, { label: "fast", bench: series("fast", fast, 3, 2) });
  for (const k of [1, 4]) {
    for (const key of ["output_throughput", "mean_ttft_ms", "mean_e2el_ms", "mean_tpot_ms"]) {
      const m = metric(c, key, k);
      assert.equal(m.verdict, "faster", `${key} at ${k}: ${JSON.stringify(m.interval)}`);
      assert.equal(m.interval?.method, "welch");
    }
  }
  const back = compare({ label: "fast", bench: series("fast", fast, 3, 2) }, { label: "slow", bench: series("slow", slow, 3, 1) });
  assert.equal(metric(back, "output_throughput", 4).verdict, "slower");
  assert.equal(metric(back, "mean_ttft_ms", 1).verdict, "slower");
});

test("two draws of one distribution are within noise on every metric", () => {
  const c = compare({ label: "one", bench: series("one", fast, 3, 11) }, { label: "two", bench: series("two", fast, 3, 12) });
  assert.ok(c.bench.length > 0);
  for (const m of c.bench) assert.equal(m.verdict, "within noise", `${m.metric} at ${m.concurrency}: ${JSON.stringify(m.interval)}`);
});

test("one run a side: latency is judged by the bootstrap over its requests, throughput has no spread to judge by", () => {
  const c = compare({ label: "slow", bench: series("slow", slow, 1, 1) }, { label: "fast", bench: series("fast", fast, 1, 2) });
  const ttft = metric(c, "mean_ttft_ms", 4);
  assert.equal(ttft.interval?.method, "bootstrap");
  assert.equal(ttft.verdict, "faster");
  assert.equal(metric(c, "output_throughput", 4).verdict, "no spread");
  const same = compare({ label: "one", bench: series("one", fast, 1, 11) }, { label: "two", bench: series("two", fast, 1, 12) });
  assert.equal(metric(same, "mean_e2el_ms", 1).verdict, "within noise");
});

test("a concurrency measured on one side only is not compared, and a note says so", () => {
  const c = compare({ label: "a", bench: series("a", fast, 2, 1, [1, 4]) }, { label: "b", bench: series("b", fast, 2, 2, [1, 8]) });
  assert.deepEqual([...new Set(c.bench.map((m) => m.concurrency))], [1]);
  assert.ok(c.warnings.some((w) => w.includes("concurrency 4, 8 was measured on one side only")), c.warnings.join("\n"));
});

test("eval: B right on 12 more items is better by McNemar; the same answers are within noise; failed items are not paired", () => {
  const a = evalRun("a", 60, (i) => i < 40);
  const b = evalRun("b", 60, (i) => i < 52);
  const better = compare({ label: "a", bench: [], eval: a }, { label: "b", bench: [], eval: b }).eval;
  assert.equal(better?.verdict, "better");
  assert.deepEqual([better?.test.a_only, better?.test.b_only, better?.test.paired], [0, 12, 60]);
  const noisy = compare({ label: "a", bench: [], eval: evalRun("a", 60, (i) => i % 2 === 0) }, { label: "b", bench: [], eval: evalRun("b", 60, (i) => i % 2 === 0 || i === 1) }).eval;
  assert.equal(noisy?.verdict, "within noise");
  const failed = compare({ label: "a", bench: [], eval: a }, { label: "b", bench: [], eval: evalRun("b", 60, (i) => i < 52, [0, 1, 2]) }).eval;
  assert.equal(failed?.test.paired, 57);
  assert.ok(VERDICTS.includes(failed?.verdict ?? "no spread"));
});

/** A comparison whose numbers do not depend on floating noise: the golden text's subject. */
function fixedComparison(): Comparison {
  return compare(
    { label: "dcp1", bench: series("dcp1", fast, 3, 1), eval: evalRun("dcp1-eval", 176, (i) => i < 167) },
    { label: "dcp2", bench: series("dcp2", slow, 3, 2), eval: evalRun("dcp2-eval", 176, (i) => i < 158) },
  );
}

test("the table and its markdown are golden", () => {
  const c = fixedComparison();
  assertGolden("test/golden/compare.txt", `${textTable(c)}\n`);
  assertGolden("test/golden/compare.md", `${markdownTable(c)}\n`);
  assert.match(textTable(c), /158\/176 \(-9\)/);
});

test("the plot's legend names each side whole, however long (a recipe's path)", async () => {
  const long = "/tmp/launcher-compare-it-Q2Innu/recipes/a-long-recipe-name";
  const c = compare({ label: `${long}-a`, bench: series("a", fast, 2, 1) }, { label: `${long}-b`, bench: series("b", slow, 2, 2) });
  const doc = new DOMParser().parseFromString(await plotSvg(c), "image/svg+xml");
  const texts = Array.from(doc.getElementsByTagName("text")).map((t) => t.textContent ?? "");
  assert.ok(texts.includes(`A: ${long}-a`) && texts.includes(`B: ${long}-b`), texts.join(" | "));
});

test("the plot is SVG with one series per side in every panel", async () => {
  const c = fixedComparison();
  const svg = await plotSvg(c);
  const errors: string[] = [];
  const doc = new DOMParser({ onError: (level, message) => void (level !== "warning" && errors.push(message)) }).parseFromString(svg, "image/svg+xml");
  assert.deepEqual(errors, []);
  assert.equal(doc.documentElement?.tagName, "svg");
  const texts = Array.from(doc.getElementsByTagName("text")).map((t) => t.textContent ?? "");
  assert.ok(texts.includes("A: dcp1") && texts.includes("B: dcp2"), `legend: ${texts.join(" | ")}`);
  // Vega draws each series of a line mark as one path with an aria description naming it.
  const lines = Array.from(doc.getElementsByTagName("path")).filter((p) => (p.getAttribute("aria-roledescription") ?? "") === "line mark");
  const described = lines.map((p) => p.getAttribute("aria-label") ?? "");
  for (const side of ["A: dcp1", "B: dcp2"]) {
    assert.equal(described.filter((d) => d.includes(side)).length, PLOTTED_METRICS.length, `${side}: ${described.join(" | ")}`);
  }
});
