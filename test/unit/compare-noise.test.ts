/**
 * What `compare` must not call a difference on (s18 review findings 2 and 5): failed requests
 * kept as 0 s, many rows tested at once, a one-run side pooled against a many-run side.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { compare, type Evidence } from "../../src/measure/compare/compare.js";
import { serveResult } from "../../src/measure/bench/metrics.js";
import type { RequestOutcome } from "../../src/measure/bench/stream.js";
import type { BenchRun, ServeResult } from "../../src/contract/evidence.js";
import { CONFIDENCE } from "../../src/measure/compare/stats.js";
import { series } from "./compare-fixture.js";

const ok = (ttft: number, latency: number): RequestOutcome => ({ ok: true, start_s: 0, ttft_s: ttft, itl_s: [], latency_s: latency, input_tokens: 10, output_tokens: 51 });
const failed: RequestOutcome = { ok: false, start_s: 0, input_tokens: 10, error: "HTTP 503: Service Unavailable" };

function oneRun(name: string, result: ServeResult): Evidence {
  const run: BenchRun = { id: `${name}-1`, series: name, run: 1, started_at: "2026-12-03T10:00:00Z", ended_at: "2026-12-03T10:00:10Z", subject: { target: name }, workload: { concurrencies: [1], requests: 40 }, results: [result] };
  return { label: name, bench: [run] };
}

test("failed requests are not samples: B with the same 20 good requests as A and 20 failures is not 'faster'", () => {
  // Each good request alike, with a small spread: A 40 of them, B 20 of them and 20 HTTP 503s.
  const good = (i: number): RequestOutcome => ok(0.2 + (i % 5) * 0.001, 0.7 + (i % 5) * 0.001);
  const a = oneRun("a", serveResult(Array.from({ length: 40 }, (_, i) => good(i)), 10, 1));
  const b = oneRun("b", serveResult([...Array.from({ length: 20 }, (_, i) => good(i)), ...Array.from({ length: 20 }, () => failed)], 10, 1));
  const c = compare(a, b);
  for (const metric of ["mean_ttft_ms", "mean_e2el_ms", "mean_tpot_ms"] as const) {
    const row = c.bench.find((m) => m.metric === metric);
    assert.ok(row !== undefined, metric);
    assert.notEqual(row.verdict, "faster", `${metric}: ${JSON.stringify(row.interval)}`);
    assert.ok(row.interval !== undefined && Math.abs(row.interval.difference) < 1, `${metric}: the interval's difference is of the means shown, ${JSON.stringify(row.interval)}`);
  }
});

test("every bench interval of one comparison is Bonferroni-corrected over the rows that get one, and says so", () => {
  const a = { label: "a", bench: series("a", { rate: 50, ttftMs: 50, noise: 0.03 }, 3, 1, [1, 4, 8]) };
  const b = { label: "b", bench: series("b", { rate: 50, ttftMs: 50, noise: 0.03 }, 3, 2, [1, 4, 8]) };
  const c = compare(a, b);
  const judged = c.bench.filter((m) => m.interval !== undefined);
  assert.ok(judged.length >= 12, `rows with an interval: ${judged.length}`);
  for (const m of judged) {
    assert.deepEqual(m.interval?.correction, { method: "bonferroni", intervals: judged.length, family_confidence: CONFIDENCE });
    assert.ok(Math.abs((m.interval?.confidence ?? 0) - (1 - (1 - CONFIDENCE) / judged.length)) < 1e-12);
  }
});

test("two series of one configuration: no row of a many-row table is called, over many seeds (the family-wise error is controlled)", () => {
  let called = 0;
  const seeds = 20;
  for (let s = 0; s < seeds; s++) {
    const a = { label: "a", bench: series("a", { rate: 50, ttftMs: 50, noise: 0.05 }, 3, 100 + 2 * s, [1, 4, 8]) };
    const b = { label: "b", bench: series("b", { rate: 50, ttftMs: 50, noise: 0.05 }, 3, 101 + 2 * s, [1, 4, 8]) };
    if (compare(a, b).bench.some((m) => m.verdict !== "within noise" && m.verdict !== "no spread")) called++;
  }
  // At 95 % a row and 18 rows a table, uncorrected, most tables call something; corrected, about 1 in 20.
  assert.ok(called <= 3, `${called} of ${seeds} comparisons of one configuration called a difference`);
});

test("one run on one side and three on the other: nothing is pooled, speed is not called, and a warning says why", () => {
  const a = { label: "a", bench: series("a", { rate: 50, ttftMs: 50, noise: 0.03 }, 1, 1) };
  const b = { label: "b", bench: series("b", { rate: 80, ttftMs: 30, noise: 0.03 }, 3, 2) };
  const c = compare(a, b);
  for (const m of c.bench) {
    assert.equal(m.verdict, "no spread", `${m.metric} at ${m.concurrency}`);
    assert.match(m.no_interval ?? "", /one side has 1 run, the other 3/);
  }
  assert.ok(c.warnings.some((w) => /A has 1 run\(s\), B 3: one run is not pooled against several/.test(w)), c.warnings.join("\n"));
});
