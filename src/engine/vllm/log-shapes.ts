import { stripVTControlCharacters } from "node:util";
import { TORCH_PEER_LOSS } from "../torch-peer-loss.js";
import type { BootPhase, LogLine } from "../adapter.js";
import { NOT_FABRIC_ADDRESS_PATTERN } from "../../contract/pod-start.js";
import { RAY_HEAD_UNREACHED_PATTERN, RAY_NOT_JOINED_PATTERN } from "./ray.js";

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
// line but the last ends in "\r". `_FORMAT` starts with the env's VLLM_LOGGING_PREFIX
// (f"{VLLM_LOGGING_PREFIX}%(levelname)s ...", vllm/logger.py; /work/notes/vllm28-research.md section
// 2): any text, no separator added, after the process prefix (written over the whole line by
// `_add_prefix`). Read as at most 64 characters before the level; anchored, so the
// lazy run is tried from one place only.
export const HEADER = /^[^\r\n]{0,64}?(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?([^\s\]]+:\d+)\] /;

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

// pydantic_core's ValidationError (vLLM's config dataclasses are pydantic dataclasses): the
// exception line says only how many errors and for which class, "pydantic_core._pydantic_core.
// ValidationError: 1 validation error for ParallelConfig"; the message is an indented line under it,
// "  Value error, num_redundant_experts should be used with EPLB.16. [type=value_error, …]" (a
// model validator's ValueError), or a field's name line and then "  Input should be greater than 0
// [type=greater_than, …]" (pydantic-core src/errors/validation_exception.rs, as quoted in vLLM issues:
// /work/notes/vllm28-research.md 2.7). The "For further information visit …" line after it is no cause.
const VALIDATION_ERROR = /ValidationError: \d+ validation errors? for (\w+)/;
const VALIDATION_DETAIL = /^(?:Value error, )?(.*?) \[type=\w+/;
const VALIDATION_FIELD = /^\w[\w.]*$/;

// Ray's ActorDiedError (ray python/ray/exceptions.py): "The actor died unexpectedly before finishing
// this task." and then, one per line, "\tclass_name: …", "\tactor_id: …", "\tpid: …", "\tname: …",
// "\tnamespace: …", "\tip: <node ip>" (each only when known), and GCS's reason: for a lost node
// "The actor is dead because its node has died. Node Id: <hex>" (ray src/ray/gcs
// gcs_actor_manager.cc GenNodeDiedCause), for a lost process "The actor is dead because its worker
// process has died. …" (/work/notes/vllm28-research.md 2.6).
const ACTOR_DIED = /ActorDiedError: The actor died unexpectedly before finishing this task/;
const ACTOR_REASON = /^The actor is dead because /;
const ACTOR_FIELD = /^(class_name|ip): ([\w.:-]+)$/;
/** The reason that says the actor's node, not the head's own process, is what died (the node's IP, as refineVllmCause words it, in group 1). */
export const ACTOR_NODE_DIED = /^(?:\w+ on ([\w.:-]+): )?The actor is dead because its node has died/;

/** The address of the node a lost peer's cause names (Ray's dead actor's `ip:`), when it names one. */
export function vllmPeerAddress(cause: string): string | undefined {
  return ACTOR_NODE_DIED.exec(cause)?.[1];
}

// `ray start` on every Ray node prints "Local node IP: <ip>" (ray python/ray/scripts/scripts.py
// start(), from memory of Ray 2.x and as docker-images/practice-engine/bin/ray prints it; not re-read
// in a stored copy this session): the address the node's raylet registers, which ActorDiedError's
// `ip:` names. Anchored on the shown line: Ray's own print, with no process prefix or logger header.
const RAY_NODE_IP = /^Local node IP: ([\w.:-]+)$/;

/** The address a node's own log line (as shown) says the node has (Ray's `ray start` line), else undefined. */
export function vllmNodeAddress(text: string): string | undefined {
  return RAY_NODE_IP.exec(text)?.[1];
}

/**
 * The real message of a cause that only names an error's kind: of a pydantic ValidationError, its
 * first error line among the (at most two) message lines that follow it in the same process, with
 * the class and the field ("ParallelConfig: num_redundant_experts should be used with EPLB.16.",
 * "EPLBConfig.window_size: Input should be greater than 0"); of Ray's ActorDiedError, GCS's reason
 * with the actor's class and node ("RayWorkerProc on 10.0.0.2: The actor is dead because its node
 * has died. …"). Undefined while there is none.
 */
export function refineVllmCause(cause: string, after: readonly string[]): string | undefined {
  if (ACTOR_DIED.test(cause)) return actorDied(after);
  const v = VALIDATION_ERROR.exec(cause);
  if (v === null) return undefined;
  for (const [i, body] of after.slice(0, 2).entries()) {
    const d = VALIDATION_DETAIL.exec(body);
    if (d === null) continue;
    const field = i > 0 && VALIDATION_FIELD.test(after[i - 1] as string) ? `.${after[i - 1] as string}` : "";
    return `${v[1] as string}${field}: ${d[1] as string}`;
  }
  return undefined;
}

function actorDied(after: readonly string[]): string | undefined {
  const reason = after.findIndex((l) => ACTOR_REASON.test(l));
  if (reason < 0) return undefined;
  const fields = new Map(after.slice(0, reason).flatMap((l) => {
    const f = ACTOR_FIELD.exec(l);
    return f === null ? [] : [[f[1] as string, f[2] as string] as const];
  }));
  const where = [fields.get("class_name") ?? "actor", ...(fields.has("ip") ? [`on ${fields.get("ip") as string}`] : [])].join(" ");
  return `${where}: ${after[reason] as string}`;
}

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
  // The Rust frontend (VLLM_USE_RUST_FRONTEND=1): rust/src/server/src/lib.rs logs
  // `info!(%bind_address, model = %model, "starting OpenAI server")` once its listener is bound, just
  // before axum::serve; rust/src/cmd/src/logging.rs VllmEventFormatter writes "(RustFrontend pid=N)
  // INFO MM-DD hh:mm:ss [server/src/lib.rs:L] " and then the message before the fields. The header's
  // exact [file:line] and the fields' order are inferred from the formatter, not seen on a real line
  // (/work/notes/vllm28-research.md 2.9); only the message's start is relied on.
  { phase: "serving", pattern: /^starting OpenAI server\b/, sets: ["pastInit"] },
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
  // The head's engine core just before it spawns its workers for a multi-node group:
  // vllm/v1/executor/multiproc_executor.py `_init_executor` (node_rank_within_dp == 0), "DP group
  // leader: node_rank=%d, node_rank_within_dp=%d, master_addr=%s, mq_connect_ip=%s (local), world_size=%d,
  // local_world_size=%d" (/work/notes/vllm28-research.md 2.2).
  /^DP group leader: node_rank=\d+/,
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
/**
 * The API server's monitor of its engine core: vllm/v1/engine/core_client.py
 * `start_engine_core_monitor`, "Engine core proc %s died unexpectedly, shutting down client." ("proc",
 * not "process", in the source; either is read). Fatal also after the API is up: a deployment that
 * served and then lost its engine core failed. It only says another process died first (its reason
 * is a line before, often WORKER_KILLED), and vLLM prints it at some shutdowns too (research notes
 * 2.5): so it is a lost peer's line, and a rank with a reason of its own is blamed before it.
 */
export const ENGINE_CORE_DIED = /Engine core proc(?:ess)? \S+ died unexpectedly/;

export const PEER_LOSS: readonly RegExp[] = [
  ENGINE_CORE_DIED,
  // Ray's ActorDiedError as refineVllmCause words it: the actor's node died, so another node failed.
  ACTOR_NODE_DIED,
  // Older builds' vllm/v1/executor/multiproc_executor.py `monitor_workers`: "Worker proc %s died
  // unexpectedly, shutting down executor." (no exit code; today's form, with one, is the node's own
  // failure: WORKER_KILLED); the Ray executor's (vllm/v1/executor/ray_executor_v2.py @a76acc98)
  // "RayWorkerProc rank=%s died unexpectedly, shutting down executor.", whose rank may be on another node.
  // The name is a process name without a space (VllmWorker-1, Worker_TP0, rank=[1]).
  /Worker ?[Pp]roc \S+ died unexpectedly, shutting down/,
  // torch.distributed's own words for a lost peer (TCPStore, c10d's socket, NCCL, Gloo), the same
  // for every engine whose ranks meet through torch: ../torch-peer-loss.ts. Today's mp executor
  // watches only its own node's workers (vllm/v1/executor/multiproc_executor.py
  // start_worker_monitor waits on `self.workers`' sentinels, the local ones), so a head whose
  // headless node died hears of it this way, in its own worker's collective.
  ...TORCH_PEER_LOSS,
];

/**
 * A worker process of this node that died: vllm/v1/executor/multiproc_executor.py
 * `start_worker_monitor` (current main, see /work/notes/vllm28-research.md 2.4) waits on the
 * sentinels of this node's own workers only and logs "Worker proc %s died unexpectedly (exit code:
 * %s), shutting down executor." with `proc.exitcode`: -N is signal N (-9 SIGKILL, on a Spark almost
 * always the kernel's OOM killer), None when it had none. The node's own failure, never a peer's.
 */
export const WORKER_KILLED = /Worker proc \S+ died unexpectedly \(exit code: (-?\d+|None)\)/;


export const FATAL: readonly RegExp[] = [
  ...WRAPPERS,
  WORKER_KILLED,
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
  // Not vLLM's words: the Ray head's join check that launcher runs before vllm serve (./ray.ts),
  // and a Kubernetes export's Ray worker that never reached its head.
  RAY_NOT_JOINED_PATTERN,
  RAY_HEAD_UNREACHED_PATTERN,
  // A Kubernetes export's pod whose address is not its node's fabric address (../../contract/pod-start.ts):
  // its start ends before vLLM runs.
  NOT_FABRIC_ADDRESS_PATTERN,
];

/**
 * Lines that do not stop vLLM but likely explain a later failure. vllm/plugins/__init__.py
 * `load_plugins_by_group` logs `logger.exception("Failed to load plugin %s", plugin.name)` and goes
 * on without it: its traceback belongs to the warning, not to the boot's root cause.
 */
export const WARNINGS: readonly RegExp[] = [/Failed to load plugin \S+/];
