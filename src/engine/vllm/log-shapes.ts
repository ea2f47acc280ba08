import { stripVTControlCharacters } from "node:util";
import type { BootPhase, LogLine } from "../adapter.js";
import { RAY_NOT_JOINED_PATTERN } from "./ray.js";

/**
 * How vLLM writes its log, as read in vllm-project/vllm. One home for every line shape launcher
 * reads from vLLM: the adapter hands these to the engine-neutral parser (src/engine/boot-log.ts).
 */

// ANSI colour codes (dropped with node's stripVTControlCharacters). vllm/utils/system_utils.py
// `_add_prefix` wraps the process prefix in CYAN ("\033[0;36m") ... RESET ("\033[0;0m"); builds from
// about v0.10 to early 2026 did so even without a TTY (current main only when a TTY or
// VLLM_LOGGING_COLOR=1 asks for it). vllm/logging_utils/formatter.py `ColoredFormatter` colours the
// level, time and [file:line] too.

// The process prefix `(Worker_TP0 pid=123) ` that vllm/utils/system_utils.py `_add_prefix` writes
// at the start of every stdout/stderr line of a child process (decorate_logs); some builds print
// a simplified name (`(Worker (TP1)) `, no pid), Ray's own workers `(RayWorkerWrapper pid=1, ip=…)`.
export const PREFIX = /^\(([\w.-]+(?: \([\w.-]+\))?(?: pid=\d+)?(?:, ip=[\w.:-]+)?)\) /;
export const PREFIX_ONLY = /^\([\w.-]+(?: \([\w.-]+\))?(?: pid=\d+)?(?:, ip=[\w.:-]+)?\) ?$/;

// The logger header: vllm/logger.py `_FORMAT` "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d]
// %(message)s" with `_DATE_FORMAT` "%m-%d %H:%M:%S"; builds before about v0.8 wrote
// "%(filename)s:%(lineno)d]" without the opening bracket. vllm/logging_utils/formatter.py
// `NewLineFormatter.format` replaces every "\n" of a message by "\r\n" + this header, so every
// line of a multi-line message (a `logger.exception` traceback) carries it again, and each such
// line but the last ends in "\r".
export const HEADER = /^(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?([^\s\]]+:\d+)\] /;

/**
 * One raw line as a terminal would show it: colours dropped, and of a line redrawn with "\r"
 * (a tqdm bar, e.g. `Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  42%|...` in
 * vllm/v1/worker/gpu_model_runner.py, which tqdm redraws on stderr until it ends the line) only
 * the last drawing, behind the process prefix written before the first. Then split into the
 * process, the logger header and the message itself.
 */
export function readVllmLine(raw: string): LogLine {
  const parts = stripVTControlCharacters(raw).split("\r").filter((p) => p.trim() !== "");
  const first = parts[0] ?? "";
  const lastPart = parts[parts.length - 1] ?? "";
  const text = parts.length > 1 && PREFIX_ONLY.test(first) ? `${first.trimEnd()} ${lastPart}` : lastPart;
  const p = PREFIX.exec(text);
  const afterPrefix = p ? text.slice(p[0].length) : text;
  const h = HEADER.exec(afterPrefix);
  const body = (h ? afterPrefix.slice(h[0].length) : afterPrefix).trim();
  return {
    text,
    body,
    ...(p?.[1] === undefined ? {} : { proc: p[1] }),
    ...(h?.[1] === undefined ? {} : { level: h[1] }),
    ...(h?.[2] === undefined ? {} : { time: h[2] }),
    // Every line of one logger record carries the same process prefix and header.
    ...(h === null ? {} : { record: `${p?.[0] ?? ""}${h[0]}` }),
  };
}

// Every pattern here meets container output, which is untrusted and may be one long line: each runs
// in time linear in the line (test/unit/log-linear.test.ts checks them all). The rule: a pattern is
// anchored (^), or starts with a literal, and a loop after a literal runs over characters that
// literal holds no one of (\S+ after a literal ending in a space, [^()]* after one ending in "("),
// so the loops started at two occurrences never cover the same text; never `.*` between two
// literals, which rescans the rest of the line from every occurrence of the first.

// A Python exception line: the last line of a traceback (`ImportError: …`, `torch.OutOfMemoryError:
// CUDA out of memory …`, a bare `AssertionError`).
export const EXCEPTION = /^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Exit)(?:: .*)?$/;

/** Exceptions vLLM raises only to say that another process failed before: never the root cause. */
export const WRAPPERS: readonly RegExp[] = [
  // vllm/v1/executor/multiproc_executor.py `WorkerProc.wait_for_ready`, raised in the engine core
  // (and in a headless node's `vllm serve`) when a worker process did not report READY; the worker
  // itself logged its exception just before with `logger.exception("WorkerProc failed to start.")`.
  /WorkerProc initialization failed due to an exception in a background process/,
  // vllm/v1/engine/utils.py `wait_for_engine_startup`, raised in the API server.
  /Engine core initialization failed\. See root cause above/,
  // vllm/v1/executor/multiproc_executor.py `collective_rpc` / `get_response`: a worker answered a
  // call with FAILURE after logging the exception itself ("WorkerProc hit an exception."):
  // "RuntimeError: Worker failed with error '%s', please check the stack trace above for the root cause".
  /Worker failed with error '/,
  // vllm/v1/engine/exceptions.py `EngineDeadError`: "EngineCore encountered an issue. See stack trace
  // (above) for the root cause."
  /EngineDeadError/,
];

