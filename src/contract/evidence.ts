/**
 * The evidence of an A/B (issue 14): stored `bench` and `eval` runs, as `launcher bench`, `launcher
 * eval` write them and `launcher compare` reads them. One typed home for their shapes, shared by
 * the commands and the store (which keeps each run as JSON, see Store.saveBenchRun).
 *
 * Metric keys are those of `vllm bench serve`'s result JSON (vllm/benchmarks/serve.py,
 * calculate_metrics / benchmark: `mean_ttft_ms`, `median_tpot_ms`, `p99_itl_ms`, `std_e2el_ms`,
 * `request_throughput`, `output_throughput`, `total_token_throughput`, ...), so existing tooling
 * reads launcher's `--json`. launcher always reports p90 and p99 (vLLM's `--metric-percentiles
 * 90,99`).
 */

/** The latency metrics `vllm bench serve` reports, each in milliseconds. */
export const LATENCY_METRICS = ["ttft", "tpot", "itl", "e2el"] as const;
export type LatencyMetric = (typeof LATENCY_METRICS)[number];

/** The statistics reported for each latency metric. */
export const LATENCY_STATS = ["mean", "median", "std", "p90", "p99"] as const;
export type LatencyStat = (typeof LATENCY_STATS)[number];

/** `mean_ttft_ms`, `p99_itl_ms`, ...: vLLM's key for a statistic of a metric. */
export type LatencyKey = `${LatencyStat}_${LatencyMetric}_ms`;

export function latencyKey(stat: LatencyStat, metric: LatencyMetric): LatencyKey {
  return `${stat}_${metric}_ms`;
}

/** One concurrency level of one run, keyed as `vllm bench serve` keys its result. */
export type ServeResult = Record<LatencyKey, number> & {
  /** vLLM's `max_concurrency`: the requests in flight at once. */
  readonly max_concurrency: number;
  readonly completed: number;
  readonly failed: number;
  readonly total_input_tokens: number;
  readonly total_output_tokens: number;
  /** Seconds. */
  readonly duration: number;
  readonly request_throughput: number;
  readonly output_throughput: number;
  readonly total_token_throughput: number;
  /**
   * Per request, in the order sent, one entry each (vLLM's `--save-detailed` lists, aligned by
   * index): `ttfts` and `latencies` in seconds (vLLM's RequestFuncOutput `ttft` and `latency`;
   * serve.py keeps no per-request latency list, so `latencies` is named after that field), tokens
   * from `usage`, and `errors` with "" for a request that completed, as serve.py writes
   * `[output.error for output in outputs]`. A failed request's ttft and latency are 0 (vLLM's
   * defaults): only entries whose error is "" are samples (see completedIndexes).
   */
  readonly ttfts: readonly number[];
  readonly latencies: readonly number[];
  readonly input_lens: readonly number[];
  readonly output_lens: readonly number[];
  readonly errors: readonly string[];
  /**
   * Speculative decoding's accepted / drafted tokens over the run, in PERCENT as vLLM's serve.py
   * writes this key (`acceptance_rate * 100`; vllm tests/benchmarks expect 60.0 for 6 of 10),
   * when the engine's metrics expose the counters.
   */
  readonly spec_decode_acceptance_rate?: number;
};

/** The indexes of a result's requests that completed: the only ones whose per-request figures are samples. */
export function completedIndexes(r: Pick<ServeResult, "errors">): number[] {
  return r.errors.flatMap((e, i) => (e === "" ? [i] : []));
}

/**
 * A stored bench run as the current shape, whatever shape it was written in. Runs written before
 * the per-request `errors` were aligned kept `e2els` (now `latencies`), only the first failed
 * requests' errors, and the acceptance rate as a fraction: there a failed request is known by its
 * latency of 0 (no completed request takes 0 s), its error by order, and the rate is made a percent.
 */
export function benchRunFromStored(stored: unknown): BenchRun {
  const run = stored as BenchRun;
  return { ...run, results: run.results.map((r) => serveResultFromStored(r)) };
}

