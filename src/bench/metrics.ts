import { LATENCY_METRICS, LATENCY_STATS, latencyKey, type LatencyKey, type LatencyMetric, type LatencyStat, type ServeResult } from "../evidence/records.js";
import type { EngineAdapter } from "../engine/adapter.js";
import { sumGauge } from "../deploy/drain.js";
import { mean, median, percentile, std } from "./stats.js";
import type { RequestOutcome } from "./stream.js";

/** How many failed requests' errors a result keeps (the count is always whole). */
export const ERRORS_KEPT = 10;

const STAT: Record<LatencyStat, (xs: readonly number[]) => number> = {
  mean,
  median,
  std,
  p90: (xs) => percentile(xs, 90),
  p99: (xs) => percentile(xs, 99),
};

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
    tpot: done.flatMap((o) => (o.output_tokens > 1 ? [(o.latency_s - o.ttft_s) / (o.output_tokens - 1)] : [])),
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
    // Per request in the order sent, a failed one as 0 (vLLM's RequestFuncOutput defaults).
    ttfts: outcomes.map((o) => (o.ok ? o.ttft_s : 0)),
    e2els: outcomes.map((o) => (o.ok ? o.latency_s : 0)),
    input_lens: outcomes.map((o) => o.input_tokens),
    output_lens: outcomes.map((o) => (o.ok ? o.output_tokens : 0)),
    errors: outcomes.flatMap((o) => (o.ok ? [] : [o.error])).slice(0, ERRORS_KEPT),
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
 * rate(..._num_draft_tokens_total)`): undefined when the engine does not expose the counters or
 * drafted nothing over the run.
 */
export function acceptanceRate(before: { accepted?: number; drafted?: number }, after: { accepted?: number; drafted?: number }): number | undefined {
  if (before.accepted === undefined || before.drafted === undefined || after.accepted === undefined || after.drafted === undefined) return undefined;
  const drafted = after.drafted - before.drafted;
  return drafted > 0 ? (after.accepted - before.accepted) / drafted : undefined;
}
