import type { EngineAdapter, EngineMemoryFlags } from "../adapter.js";
import { pythonGenerationProbe } from "../generation-probe.js";
import { fabricEnv, FABRIC_ENV_KEYS } from "../../cluster/fabric-env.js";
import { sglangRankCommand } from "./command.js";
import { refuseImageOnlySglangKeySpellings, sglangFlags, sglangFlagsFrom, sglangSpellings } from "./flags.js";
import { lazy } from "../../config/lazy.js";
import { sglangHint } from "./hints.js";
import { sglangImage } from "./image.js";
import { BOOT_PHASES, EXCEPTION, FATAL, PEER_LOSS, READY, readSglangLine, RENDEZVOUS, sglangLineTime, WARNINGS, WRAPPERS } from "./log-shapes.js";
import { SGLANG_FORWARDED, SGLANG_REFUSED } from "./routes.js";

/*
 * How much of a node SGLang claims (sgl-project/sglang 001067ff):
 * - python/sglang/srt/server_args.py ServerArgs.mem_fraction_static: "The fraction of the memory
 *   used for static allocation (model weights and KV cache memory pool)". No flag sizes the KV
 *   cache in bytes (--max-total-tokens counts tokens): no kvCacheBytes.
 * - The share is of the memory free when SGLang starts, not of the total: model_runner.py keeps
 *   the free memory before it loads the weights (get_available_gpu_memory: torch.cuda.mem_get_info,
 *   the least over the TP ranks), and its KV cache is what is free after the load less that x
 *   (1 - mem_fraction_static) (model_runner_kv_cache_mixin.py _profile_available_bytes), the rest
 *   left for activations and CUDA graphs.
 * - Without the flag, _handle_gpu_memory_settings computes it at start: (gpu_mem - reserved) /
 *   gpu_mem, gpu_mem the GPU's capacity in MiB, reserved 512 + 1.5 x max(chunked_prefill_size,
 *   2048) + tp_size x pp_size / 8 x 1024 + the CUDA graphs' reserve (decode max batch x 2, more
 *   with DP attention, per prefill batch size 8, 1.5 GiB with an MLA model), at least 10 GiB on a
 *   GPU of more than 60 GiB, DeepEP's buffers on top, then lowered again for a multimodal model
 *   (adjust_mem_fraction_for_vlm). chunked_prefill_size and the graphs' batch sizes depend on the
 *   GPU's memory themselves: launcher does not guess it, and says so instead of a fit check.
 */
const sglangMemory = lazy(
  () =>
    ({
      kvCacheBytes: [],
      // With the unique prefixes argparse takes for it among the table's options (`--mem-fraction`).
      utilization: sglangSpellings(["--mem-fraction-static"]),
      withoutFlag: "SGLang computes its share when it starts, from the GPU's memory, tp and pp, its chunked prefill and CUDA graph sizes and the model (server_args.py _handle_gpu_memory_settings)",
      shareOf: "free-at-start",
    }) as const satisfies EngineMemoryFlags,
);
// Read from the flag table at their first use (getters below), as the table itself is.
const modelFlags = lazy(() => ({ servedName: sglangSpellings(["--served-model-name"]), revision: sglangSpellings(["--revision"]) }));

