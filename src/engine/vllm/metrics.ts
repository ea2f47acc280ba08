import type { EngineMetricNames } from "../adapter.js";

/**
 * vLLM's series on /metrics for the daemon's live view, as vllm/v1/metrics/loggers.py
 * PrometheusStatLogger.__init__ registers them (read at vllm-project/vllm 005a810b, the 0.10
 * line), each with the labels model_name and engine (one series per engine core):
 * - Gauges `vllm:num_requests_running` ("Number of requests in model execution batches") and
 *   `vllm:num_requests_waiting` ("Number of requests waiting to be processed").
 * - Gauge `vllm:kv_cache_usage_perc` ("KV-cache usage. 1 means 100 percent usage."), which 0.9
 *   renamed from `vllm:gpu_cache_usage_perc` ("Deprecated in 0.9"; both set from
 *   scheduler_stats.kv_cache_usage while the old one is still shown): the new name first.
 * - Counters `vllm:num_preemptions` ("Cumulative number of preemption from the engine"),
 *   `vllm:prompt_tokens` ("Number of prefill tokens processed") and `vllm:generation_tokens`,
 *   which prometheus_client exposes with the `_total` suffix (prometheus_client/metrics.py
 *   Counter: "_total" is appended to the sample name).
 * - Speculative decoding's counters: the adapter's specDecodeMetrics (vllm/v1/spec_decode/metrics.py).
 */
export function vllmEngineMetrics(spec: { readonly accepted: string; readonly drafted: string }): EngineMetricNames {
  return {
    kvCacheUsage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    requestsRunning: ["vllm:num_requests_running"],
    requestsWaiting: ["vllm:num_requests_waiting"],
    promptTokens: ["vllm:prompt_tokens_total"],
    generationTokens: ["vllm:generation_tokens_total"],
    preemptions: ["vllm:num_preemptions_total"],
    specAccepted: [spec.accepted],
    specDrafted: [spec.drafted],
  };
}
