import { FABRIC_ENV_KEYS } from "../../cluster/fabric-env.js";
import type { EngineAdapter } from "../adapter.js";
import { RAY_NOT_JOINED_PATTERN, rayImageProbes } from "./ray.js";

export const vllm: EngineAdapter = {
  name: "vllm",
  managedFlags: [
    { flags: ["--host"], instead: "launcher serves the API on every address of the head; remove it" },
    { flags: ["--port"], instead: "set api_port in the cluster file or pass --port to launcher" },
    { flags: ["--nnodes"], instead: "set required_nodes in the recipe" },
    { flags: ["--node-rank"], instead: "launcher gives each node its rank from the cluster file's order; remove it" },
    { flags: ["--master-addr"], instead: "launcher uses the head's fabric_ip from the cluster file; remove it" },
    { flags: ["--master-port"], instead: "set master_port in the cluster file" },
    { flags: ["--headless"], instead: "launcher adds it to every rank above 0; remove it" },
    { flags: ["--tensor-parallel-size", "-tp"], instead: "set tensor_parallel_size in the recipe" },
    { flags: ["--pipeline-parallel-size", "-pp"], instead: "set pipeline_parallel_size in the recipe" },
  ],
  managedEnv: FABRIC_ENV_KEYS,
  bootPhases: [
    { phase: "starting", pattern: /non-default args:/ },
    { phase: "loading", pattern: /Resolved architecture:|Using max model len/ },
    {
      phase: "loading",
      pattern: /Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds/,
      figures: { model_gib: 1, load_seconds: 2 },
    },
    { phase: "kv-cache", pattern: /Available KV cache memory: ([\d.]+) GiB/, figures: { kv_gib: 1 } },
    { phase: "kv-cache", pattern: /GPU KV cache size: ([\d,]+) tokens/, figures: { kv_tokens: 1 } },
    {
      phase: "kv-cache",
      pattern: /Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/,
      figures: { max_concurrency: 2 },
    },
    { phase: "graph-capture", pattern: /Capturing CUDA graphs/ },
    { phase: "graph-capture", pattern: /Graph capturing finished in ([\d.]+) secs/, figures: { graph_seconds: 1 } },
    { phase: "warmup", pattern: /init engine \(profile, create kv cache, warmup model\) took ([\d.]+) seconds/, figures: { init_seconds: 1 } },
    { phase: "serving", pattern: /Starting vLLM (?:API )?server/ },
    { phase: "serving", pattern: /Application startup complete/ },
  ],
  fatalPatterns: [
    /Engine core initialization failed/,
    /Free memory on device .* is less than desired GPU memory utilization/,
    /KV cache is needed, which is larger than the available KV cache memory/,
    /CUDA out of memory/,
    /Worker proc .* died unexpectedly/,
    /ibv_modify_qp/,
    /NCCL error/,
    /CUDA-capable device\(s\) is\/are busy or unavailable/,
    RAY_NOT_JOINED_PATTERN,
  ],
  readyPattern: /Application startup complete/,
  // The mp backend's rendezvous, as the practice engine prints it (docker-images/practice-engine/
  // lib/rendezvous.js): the head waiting for its headless workers, a worker connecting to the
  // master. vLLM's head blocks there until every worker has joined (MultiprocExecutor waits for
  // every worker's READY: vllm/v1/executor/multiproc_executor.py, wait_for_ready).
  rendezvousPatterns: [/waiting for \d+ headless worker/, /connecting to master at /],
  // From the routers of vllm-project/vllm: vllm/entrypoints/openai/chat_completion/api_router.py,
  // completion/api_router.py (also /v1/completions/render), responses/api_router.py,
  // speech_to_text/api_router.py (form bodies), vllm/entrypoints/pooling/embed/api_router.py,
  // pooling/score/api_router.py (/v1/score, /v1/rerank), vllm/entrypoints/anthropic/api_router.py;
  // GET /v1/models is answered by the gateway itself.
  apiMethods: {
    "/v1/chat/completions": ["POST"],
    "/v1/completions": ["POST"],
    "/v1/completions/render": ["POST"],
    "/v1/embeddings": ["POST"],
    "/v1/responses": ["POST"],
    "/v1/responses/{response_id}": ["GET"],
    "/v1/responses/{response_id}/cancel": ["POST"],
    "/v1/audio/transcriptions": ["POST"],
    "/v1/audio/translations": ["POST"],
    "/v1/score": ["POST"],
    "/v1/rerank": ["POST"],
    "/v1/messages": ["POST"],
    "/v1/messages/count_tokens": ["POST"],
  },
  imageProbes: rayImageProbes,
};
