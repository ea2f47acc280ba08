import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import type { BenchRun, EvalRun } from "../../src/contract/evidence.js";
import { readEngineSample } from "../../src/engine/engine-metrics.js";
import { sumGauge } from "../../src/engine/metrics-text.js";
import { adapterOf } from "../../src/engine/registry.js";
import type { Comparison } from "../../src/measure/compare/compare.js";
import { Store } from "../../src/store/store.js";
import { ARITH_ITEMS, wrongIdsAt } from "../support/arith-set.js";
import { launcher, launcherContainers, listed, ok, practiceSuite, STATE_HOME, variant } from "./practice-cluster.js";

// bench, eval and compare on the engines beside vLLM: the practice engine's SGLang persona and
// its llama.cpp persona (RPC), each on 2 nodes, one after the other on the same 2 hosts. They speak
// OpenAI as vLLM does; what differs is read from each engine's adapter (its metric names, and
// speculative decoding counters that neither exposes).
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-engines-measure-it-");

const SET = path.join(dir, "arith.jsonl");
writeFileSync(SET, `${ARITH_ITEMS.map((i) => JSON.stringify(i)).join("\n")}\n`);

// Small and bounded: two levels of 4 requests of 20 tokens, twice (compare's Welch needs two runs a side).
const REQUESTS = 4;
const OUTPUT_LEN = 20;
const RUNS = 2;
const WORKLOAD = ["--concurrency", "1,2", "--requests", String(REQUESTS), "--input-len", "16", "--output-len", String(OUTPUT_LEN), "--runs", String(RUNS)];

interface Case {
  /** The recipe's `engine` (the adapter's name). */
  readonly engine: string;
  readonly deployment: string;
  readonly base: string;
  /** Tokens per second per stream. */
  readonly rate: number;
  /** PRACTICE_WRONG_ANSWERS: the share of the prompt-hash range answered wrongly. */
  readonly wrong: number;
}
const SGLANG: Case = { engine: "sglang", deployment: "sg-measure", base: "practice-sglang-2x", rate: 200, wrong: 0 };
// Slower, and wrong on about half the set: compare then has a difference to call on each side.
const LLAMACPP: Case = { engine: "llamacpp", deployment: "lc-measure", base: "practice-llamacpp-2x", rate: 50, wrong: 0.5 };
const wrongIds = (c: Case): string[] => wrongIdsAt(c.wrong);


function storedSeries(series: string): BenchRun[] {
  const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
  try {
    return store.benchRuns({ series }).sort((a, b) => a.run - b.run);
  } finally {
    store.close();
  }
}

/** `launcher bench` as a user runs it (the table), and the series it says it stored, as stored. */
async function bench(c: Case): Promise<{ table: string; runs: BenchRun[] }> {
  const r = ok(await launcher(["bench", `deployment/${c.deployment}`, ...WORKLOAD], 120_000), `bench ${c.deployment}`);
  const series = /^stored: series (\S+), runs /m.exec(r.stdout)?.[1];
  assert.ok(series, r.stdout);
  return { table: r.stdout, runs: storedSeries(series) };
}

function assertBench(c: Case, table: string, runs: readonly BenchRun[]): void {
  assert.equal(runs.length, RUNS);
  for (const run of runs) {
    assert.equal(run.subject.deployment, c.deployment);
    assert.deepEqual(run.results.map((x) => x.max_concurrency), [1, 2]);
    for (const x of run.results) {
      assert.equal(x.completed, REQUESTS, JSON.stringify(x.errors));
      assert.equal(x.failed, 0);
      // The engine's own `usage` (stream_options.include_usage), of the length asked (max_completion_tokens).
      assert.deepEqual(x.output_lens, Array(REQUESTS).fill(OUTPUT_LEN), "each answer of the length asked, counted by the engine");
      assert.equal(x.total_output_tokens, REQUESTS * OUTPUT_LEN);
      assert.ok(x.total_input_tokens > 0 && x.total_input_tokens === x.input_lens.reduce((a, n) => a + n, 0), `input ${x.total_input_tokens}`);
      assert.ok(x.ttfts.every((t) => t > 0), `ttfts ${x.ttfts.join(", ")}`);
      assert.ok(x.mean_ttft_ms > 0 && x.p99_ttft_ms >= x.mean_ttft_ms, `ttft mean ${x.mean_ttft_ms} p99 ${x.p99_ttft_ms}`);
      assert.ok(x.output_throughput > 0 && x.mean_tpot_ms > 0);
      // Neither engine exposes speculative decoding's counters: the acceptance is none, never 0.
      assert.equal("spec_decode_acceptance_rate" in x, false, `${c.engine}: ${String(x.spec_decode_acceptance_rate)}`);
    }
  }
  // The table's rows: every level of every run done, its acceptance column "-" (none).
  const rows = table.split("\n").filter((l) => /^\s+[12]\s+\d+\s+\d+\s/.test(l));
  assert.equal(rows.length, RUNS * 2, table);
  for (const row of rows) assert.match(row, new RegExp(`^\\s+[12]\\s+${REQUESTS}\\s+0\\s.*\\s-$`), row);
}

