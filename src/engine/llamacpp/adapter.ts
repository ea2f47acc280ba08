import type { EngineAdapter } from "../adapter.js";
import { curlGenerationProbe } from "../generation-probe.js";
import { llamacppRankCommand, llamacppStartOrder } from "./command.js";
import { llamacppFlags, llamacppSpellings } from "./flags.js";
import { llamacppHint } from "./hints.js";
import { ggufContainerPaths, ggufWeightFiles } from "./gguf.js";
import { llamacppImage } from "./image.js";
import { BOOT_PHASES, EXCEPTION, FATAL, llamacppNodeAddress, llamacppPeerAddress, PEER_LOSS, READY, readLlamacppLine, WARNINGS, WRAPPERS } from "./log-shapes.js";
import { LLAMACPP_RUNNING, llamacppEngineMetrics } from "./metrics.js";
import { LLAMACPP_FORWARDED, LLAMACPP_REFUSED } from "./routes.js";

/** The KV cache the fit check counts for llama.cpp on each node: an allowance (Qwen3-235B-A22B's 94 layers x 4 KV heads x 128 x K and V in f16 at --ctx-size 32768: 5.9 GiB, about 3 GiB on each of two nodes). */
export const LLAMACPP_KV_ALLOWANCE_GIB = 4;

const CTX_SIZE = llamacppSpellings("--ctx-size");

export const llamacpp: EngineAdapter = {
  name: "llamacpp",
  // The head's program (entrypoint, ./command.ts) and the layer split over the nodes' GPUs
  // (pipeline_parallel_size: llama.cpp's --split-mode layer, its default, puts a share of the
  // layers on each RPC device; the recipe's check makes it required_nodes x GPUs). common/arg.cpp
  // reads LLAMA_ARG_* (each option's env), LLAMA_API_KEY, LLAMA_CACHE; ggml reads GGML_*.
  recipeUse: {
    engine: "llama.cpp",
    keys: ["pipeline_parallel_size", "entrypoint", "gguf"],
    envPrefixes: ["LLAMA_", "GGML_"],
    ignored: {
      tensor_parallel_size: "remove it: llama.cpp splits the model's layers over the nodes' GPUs, which pipeline_parallel_size (= required_nodes) says",
      distributed_backend: "remove it: launcher starts llama.cpp's own RPC workers (rpc-server) on the worker nodes",
    },
  },
  rankCommand: llamacppRankCommand,
  startOrder: llamacppStartOrder,
  // The head connects to each worker's rpc-server once, at its start: it starts when each one's
  // port accepts (its log cannot say so: ./log-shapes.ts). A probe's connection is harmless:
  // rpc-server serves one client at a time and, once one closes, accepts the next
  // (ggml-rpc.cpp ggml_backend_rpc_start_server: "Client connection closed", then accept()).
  headAwaitsWorkersPort: true,
  // llama.cpp's RPC is plain TCP between the head and each worker's fabric address (./command.ts);
  // it reads no NCCL or UCX env, so a node gets none.
  nodeEnv: () => ({}),
  image: llamacppImage,
  // common/arg.cpp: --alias ("set model name aliases, comma-separated (to be used by API)"): the
  // first alias is the name /v1/models lists and requests use. The revision is gguf.revision, no flag.
  modelFlags: { servedName: llamacppSpellings("--alias"), revision: [] },
  // The recipe's gguf files (every part of a split one, the projector) at its commit: all the head
  // reads of the repo, and all that models pull and sync move (./gguf.ts). Where the head finds
  // them is checked with them, so that validate refuses a recipe that mounts no HF cache.
  // rpc-server reads no file: the head sends each worker its layers' tensors over RPC
  // (ggml-rpc.cpp RPC_CMD_SET_TENSOR), so the GGUF files are needed on the head alone.
  weightsReadBy: "head",
  weightFiles: (recipe) => {
    if (recipe.gguf === undefined) return undefined;
    ggufContainerPaths(recipe);
    return ggufWeightFiles(recipe.gguf);
  },
  // tools/server/server.cpp: GET /health is 503 {"error":{"message":"Loading model",...}} until
  // the model is loaded, then 200 {"status":"ok"}; it takes no API key.
  healthPath: "/health",
  // The image has curl and no python3 (docker-images/llamacpp-spark/Dockerfile): the generation probe is sh and curl.
  generationProbe: curlGenerationProbe,
  metricsPath: "/metrics",
  runningRequestsMetric: LLAMACPP_RUNNING,
  engineMetrics: llamacppEngineMetrics,
  flags: llamacppFlags,
  // llama.cpp claims no share of memory: it allocates the layers it holds (the GGUF files' size
  // over the nodes, --split-mode layer) and a KV cache of --ctx-size cells x its layers' K and V
  // widths (src/llama-kv-cache.cpp), widths that are in the GGUF header, which launcher does not
  // read. So the fit counts the weights' share and this allowance for the KV cache.
  // Without --ctx-size (or with 0) llama-server takes the context the model was trained with:
  // common/common.h `int32_t n_ctx = 0; // context size, 0 == context the model was trained with`,
  // tools/server/README.md at 00dc8057 "-c, --ctx-size N ... (default: 0, 0 = loaded from model)":
  // a figure in the GGUF header, so the fit cannot size the cache then.
  memoryFlags: {
    kvCacheBytes: [],
    utilization: [],
    kvAllowance: {
      bytes: LLAMACPP_KV_ALLOWANCE_GIB * 1024 ** 3,
      source: `an allowance of ${LLAMACPP_KV_ALLOWANCE_GIB} GiB assumed for it: llama.cpp sizes it from --ctx-size, --parallel, --cache-type-k/-v and the model's layers, which launcher does not read`,
      sizedBy: CTX_SIZE,
      unsized: "no --ctx-size: llama-server takes the context the model was trained with (a figure in the GGUF file), so launcher cannot size the KV cache; give --ctx-size for a fit check",
    },
  },
  managedEnv: [],
  bootPhases: BOOT_PHASES,
  readLine: readLlamacppLine,
  fatalPatterns: FATAL,
  exceptionPattern: EXCEPTION,
  wrapperPatterns: WRAPPERS,
  peerLossPatterns: PEER_LOSS,
  peerAddress: llamacppPeerAddress,
  nodeAddress: llamacppNodeAddress,
  warningPatterns: WARNINGS,
  readyPattern: READY,
  hintFor: llamacppHint,
  // A worker waits for the head's connection once it listens; the head has no rendezvous.
  rendezvousPatterns: [],
  apiMethods: LLAMACPP_FORWARDED,
  apiRefused: LLAMACPP_REFUSED,
};
