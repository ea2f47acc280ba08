import type { EngineMetricNames } from "../adapter.js";

/**
 * llama-server's series on /metrics (only with --metrics; tools/server/server-context.cpp, the
 * metrics route: every name is written "llamacpp:" + name, counters and gauges alike, with no
 * labels): counters `prompt_tokens_total`, `tokens_predicted_total`, gauges
 * `requests_processing` ("Number of requests processing.") and `requests_deferred`; builds up to
 * late 2025 had the gauge `kv_cache_usage_ratio` ("KV-cache usage. 1 means 100 percent usage.").
 * It has no preemption nor speculative decoding counters.
 */
export const LLAMACPP_RUNNING = "llamacpp:requests_processing";

export const llamacppEngineMetrics: EngineMetricNames = {
  kvCacheUsage: ["llamacpp:kv_cache_usage_ratio"],
  requestsRunning: [LLAMACPP_RUNNING],
  requestsWaiting: ["llamacpp:requests_deferred"],
  promptTokens: ["llamacpp:prompt_tokens_total"],
  generationTokens: ["llamacpp:tokens_predicted_total"],
  preemptions: [],
  specAccepted: [],
  specDrafted: [],
};