// vllm/v1/engine/core.py `_initialize_kv_caches`: "init engine (profile, create kv cache, warmup
// model) took %.2f s" (since about April 2026, with " (compilation: %.2f s)" or
// " (compilation: %.2f s — language_model: …, encoder: …)" when it compiled), earlier "took %.2f
// seconds". The engine core is up from here on; the API server follows.
const INIT_DONE = /init engine \(profile, create kv cache, warmup model\) took (-?[\d.]+) (?:s\b|seconds)/;

export const BOOT_PHASES: readonly BootPhase[] = [
  // vllm/entrypoints/utils.py `log_non_default_args`: "non-default args: %s".
  { phase: "starting", pattern: /non-default args:/ },
  // vllm/entrypoints/cli/serve.py `run_headless`: a headless node's own start line, "Launching vLLM
  // (v%s) headless multiproc executor, with head node address %s for torch.distributed process group."
  { phase: "starting", pattern: /Launching (?:vLLM \(v[^()]*\) )?headless multiproc executor/, sets: ["headless"] },
  // vllm/config/model.py `ModelConfig.__post_init__`: "Resolved architecture: %s"; then "Using max
  // model len %s" (vllm/config: the max model len it settled on).
  { phase: "loading", pattern: /Resolved architecture:|Using max model len/ },
  {
    phase: "loading",
    // vllm/v1/worker/gpu_model_runner.py (and vllm/v1/worker/gpu/model_runner.py, model runner v2):
    // "Model loading took %s GiB memory and %.6f seconds"; older "took %.4f GiB and %.6f seconds".
    pattern: /Model loading took (-?[\d.]+) GiB(?: memory)? and ([\d.]+) seconds/,
    figures: { model_gib: 1, load_seconds: 2 },
  },
  // vllm/v1/worker/gpu_worker.py `determine_available_memory`: "Available KV cache memory: %s GiB"
  // (format_gib; negative when the weights and activations already exceed the budget).
  { phase: "kv-cache", pattern: /Available KV cache memory: (-?[\d.]+) GiB/, figures: { kv_gib: 1 } },
  // Same function with --kv-cache-memory (kv_cache_memory_bytes): no profiling, instead "Initial free
  // memory %s GiB, reserved %s GiB memory for KV Cache as specified by kv_cache_memory_bytes config …".
  { phase: "kv-cache", pattern: /reserved (-?[\d.]+) GiB memory for KV Cache as specified by kv_cache_memory_bytes/, figures: { kv_gib: 1 } },
  // vllm/v1/core/kv_cache_utils.py: "GPU KV cache size: %s tokens" and "Maximum concurrency for %s
  // tokens per request: %.2fx" (one line or two, depending on the build).
  { phase: "kv-cache", pattern: /GPU KV cache size: ([\d,]+) tokens/, figures: { kv_tokens: 1 } },
  { phase: "kv-cache", pattern: /Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/, figures: { max_concurrency: 2 } },
  // vllm/v1/worker/gpu_model_runner.py `capture_model`: the tqdm bar "Capturing CUDA graphs (%s, %s)"
  // (first rank only) and "Graph capturing finished in %.0f secs, took %.2f GiB".
  { phase: "graph-capture", pattern: /Capturing CUDA graphs/ },
  { phase: "graph-capture", pattern: /Graph capturing finished in ([\d.]+) secs/, figures: { graph_seconds: 1 } },
  { phase: "warmup", pattern: INIT_DONE, figures: { init_seconds: 1 }, sets: ["pastInit"] },
  // vllm/entrypoints/openai/api_server.py `run_server_worker`: "Starting vLLM server on %s" (older
  // "Starting vLLM API server %d on %s"), logged just before uvicorn starts listening.
  { phase: "serving", pattern: /Starting vLLM (?:API )?server/, sets: ["pastInit"] },
  // uvicorn's own line; `--uvicorn-log-level warning` hides it, so readiness never waits for it alone.
  { phase: "serving", pattern: /Application startup complete/, sets: ["pastInit"] },
];

/**
 * Lines that say a rank has come to the multi-node rendezvous and waits there for its peers.
 *
 * vLLM's mp backend across nodes: every worker process, on the head and on each headless node,
 * logs at INFO "world_size=%d rank=%d local_rank=%d distributed_init_method=%s backend=%s" just
 * before torch.distributed.init_process_group, which blocks until all world_size ranks have come to
 * the TCPStore at --master-addr:--master-port (vllm/distributed/parallel_state.py
 * init_distributed_environment, vllm-project/vllm@0c175ae9295b575078961a68c4d3a2a838dce5ef; older
 * builds log it at DEBUG, so a rank of those shows no rendezvous line). It says a rank arrived, not
 * that it was let in: a worker that cannot reach the master prints it too. vLLM prints no line once
 * a rank has joined: the headless node's own "Launching vLLM (v%s) headless multiproc executor"
 * (vllm/entrypoints/cli/serve.py run_headless, vllm-project/vllm@78265ccd8aadf98d0e9d33c13b6cd2f0053b165e)
 * comes before it.
 */
