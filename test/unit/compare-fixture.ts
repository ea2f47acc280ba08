/**
 * Stored runs as `launcher bench` and `launcher eval` write them, made from a seeded generator:
 * a series is draws of one "configuration" (a token rate, a TTFT), each run and request with noise.
 */
import discreteUniform from "@stdlib/random-base-discrete-uniform";
import { LATENCY_METRICS, LATENCY_STATS, latencyKey, type BenchRun, type EvalItemResult, type EvalRun, type ServeResult } from "../../src/contract/evidence.js";

export interface Config {
  /** Output tokens per second per stream. */
  readonly rate: number;
  readonly ttftMs: number;
  /** Relative noise of each run and each request, e.g. 0.03 for ±3 %. */
  readonly noise: number;
}

const OUTPUT_LEN = 64;
const REQUESTS = 32;

/** A uniform draw in [1 - noise, 1 + noise] from `next` (0..1000). */
const jitter = (next: () => number, noise: number): number => 1 + noise * ((next() - 500) / 500);

function result(c: Config, concurrency: number, next: () => number): ServeResult {
  const runFactor = jitter(next, c.noise);
  const ttfts: number[] = [];
  const e2els: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const ttft = (c.ttftMs * concurrency ** 0.5 * runFactor * jitter(next, c.noise)) / 1000;
    ttfts.push(ttft);
    e2els.push(ttft + (OUTPUT_LEN - 1) / ((c.rate / runFactor) * jitter(next, c.noise)));
  }
  const duration = (e2els.reduce((s, x) => s + x, 0) / concurrency) * 1.0;
  const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
  const latency = Object.fromEntries(
    LATENCY_METRICS.flatMap((m) =>
      LATENCY_STATS.map((s) => {
        const samples = m === "ttft" ? ttfts : m === "e2el" ? e2els : e2els.map((e, i) => (e - (ttfts[i] ?? 0)) / (OUTPUT_LEN - 1));
        const sorted = [...samples].sort((x, y) => x - y);
        const value = s === "p99" ? (sorted[sorted.length - 1] ?? 0) : s === "p90" ? (sorted[Math.floor(sorted.length * 0.9)] ?? 0) : s === "std" ? 0 : mean(samples);
        return [latencyKey(s, m), value * 1000];
      }),
    ),
  ) as Record<ReturnType<typeof latencyKey>, number>;
  return {
    ...latency,
    max_concurrency: concurrency,
    completed: REQUESTS,
    failed: 0,
    total_input_tokens: REQUESTS * 128,
    total_output_tokens: REQUESTS * OUTPUT_LEN,
    duration,
    request_throughput: REQUESTS / duration,
    output_throughput: (REQUESTS * OUTPUT_LEN) / duration,
    total_token_throughput: (REQUESTS * (OUTPUT_LEN + 128)) / duration,
    ttfts,
    latencies: e2els,
    input_lens: ttfts.map(() => 128),
    output_lens: ttfts.map(() => OUTPUT_LEN),
    errors: ttfts.map(() => ""),
  };
}

/** `runs` runs of one configuration at the given concurrencies, as one stored series. */
export function series(name: string, c: Config, runs: number, seed: number, concurrencies: readonly number[] = [1, 4]): BenchRun[] {
  const next = discreteUniform.factory(0, 1000, { seed });
  return Array.from({ length: runs }, (_, i) => ({
    id: `${name}-run${i + 1}`,
    series: name,
    run: i + 1,
    started_at: `2026-12-03T10:0${i}:00.000Z`,
    ended_at: `2026-12-03T10:0${i}:30.000Z`,
    subject: { target: "chat", lane: "chat", deployment: name, recipe: name, recipe_hash: `${name}-hash`, engine_version: "0.11.1", boot: { load_seconds: 42.5, kv_tokens: 250000, max_concurrency: 7.6 } },
    workload: { concurrencies, requests: REQUESTS, input_len: 128, output_len: OUTPUT_LEN },
    results: concurrencies.map((k) => result(c, k, next)),
  }));
}

/** An eval run whose item i is right when `right(i)`; `failed` items got no answer. */
export function evalRun(id: string, items: number, right: (i: number) => boolean, failed: readonly number[] = []): EvalRun {
  const results: EvalItemResult[] = Array.from({ length: items }, (_, i) =>
    failed.includes(i)
      ? { id: `q${i}`, expected: "B", grader: "choice", correct: false, error: "HTTP 500" }
      : { id: `q${i}`, expected: "B", grader: "choice", answer: right(i) ? "B" : "C", correct: right(i) },
  );
  const correct = results.filter((r) => r.correct).length;
  return {
    id,
    started_at: "2026-12-03T11:00:00.000Z",
    ended_at: "2026-12-03T11:01:00.000Z",
    subject: { target: "chat", deployment: id, recipe: id },
    set: { path: "sets/choice.jsonl", sha256: "a".repeat(64), items },
    temperature: 0,
    request_options: {},
    items: results,
    correct,
    total: items,
  };
}
