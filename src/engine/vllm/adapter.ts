import type { EngineAdapter, LineTime, LogLine } from "../adapter.js";
import { pythonGenerationProbe } from "../generation-probe.js";
import { vllmRankCommand, vllmStartOrder } from "./command.js";
import { VLLM_DEV_SWITCHES } from "./dev-switches.js";
import { defaultUtilizationOf, refuseImageOnlyKeySpellings, vllmFlags, vllmFlagsFrom, vllmSpellings, vllmTableUtilization } from "./flags.js";
import { lazy } from "../../config/lazy.js";
import { vllmHint } from "./hints.js";
import { SERVE_ENTRYPOINT, vllmImage } from "./image.js";
import { vllmEngineMetrics } from "./metrics.js";
import { VLLM_ENV_OVERRIDES, VLLM_NODE_ENV_KEYS, vllmNodeEnv } from "./node-env.js";
import { VLLM_FORWARDED, VLLM_REFUSED } from "./routes.js";
import { BOOT_PHASES, EXCEPTION, FATAL, PEER_LOSS, readVllmLine, refineVllmCause, RENDEZVOUS, vllmNodeAddress, vllmPeerAddress, WARNINGS, WRAPPERS } from "./log-shapes.js";

// The header's time is vllm/logger.py's _DATE_FORMAT "%m-%d %H:%M:%S" (read in log-shapes.ts). It
// has no year: it goes on a leap year's clock, and is only compared within one log.
function lineTime(line: LogLine): LineTime | undefined {
  if (line.time === undefined) return undefined;
  const [mo, d, h, mi, s] = line.time.split(/[- :]/).map(Number) as [number, number, number, number, number];
  return { text: line.time, ms: Date.UTC(2000, mo - 1, d, h, mi, s) };
}

const SPEC_DECODE = { accepted: "vllm:spec_decode_num_accepted_tokens_total", drafted: "vllm:spec_decode_num_draft_tokens_total" } as const;

// Read from the flag table at their first use (getters below), as the table itself is.
const modelFlags = lazy(() => ({ servedName: vllmSpellings(["--served-model-name"]), revision: vllmSpellings(["--revision"]) }));
const memoryFlags = lazy(() => ({ kvCacheBytes: vllmSpellings(["--kv-cache-memory-bytes"]), utilization: vllmSpellings(["--gpu-memory-utilization"]), defaultUtilization: vllmTableUtilization() }));