interface LegacyServeResult {
  readonly e2els?: readonly number[];
  readonly latencies?: readonly number[];
  readonly errors: readonly string[];
  readonly spec_decode_acceptance_rate?: number;
}

function serveResultFromStored(r: ServeResult): ServeResult {
  const legacy = r as unknown as LegacyServeResult;
  if (legacy.latencies !== undefined || legacy.e2els === undefined) return r;
  const { e2els, ...rest } = r as ServeResult & { e2els: readonly number[] };
  let failed = 0;
  const errors = e2els.map((latency) => (latency === 0 ? (legacy.errors[failed++] ?? "failed (its error was not kept)") : ""));
  const rate = legacy.spec_decode_acceptance_rate;
  return { ...rest, latencies: e2els, errors, ...(rate === undefined ? {} : { spec_decode_acceptance_rate: rate * 100 }) };
}

/** What served a run: the target as named, and what launcher knew of it at the time. */
export interface RunSubject {
  /** As the user named it: a lane, a deployment or a served model. */
  readonly target: string;
  readonly deployment?: string;
  readonly lane?: string;
  readonly recipe?: string;
  readonly recipe_hash?: string;
  /** The image's engine version (image contract). */
  readonly engine_version?: string;
  /** The boot's figures, from history (load time, KV capacity). */
  readonly boot?: BootFigures;
}

export interface BootFigures {
  readonly load_seconds?: number;
  readonly kv_tokens?: number;
  readonly max_concurrency?: number;
}

/** What a bench run sent: the same for every run of a series. */
export interface BenchWorkload {
  readonly concurrencies: readonly number[];
  /** Requests per concurrency level, or a duration per level (seconds): whichever bounds first. */
  readonly requests?: number;
  readonly duration_s?: number;
  readonly input_len?: number;
  readonly output_len?: number;
  /** A JSONL file of prompts, named with its SHA-256 so that two runs are known to have used the same one. */
  readonly prompts_file?: { readonly path: string; readonly sha256: string };
  /** Context depth in tokens put before each prompt (llama-benchy's `--depth`). */
  readonly depth?: number;
}

/** One run of `launcher bench`; `--runs N` stores N of them with one `series`. */
export interface BenchRun {
  readonly id: string;
  readonly series: string;
  /** 1-based index of this run in its series. */
  readonly run: number;
  readonly started_at: string;
  readonly ended_at: string;
  readonly subject: RunSubject;
  readonly workload: BenchWorkload;
  readonly results: readonly ServeResult[];
}

/** How an eval item's answer is graded. */
export const GRADERS = ["exact", "contains", "regex", "choice"] as const;
export type Grader = (typeof GRADERS)[number];

/** One graded item of an eval run. */
export interface EvalItemResult {
  /** The item's id in the set (its `id` field, else its line number). */
  readonly id: string;
  readonly expected: string;
  readonly grader: Grader;
  /** The answer as given (absent when the request failed). */
  readonly answer?: string;
  readonly correct: boolean;
  /** Why no answer was had: the request's error. A failed item counts as wrong and is shown. */
  readonly error?: string;
}

/** One run of `launcher eval`. */
export interface EvalRun {
  readonly id: string;
  readonly started_at: string;
  readonly ended_at: string;
  readonly subject: RunSubject;
  readonly set: { readonly path: string; readonly sha256: string; readonly items: number };
  readonly temperature: number;
  /** Per-request options sent with every item (e.g. chat_template_kwargs). */
  readonly request_options: Readonly<Record<string, unknown>>;
  readonly items: readonly EvalItemResult[];
  readonly correct: number;
  readonly total: number;
}

/** Which stored runs to read: all filters that are given must match. Newest first. */
export interface RunQuery {
  readonly id?: string;
  readonly series?: string;
  readonly target?: string;
  readonly deployment?: string;
  readonly recipe?: string;
  readonly limit?: number;
}

/** The store's side of the evidence (Store and NullStore implement it). */
export interface EvidenceStore {
  saveBenchRun(run: BenchRun): void;
  benchRuns(query: RunQuery): BenchRun[];
  saveEvalRun(run: EvalRun): void;
  evalRuns(query: RunQuery): EvalRun[];
}