export const sglang: EngineAdapter = {
  name: "sglang",
  recipeUse: {
    engine: "SGLang",
    // tp and pp become --tp-size and --pp-size (./command.ts). SGLang's environ.py names its
    // variables SGLANG_* (older ones SGL_*: SGL_DG_CACHE_DIR, SGL_JIT_DEEPGEMM_PRECOMPILE).
    keys: ["tensor_parallel_size", "pipeline_parallel_size"],
    envPrefixes: ["SGLANG_", "SGL_"],
    ignored: {
      distributed_backend: "remove it: SGLang joins its nodes itself (every node runs the same launch with --dist-init-addr, --nnodes and --node-rank, which launcher writes)",
      entrypoint: "remove it: launcher runs python3 -m sglang.launch_server itself (passing the API key from the env), so the image needs python3 with sglang",
      unsafe_dev_routes: "remove it: launcher knows no env switch of SGLang's that opens its admin routes (its native routes outside /v1 are never forwarded by the gateway)",
    },
  },
  rankCommand: sglangRankCommand,
  // The head hosts torch's TCPStore at --dist-init-addr, which the other ranks connect to.
  startOrder: () => "head first",
  // A rank >= 1 serves SGLang's dummy health check at --host/--port, which ./command.ts makes
  // loopback and the deployment's api_port (launch_dummy_health_check_server, engine.py).
  workersBindApiPort: true,
  // NCCL's and Gloo's fabric env (../../cluster/fabric-env.ts): SGLang's ranks talk through them.
  // SGLANG_HOST_IP: the node's own address as SGLang takes it before guessing one
  // (python/sglang/srt/utils/network.py get_local_ip_auto, sgl-project/sglang 0564b521).
  nodeEnv: (_recipe, node) => ({ ...fabricEnv(node), ...(node.fabric_ip === undefined ? {} : { SGLANG_HOST_IP: node.fabric_ip }) }),
  managedEnv: [...FABRIC_ENV_KEYS, "SGLANG_HOST_IP"],
  image: sglangImage,
  // ServerArgs.served_model_name ("Override the model name returned by the v1/models endpoint")
  // and revision (python/sglang/srt/server_args.py).
  get modelFlags() {
    return modelFlags();
  },
  // http_server.py: GET /health is 200 once the server is warm (503 before, and when the
  // scheduler does not answer health_generate in time).
  healthPath: "/health",
  // The image runs python3 (the engine is a Python package): the generation probe is a few lines of urllib.
  generationProbe: pythonGenerationProbe,
  metricsPath: "/metrics",
  // python/sglang/srt/metrics/collector.py SchedulerMetricsCollector: Gauge
  // "sglang:num_running_reqs" ("The number of running requests."), labelled per rank.
  runningRequestsMetric: "sglang:num_running_reqs",
  // The same collector's gauges sglang:num_queue_reqs and sglang:token_usage (the KV pool's used
  // share), and TokenizerMetricsCollector's counters sglang:prompt_tokens and
  // sglang:generation_tokens (exposed with `_total`). Speculative decoding reports only a gauge of
  // the mean accept length (sglang:spec_accept_length), not counts: no acceptance counters.
  engineMetrics: {
    kvCacheUsage: ["sglang:token_usage"],
    requestsRunning: ["sglang:num_running_reqs"],
    requestsWaiting: ["sglang:num_queue_reqs"],
    promptTokens: ["sglang:prompt_tokens_total"],
    generationTokens: ["sglang:generation_tokens_total"],
    preemptions: [],
    specAccepted: [],
    specDrafted: [],
  },
  get flags() {
    return sglangFlags();
  },
  // The image's own parser (./parser-dump.ts) with launcher's policy of ./flags.ts. Its
  // --mem-fraction-static default is None (SGLang computes it at start): no default share from it.
  flagsFrom: (dump, image) => ({ flags: refuseImageOnlySglangKeySpellings(sglangFlagsFrom(dump, { by: "image", engine: "SGLang", version: dump.engine_version, image })) }),
  bootPhases: BOOT_PHASES,
  readLine: readSglangLine,
  fatalPatterns: FATAL,
  exceptionPattern: EXCEPTION,
  wrapperPatterns: WRAPPERS,
  peerLossPatterns: PEER_LOSS,
  warningPatterns: WARNINGS,
  readyPattern: READY,
  rendezvousPatterns: RENDEZVOUS,
  hintFor: sglangHint,
  lineTime: sglangLineTime,
  get memoryFlags() {
    return sglangMemory();
  },
  apiMethods: SGLANG_FORWARDED,
  apiRefused: SGLANG_REFUSED,
};