export const vllm: EngineAdapter = {
  name: "vllm",
  // Every engine key: the Ray backend and the mp one (./command.ts), the serve ENTRYPOINT it can
  // replace (./image.ts), the dev-route switches (./dev-switches.ts). vllm/envs.py names every
  // variable vLLM reads VLLM_*.
  recipeUse: { engine: "vLLM", keys: ["tensor_parallel_size", "pipeline_parallel_size", "distributed_backend", "entrypoint", "unsafe_dev_routes"], envPrefixes: ["VLLM_"] },
  rankCommand: vllmRankCommand,
  startOrder: vllmStartOrder,
  nodeEnv: vllmNodeEnv,
  // Entrypoint and version the image must have: ./image.ts, with vLLM's Dockerfile.
  image: vllmImage,
  // vllm/entrypoints/serve/instrumentator/health.py: GET /health is 200 once the engine serves,
  // 503 when it died. vllm/v1/metrics/loggers.py: the gauge `vllm:num_requests_running`
  // ("Number of requests in model execution batches"), one series per engine, on /metrics.
  // vllm/config/model.py: ModelConfig.served_model_name and revision, whose flags
  // (vllm/engine/arg_utils.py add_cli_args) are --served-model-name and --revision, each also
  // under the prefixes argparse takes for it (`--served-model`, ./flags.ts).
  get modelFlags() {
    return modelFlags();
  },
  healthPath: "/health",
  // The image runs python3 (the engine is a Python package): the generation probe is a few lines of urllib.
  generationProbe: pythonGenerationProbe,
  // The ENTRYPOINT vllm/vllm-openai bakes and the image check demands (./image.ts).
  defaultEntrypoint: SERVE_ENTRYPOINT,
  metricsPath: "/metrics",
  runningRequestsMetric: "vllm:num_requests_running",
  // vllm/v1/spec_decode/metrics.py SpecDecodingProm: prometheus_client Counters
  // `vllm:spec_decode_num_accepted_tokens` and `vllm:spec_decode_num_draft_tokens` (labels
  // model_name, engine; registered by vllm/v1/metrics/loggers.py PrometheusStatLogger only when a
  // speculative config is set), which prometheus_client exposes with the `_total` suffix; its
  // docstring defines the acceptance rate as rate(accepted) / rate(draft).
  specDecodeMetrics: SPEC_DECODE,
  // What the daemon scrapes for its live view: ./metrics.ts, with vLLM's source.
  engineMetrics: vllmEngineMetrics(SPEC_DECODE),
  get flags() {
    return vllmFlags();
  },
  // The image's own parser (./parser-dump.ts) with launcher's policy of ./flags.ts, and the
  // --gpu-memory-utilization default it gives (vllm/config/cache.py: 0.92 in 0.25.1).
  flagsFrom: (dump, image) => {
    const flags = refuseImageOnlyKeySpellings(vllmFlagsFrom(dump, { by: "image", engine: "vLLM", version: dump.engine_version, image }));
    const utilization = defaultUtilizationOf(dump);
    return utilization === undefined ? { flags } : { flags, defaultUtilization: utilization };
  },
  managedEnv: VLLM_NODE_ENV_KEYS,
  // VLLM_NIC_SELECTION_VARS and VLLM_GPU_NIC_PCIE_MAPPING: ./node-env.ts, with vLLM's source.
  envOverrides: VLLM_ENV_OVERRIDES,
  // Admin and development routes an env switch opens: ./dev-switches.ts, with vLLM's source.
  devSwitches: VLLM_DEV_SWITCHES,
  // Every line shape below: src/engine/vllm/log-shapes.ts, each with its place in vLLM's source.
  bootPhases: BOOT_PHASES,
  readLine: readVllmLine,
  fatalPatterns: FATAL,
  exceptionPattern: EXCEPTION,
  wrapperPatterns: WRAPPERS,
  refineCause: refineVllmCause,
  peerLossPatterns: PEER_LOSS,
  peerAddress: vllmPeerAddress,
  nodeAddress: vllmNodeAddress,
  warningPatterns: WARNINGS,
  readyPattern: /Application startup complete/,
  hintFor: vllmHint,
  lineTime,
  // vllm/config/cache.py CacheConfig: `kv_cache_memory_bytes`, "Size of KV Cache per GPU in bytes
  // ... (when not-None) ignores gpu_memory_utilization"; `gpu_memory_utilization: float =
  // Field(default=0.92, gt=0, le=1)`, "If unspecified, will use the default value of 0.92" (0.9
  // for most of vLLM's history, 0.92 by the release ./options.ts names).
  // vllm/v1/worker/gpu_worker.py: init_device takes requested_memory = total_memory x
  // gpu_memory_utilization (and refuses to start when less is free); determine_available_memory
  // returns kv_cache_memory_bytes as it is when set ("skipped memory profiling"), else
  // requested_memory - non_kv_cache_memory (weights, peak activations, non-torch memory): weights,
  // working memory and KV stay within total x utilization. Recipes write `--kv-cache-memory`, which
  // argparse takes as the unique prefix of `--kv-cache-memory-bytes` (see ./flags.ts, allow_abbrev).
  get memoryFlags() {
    return memoryFlags();
  },
  // The rendezvous of the ranks across nodes, mp and Ray: RENDEZVOUS in ./log-shapes.ts.
  rendezvousPatterns: RENDEZVOUS,
  // The gateway forwards these and nothing else under /v1 (./routes.ts, read from vLLM's routers,
  // says which routes are left out and why); GET /v1/models is answered by the gateway itself.
  apiMethods: VLLM_FORWARDED,
  apiRefused: VLLM_REFUSED,
};
