import assert from "node:assert/strict";
import { test } from "node:test";
import { LATENCY_METRICS, LATENCY_STATS, latencyKey, type BenchRun, type EvalRun, type ServeResult } from "../../src/contract/evidence.js";
import { Store } from "../../src/store/store.js";

function result(concurrency: number): ServeResult {
  const latency = Object.fromEntries(LATENCY_STATS.flatMap((s) => LATENCY_METRICS.map((m) => [latencyKey(s, m), 1]))) as Record<ReturnType<typeof latencyKey>, number>;
  return {
    ...latency,
    max_concurrency: concurrency,
    completed: 4,
    failed: 0,
    total_input_tokens: 40,
    total_output_tokens: 80,
    duration: 2,
    request_throughput: 2,
    output_throughput: 40,
    total_token_throughput: 60,
    ttfts: [0.1, 0.1, 0.2, 0.2],
    latencies: [1, 1, 1, 1],
    input_lens: [10, 10, 10, 10],
    output_lens: [20, 20, 20, 20],
    errors: ["", "", "", ""],
  };
}

function bench(id: string, series: string, run: number, at: string, target = "lane-a"): BenchRun {
  return { id, series, run, started_at: at, ended_at: at, subject: { target, deployment: "dep-a", recipe: "r" }, workload: { concurrencies: [1, 4], requests: 4 }, results: [result(1), result(4)] };
}

test("bench runs round-trip whole through the store, newest first, and filter by series and target", () => {
  const store = new Store(":memory:");
  store.saveBenchRun(bench("b1", "s1", 1, "2026-12-03T10:00:00Z"));
  store.saveBenchRun(bench("b2", "s1", 2, "2026-12-03T10:01:00Z"));
  store.saveBenchRun(bench("b3", "s2", 1, "2026-12-03T10:02:00Z", "lane-b"));
  assert.deepEqual(store.benchRuns({ series: "s1" }), [bench("b2", "s1", 2, "2026-12-03T10:01:00Z"), bench("b1", "s1", 1, "2026-12-03T10:00:00Z")]);
  assert.deepEqual(store.benchRuns({ target: "lane-b" }).map((r) => r.id), ["b3"]);
  assert.deepEqual(store.benchRuns({ limit: 1 }).map((r) => r.id), ["b3"]);
  assert.deepEqual(store.benchRuns({ id: "nope" }), []);
  store.close();
});

test("eval runs keep every item's answer and grade", () => {
  const store = new Store(":memory:");
  const run: EvalRun = {
    id: "e1",
    started_at: "2026-12-03T10:00:00Z",
    ended_at: "2026-12-03T10:00:05Z",
    subject: { target: "lane-a" },
    set: { path: "q.jsonl", sha256: "ab", items: 2 },
    temperature: 0,
    request_options: { chat_template_kwargs: { thinking: false } },
    items: [
      { id: "1", expected: "B", grader: "choice", answer: "The answer is B", correct: true },
      { id: "2", expected: "4", grader: "exact", correct: false, error: "HTTP 503" },
    ],
    correct: 1,
    total: 2,
  };
  store.saveEvalRun(run);
  assert.deepEqual(store.evalRuns({ target: "lane-a" }), [run]);
  assert.deepEqual(store.evalRuns({ recipe: "other" }), []);
  store.close();
});

test("a bench run stored before the per-request errors were aligned reads in the current shape: e2els as latencies, a 0 s request as failed, the rate as a percent", () => {
  const store = new Store(":memory:");
  const { latencies, errors: _aligned, ...rest } = result(1);
  const old = { ...rest, ttfts: [0.1, 0, 0.2, 0], e2els: [1, 0, 1.5, 0], output_lens: [20, 0, 20, 0], completed: 2, failed: 2, errors: ["HTTP 503: busy"], spec_decode_acceptance_rate: 0.6 };
  void latencies;
  const run = { ...bench("old", "s-old", 1, "2026-12-03T09:00:00Z"), results: [old] } as unknown as BenchRun;
  store.saveBenchRun(run);
  const [read] = store.benchRuns({ id: "old" });
  const r = read?.results[0];
  assert.deepEqual(r?.latencies, [1, 0, 1.5, 0]);
  assert.deepEqual(r?.errors, ["", "HTTP 503: busy", "", "failed (its error was not kept)"]);
  assert.equal(r?.spec_decode_acceptance_rate, 60);
  assert.equal("e2els" in (r ?? {}), false);
  store.close();
});