export const RENDEZVOUS: readonly RegExp[] = [
  /^world_size=\d+ rank=\d+ local_rank=-?\d+ distributed_init_method=/,
  // The practice engine's own rendezvous (docker-images/practice-engine/lib/rendezvous.js, not
  // vLLM's words): its head "waiting for N headless worker(s) on ADDR:PORT", a worker "connected to
  // master at ADDR:PORT" once its connection is open (not "connecting", which a worker that never
  // reaches the master prints too).
  /waiting for \d+ headless worker/,
  /connected to master at /,
  // The Ray backend: `ray start` prints "Ray runtime started." on a worker only once its node has
  // connected to the head's GCS, and on the head before launcher's join check waits for the workers
  // (ray-project/ray python/ray/scripts/scripts.py start()).
  /Ray runtime started\./,
];

/**
 * Fatal lines that say another process died first: a node whose boot ends with one of these and no
 * exception of its own failed because a peer did (explain names the peer's node when its log has it).
 */
export const PEER_LOSS: readonly RegExp[] = [
  // vllm/v1/executor/multiproc_executor.py `monitor_workers`: "Worker proc %s died unexpectedly,
  // shutting down executor."; the Ray executor's (vllm/v1/executor/ray_executor_v2.py) "RayWorkerProc
  // rank=%s died unexpectedly, shutting down executor."
  // The name is a process name without a space (VllmWorker-1, Worker_TP0, rank=1).
  /Worker ?[Pp]roc \S+ died unexpectedly/,
  // A rank that lost the process holding torch's TCPStore (the head): torch's recvBytes
  // (torch/csrc/distributed/c10d/Utils.hpp) "Failed to recv, got 0 bytes. Connection was likely
  // closed. Did the remote server shutdown or crash?", logged by TCPStore.cpp's "[c10d] recvValue
  // failed on SocketImpl(...)" and ProcessGroupNCCL's "Failed to check the \"should dump\" flag on
  // TCPStore"; what a headless worker prints when the head dies (vllm-project/vllm#32136, and a
  // Spark worker's log quoted in a public DGX Spark write-up), often again and again without exiting.
  /Connection was likely closed\. Did the remote server shutdown or crash\?/,
  // The same losses in other words: older torch's "failed to recv, got 0 bytes", and the c10d
  // socket's send or receive failing with "Broken pipe" / "Connection reset by peer".
  /failed to recv, got 0 bytes/i,
  // SocketImpl's own text (fd, addr, remote) has no parenthesis: torch/csrc/distributed/c10d/socket.cpp.
  /\[c10d\] (?:recvValue|recvBytes|sendBytes)\w* failed on SocketImpl\([^()]*\): (?:Broken pipe|Connection reset by peer)/,
];

export const FATAL: readonly RegExp[] = [
  ...WRAPPERS,
  // The GPU worker's start-up check (vllm/v1/worker/gpu_worker.py `init_device`; moved to
  // vllm/v1/worker/utils.py `request_memory` in later builds): "Free memory on device cuda:0 (X/Y GiB)
  // on startup is less than desired GPU memory utilization (U, Z GiB). …" (older builds leave the device out).
  /Free memory on device (?:\S+ )?\([\d.]+\/[\d.]+ GiB\) on startup is less than desired GPU memory utilization/,
  // vllm/v1/core/kv_cache_utils.py `_check_enough_kv_cache_memory`: "No available memory for the cache
  // blocks." and "To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is
  // needed, which is larger than the available KV cache memory (%s GiB). Based on the available
  // memory, the estimated maximum model length is %d. …" (older builds: "models's").
  /No available memory for the cache blocks/,
  /KV cache is needed, which is larger than the available KV cache memory/,
  // torch: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …` from the caching
  // allocator, and `RuntimeError: CUDA error: out of memory` from a raw CUDA call, common on a
  // Spark's unified memory, where the allocator does not see the pool run dry.
  /CUDA out of memory/,
  /CUDA error: out of memory/,
  ...PEER_LOSS,
  /ibv_modify_qp/,
  /NCCL error/,
  /CUDA-capable device\(s\) is\/are busy or unavailable/,
  // Not vLLM's words: the Ray head's join check that launcher runs before vllm serve (./ray.ts).
  RAY_NOT_JOINED_PATTERN,
];

/**
 * Lines that do not stop vLLM but likely explain a later failure. vllm/plugins/__init__.py
 * `load_plugins_by_group` logs `logger.exception("Failed to load plugin %s", plugin.name)` and goes
 * on without it: its traceback belongs to the warning, not to the boot's root cause.
 */
export const WARNINGS: readonly RegExp[] = [/Failed to load plugin \S+/];