/** The engine's /metrics as its adapter names the series: the bench's tokens counted, nothing running. */
async function assertEngineMetrics(c: Case, endpoint: string, benched: readonly BenchRun[]): Promise<string> {
  const adapter = adapterOf(c.engine);
  assert.ok(adapter?.engineMetrics, `${c.engine} names its metrics`);
  assert.equal(adapter.specDecodeMetrics, undefined, `${c.engine} names no speculative decoding counters`);
  const res = await fetch(`${endpoint}${adapter.metricsPath}`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(res.status, 200);
  const text = await res.text();
  const sample = readEngineSample(text, adapter.engineMetrics);
  const generated = benched.reduce((a, run) => a + run.results.reduce((b, x) => b + x.total_output_tokens, 0), 0);
  assert.ok((sample.generationTokens ?? 0) >= generated, `${c.engine}: ${String(sample.generationTokens)} tokens generated by its own count, bench counted ${generated}`);
  assert.ok((sample.promptTokens ?? 0) > 0, `${c.engine}: prompt tokens ${String(sample.promptTokens)}`);
  assert.equal(sample.requestsRunning, 0, "the running-requests gauge, read, with nothing running");
  // What drain reads before a lane swap lets this deployment go.
  assert.equal(sumGauge(text, adapter.runningRequestsMetric), 0, adapter.runningRequestsMetric);
  return `generation ${String(sample.generationTokens)}, prompt ${String(sample.promptTokens)}, running ${String(sample.requestsRunning)}`;
}

function assertEval(c: Case, stdout: string): EvalRun {
  const { warnings, ...run } = JSON.parse(stdout) as EvalRun & { warnings: string[] };
  assert.deepEqual(warnings, []);
  const wrong = wrongIds(c);
  assert.deepEqual(run.items.filter((i) => !i.correct).map((i) => i.id), wrong, "exactly the items the persona answers wrongly");
  assert.ok(run.items.every((i) => i.error === undefined), JSON.stringify(run.items.filter((i) => i.error !== undefined)));
  assert.equal(run.correct, ARITH_ITEMS.length - wrong.length);
  assert.equal(run.total, ARITH_ITEMS.length);
  assert.equal(run.subject.deployment, c.deployment);
  // The choice rule's answer, whole, as the persona gives it.
  if (!wrong.includes("c2")) assert.equal(run.items.find((i) => i.id === "c2")?.answer, "3 * 5 = 15.\nAnswer: A");
  return run;
}

/** Boots `c` on both hosts, benches and evaluates it, and takes it down whatever happened. */
async function measure(c: Case, t: { diagnostic: (s: string) => void }): Promise<void> {
  const env = `[env]\nPRACTICE_TOKENS_PER_SEC = "${c.rate}"\n${c.wrong > 0 ? `PRACTICE_WRONG_ANSWERS = "${c.wrong}"\n` : ""}`;
  const recipe = variant(dir, c.deployment, c.base, env);
  try {
    ok(await launcher(["up", recipe, "--nodes", "n1,n2"], 180_000), `up ${c.deployment}`);
    const d = await listed(c.deployment);
    assert.deepEqual([d?.engine, d?.status], [c.engine, "serving"]);
    const { table, runs } = await bench(c);
    assertBench(c, table, runs);
    const metrics = await assertEngineMetrics(c, d?.endpoint ?? "", runs);
    const r = ok(await launcher(["eval", `deployment/${c.deployment}`, "--set", SET, "--json"]), `eval ${c.deployment}`);
    const run = assertEval(c, r.stdout);
    const at = (k: number): string => runs.map((x) => x.results[k]).map((l) => `${l?.output_throughput.toFixed(1)} tok/s ttft ${l?.mean_ttft_ms.toFixed(1)} ms`).join(" / ");
    t.diagnostic(`${c.engine}: c=1 ${at(0)}; c=2 ${at(1)}; metrics ${metrics}; eval ${run.correct}/${run.total}`);
  } finally {
    ok(await launcher(["down", `deployment/${c.deployment}`, "--grace", "1"]), `down ${c.deployment}`);
  }
  assert.deepEqual(launcherContainers(HOSTS), []);
}

describe("bench, eval and compare on SGLang and llama.cpp (practice personas, 2 nodes each)", { concurrency: false }, () => {
  test("SGLang: bench counts the engine's tokens and times the first, reads its metrics by the adapter's names and says no spec-decode acceptance; eval scores the persona's answers", { timeout: 240_000 }, async (t) => {
    await measure(SGLANG, t);
  });

  test("llama.cpp over RPC: the same, with the length asked as max_completion_tokens and the usage in the stream's last chunk; eval finds exactly the items answered wrongly", { timeout: 240_000 }, async (t) => {
    await measure(LLAMACPP, t);
  });

  test("compare of the two stored deployments: the slower llama.cpp and its wrong answers called against SGLang, no spec-decode row", { timeout: 60_000 }, async (t) => {
    const r = ok(await launcher(["compare", `deployment/${SGLANG.deployment}`, `deployment/${LLAMACPP.deployment}`, "--json"]), "compare");
    const c = JSON.parse(r.stdout) as Comparison;
    assert.deepEqual([c.a.deployment, c.b.deployment], [SGLANG.deployment, LLAMACPP.deployment]);
    assert.deepEqual([c.a.runs, c.b.runs], [RUNS, RUNS]);
    assert.deepEqual(
      c.requests.map((x) => [x.concurrency, x.a.completed, x.a.failed, x.b.completed, x.b.failed]),
      [1, 2].map((k) => [k, RUNS * REQUESTS, 0, RUNS * REQUESTS, 0]),
    );
    assert.equal(c.bench.some((m) => m.metric === "spec_decode_acceptance_rate"), false, "no acceptance row: neither side has one");
    for (const k of [1, 2]) {
      const row = (metric: string) => c.bench.find((m) => m.metric === metric && m.concurrency === k);
      const tput = row("output_throughput");
      assert.ok(tput && row("mean_ttft_ms") && row("mean_tpot_ms"), `c=${k}: ${JSON.stringify(c.bench.map((m) => m.metric))}`);
      // 200 against 50 tokens/s per stream. Two runs a side give Welch few degrees of freedom, so
      // the verdict may be "within noise" on a busy machine, but never that llama.cpp is faster.
      assert.ok(tput.a.mean > 2 * tput.b.mean, `c=${k}: ${tput.a.mean} vs ${tput.b.mean}`);
      assert.notEqual(tput.verdict, "faster", JSON.stringify(tput));
    }
    const wrong = wrongIds(LLAMACPP).length;
    assert.deepEqual([c.eval?.a.correct, c.eval?.b.correct, c.eval?.a.total], [ARITH_ITEMS.length, ARITH_ITEMS.length - wrong, ARITH_ITEMS.length]);
    // All 7 discordant items favour A: McNemar's exact p = 2 x 0.5^7 = 0.016, under 0.05.
    assert.equal(wrong, 7, "this set splits at 0.5 into 7 wrong");
    assert.equal(c.eval?.verdict, "worse", JSON.stringify(c.eval));
    t.diagnostic(`compare: ${c.bench.filter((m) => m.metric === "output_throughput").map((m) => `c=${m.concurrency} ${m.a.mean.toFixed(1)} vs ${m.b.mean.toFixed(1)} tok/s ${m.verdict}`).join("; ")}; eval ${c.eval?.verdict}; warnings ${c.warnings.join(" | ") || "none"}`);
  });
});
