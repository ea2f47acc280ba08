import { LATENCY_METRICS, LATENCY_STATS, latencyKey, type LatencyKey, type LatencyMetric, type LatencyStat, type ServeResult } from "../../contract/evidence.js";
import type { EngineAdapter } from "../../engine/adapter.js";
import { sumGauge } from "../../engine/metrics-text.js";
import { mean, median, percentile, std } from "./stats.js";
import type { RequestOutcome } from "./stream.js";

const STAT: Record<LatencyStat, (xs: readonly number[]) => number> = {
  mean,
  median,
  std,
  p90: (xs) => percentile(xs, 90),
  p99: (xs) => percentile(xs, 99),
};

/**
 * One request's TPOT as vLLM's calculate_metrics computes it: (latency - ttft) / (output tokens -
 * 1), only for a request of more than one output token (none otherwise). In the unit given.
 */
export function tpotOf(latency: number, ttft: number, outputTokens: number): number[] {
  return outputTokens > 1 ? [(latency - ttft) / (outputTokens - 1)] : [];
}

/**
 * One concurrency level's result from its requests' outcomes, as vllm/benchmarks/serve.py
 * calculate_metrics computes it: only completed requests count in the latencies and tokens; TPOT
 * is (e2el - ttft) / (output_len - 1) for requests of more than one output token; ITL is every
 * completed request's gaps pooled; throughputs are over `durationS`, the whole level's wall time
 * (benchmark(): from before the first request to after the last one ended). Latencies in ms.
 */
export function serveResult(outcomes: readonly RequestOutcome[], durationS: number, maxConcurrency: number, specDecodeAcceptanceRate?: number): ServeResult {
  const done = outcomes.flatMap((o) => (o.ok ? [o] : []));
  const seconds: Record<LatencyMetric, number[]> = {
    ttft: done.map((o) => o.ttft_s),
    tpot: done.flatMap((o) => tpotOf(o.latency_s, o.ttft_s, o.output_tokens)),
    itl: done.flatMap((o) => o.itl_s),
    e2el: done.map((o) => o.latency_s),
  };
  const latencies = {} as Record<LatencyKey, number>;
  for (const metric of LATENCY_METRICS) {
    for (const stat of LATENCY_STATS) latencies[latencyKey(stat, metric)] = STAT[stat](seconds[metric]) * 1000;
  }
  const totalInput = done.reduce((a, o) => a + o.input_tokens, 0);
  const totalOutput = done.reduce((a, o) => a + o.output_tokens, 0);
  return {
    ...latencies,
    max_concurrency: maxConcurrency,
    completed: done.length,
    failed: outcomes.length - done.length,
    total_input_tokens: totalInput,
    total_output_tokens: totalOutput,
    duration: durationS,
    request_throughput: done.length / durationS,
    output_throughput: totalOutput / durationS,
    total_token_throughput: (totalInput + totalOutput) / durationS,
    // Per request in the order sent, a failed one as 0 with its error, a completed one with ""
    // (vLLM's RequestFuncOutput defaults; serve.py's `errors`).
    ttfts: outcomes.map((o) => (o.ok ? o.ttft_s : 0)),
    latencies: outcomes.map((o) => (o.ok ? o.latency_s : 0)),
    input_lens: outcomes.map((o) => o.input_tokens),
    output_lens: outcomes.map((o) => (o.ok ? o.output_tokens : 0)),
    errors: outcomes.map((o) => (o.ok ? "" : o.error)),
    ...(specDecodeAcceptanceRate === undefined ? {} : { spec_decode_acceptance_rate: specDecodeAcceptanceRate }),
  };
}

/** The Prometheus counters an engine's adapter names for speculative decoding. */
export type SpecDecodeCounters = NonNullable<EngineAdapter["specDecodeMetrics"]>;

/** The counters' values in one /metrics scrape (every series summed); undefined where absent. */
export function readSpecCounters(metricsText: string, names: SpecDecodeCounters): { accepted?: number; drafted?: number } {
  const accepted = sumGauge(metricsText, names.accepted);
  const drafted = sumGauge(metricsText, names.drafted);
  return { ...(accepted === undefined ? {} : { accepted }), ...(drafted === undefined ? {} : { drafted }) };
}

/**
 * Accepted / drafted tokens between two scrapes, as vLLM defines the acceptance rate
 * (vllm/v1/spec_decode/metrics.py: `rate(..._num_accepted_tokens_total) /
 * rate(..._num_draft_tokens_total)`), in percent as vllm/benchmarks/serve.py writes
 * `spec_decode_acceptance_rate` (`acceptance_rate * 100`): undefined when the engine does not
 * expose the counters or drafted nothing over the run.
 */
export function acceptanceRate(before: { accepted?: number; drafted?: number }, after: { accepted?: number; drafted?: number }): number | undefined {
  if (before.accepted === undefined || before.drafted === undefined || after.accepted === undefined || after.drafted === undefined) return undefined;
  const drafted = after.drafted - before.drafted;
  return drafted > 0 ? ((after.accepted - before.accepted) / drafted) * 100 : undefined;
}
