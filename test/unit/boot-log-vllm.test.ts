import assert from "node:assert/strict";
import { test } from "node:test";
import { advanceBoot, INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";

// vLLM's boot log as it writes it (vllm-project/vllm). Every shape below is the one named in
// src/engine/vllm/log-shapes.ts with its source file.
const feed = (lines: readonly string[], from: BootState = INITIAL_BOOT): BootState => lines.reduce((s, l) => advanceBoot(vllm, s, l), from);

/**
 * A `logger.exception` record as vllm/logging_utils/formatter.py NewLineFormatter writes it: every
 * line gets the header again ("\n" -> "\r\n" + header), behind the process prefix that
 * vllm/utils/system_utils.py `_add_prefix` writes (in CYAN on builds of about v0.10 to early 2026).
 */
function record(proc: string, header: string, message: string, traceback: readonly string[], ansi = false): string[] {
  const prefix = ansi ? `\x1b[0;36m(${proc})\x1b[0;0m ` : `(${proc}) `;
  const lines = [message, ...traceback];
  return lines.map((l, i) => `${prefix}${header}${l}${i < lines.length - 1 ? "\r" : ""}`);
}

const WORKER_HEADER = "ERROR 05-19 12:34:56 [multiproc_executor.py:870] ";
const CORE_HEADER = "ERROR 05-19 12:34:57 [core.py:1108] ";
const UNDEFINED_SYMBOL = "ImportError: /usr/local/lib/python3.12/dist-packages/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi";
const WORKER_PROC_WRAPPER = "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.";

const workerFailed = (exception: string, ansi = false): string[] =>
  record("Worker_TP0 pid=2301", WORKER_HEADER, "WorkerProc failed to start.", [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 845, in worker_main',
    "    worker = WorkerProc(*args, **kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 161, in init_device',
    "    from vllm.model_executor.layers.quantization.utils import b12x_utils",
    exception,
  ], ansi);

// vllm/v1/engine/core.py logs "EngineCore failed to start." with the wrapper's traceback, then
// multiprocessing prints the process's own traceback, then the API server raises its wrapper
// (vllm/v1/engine/utils.py wait_for_engine_startup).
const wrappers = (ansi = false): string[] => [
  ...record("EngineCore_DP0 pid=2200", CORE_HEADER, "EngineCore failed to start.", [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 509, in wait_for_ready',
    "    raise e from None",
    WORKER_PROC_WRAPPER,
  ], ansi),
  "(EngineCore_DP0 pid=2200) Process EngineCore_DP0:",
  "(EngineCore_DP0 pid=2200) Traceback (most recent call last):",
  `(EngineCore_DP0 pid=2200) ${WORKER_PROC_WRAPPER}`,
  "(APIServer pid=2100) Traceback (most recent call last):",
  '(APIServer pid=2100)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 1057, in wait_for_engine_startup',
  "(APIServer pid=2100) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
];

test("the root cause is the worker's exception behind the repeated header, not the wrappers after it", () => {
  const s = feed([...workerFailed(UNDEFINED_SYMBOL), ...wrappers()]);
  assert.equal(s.cause, UNDEFINED_SYMBOL);
  assert.match(s.fatal ?? "", /^Exception: WorkerProc initialization failed/);
  // Its traceback, from the worker's own lines, ends with it.
  assert.equal(s.causeLines?.at(-1), `(Worker_TP0 pid=2301) ${WORKER_HEADER}${UNDEFINED_SYMBOL}`);
  assert.ok(s.causeLines?.some((l) => l.includes("init_device")), String(s.causeLines));
});

test("the same with the ANSI-coloured prefix of older builds", () => {
  const s = feed([...workerFailed("AssertionError", true), ...wrappers(true)]);
  assert.equal(s.cause, "AssertionError");
  assert.ok(s.lastLines.every((l) => !l.includes("\x1b")), "colour codes are dropped from the shown lines");
  const colouredHeader = "\x1b[0;36m(Worker_TP0 pid=7)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m05-19 12:34:56\x1b[0m \x1b[90m[multiproc_executor.py:870]\x1b[0m ";
  assert.equal(feed([`${colouredHeader}ValueError: bad rope_scaling`]).cause, "ValueError: bad rope_scaling");
});

test("a headless worker node: its own start line, its worker's exception as the cause", () => {
  // vllm/entrypoints/cli/serve.py run_headless, then the headless `vllm serve` dies of the wrapper.
  const s = feed([
    "(APIServer pid=90) INFO 05-19 12:34:40 [serve.py:230] Launching vLLM (v0.11.1) headless multiproc executor, with head node address 10.0.0.1:29501 for torch.distributed process group.",
    ...workerFailed("ValueError: The checkpoint you are trying to load has model type `deepseek_v4` but Transformers does not recognize this architecture."),
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/vllm", line 10, in <module>',
    WORKER_PROC_WRAPPER,
  ]);
  assert.equal(s.headless, true);
  assert.match(s.cause ?? "", /^ValueError: The checkpoint you are trying to load/);
  assert.match(s.fatal ?? "", /WorkerProc initialization failed/);
});

test("the worker's record stored after the wrappers (two pipes, a busy docker): still the cause, the wrapper still fatal", () => {
  const s = feed([...wrappers(), ...workerFailed(UNDEFINED_SYMBOL)]);
  assert.equal(s.cause, UNDEFINED_SYMBOL);
  assert.match(s.fatal ?? "", /^Exception: WorkerProc initialization failed/);
  assert.equal(s.causeLines?.at(-1), `(Worker_TP0 pid=2301) ${WORKER_HEADER}${UNDEFINED_SYMBOL}`);
});

test("a log with only wrappers names no wrapper as its cause", () => {
  const s = feed(wrappers());
  assert.ok(s.fatal !== undefined);
  assert.equal(s.cause, undefined);
  // vllm/v1/executor/multiproc_executor.py get_response and vllm/v1/engine/exceptions.py.
  const rpc = feed([
    "(EngineCore_DP0 pid=1482) ERROR 02-03 19:11:07 [core.py:938] RuntimeError: Worker failed with error ''ForwardContext' object has no attribute 'draft_attn_metadatas'', please check the stack trace above for the root cause",
    "(APIServer pid=968) ERROR 02-03 19:11:07 [async_llm.py:546] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
  ]);
  assert.equal(rpc.cause, undefined);
  const ray = feed(["(EngineCore_DP0 pid=1) ERROR 05-19 12:00:00 [ray_executor_v2.py:464] RayWorkerProc rank=[3] died unexpectedly, shutting down executor."]);
  assert.match(ray.fatal ?? "", /^RayWorkerProc rank=\[3\] died unexpectedly/);
  // A headless worker whose head died: torch's c10d warning (vllm-project/vllm#32136) is its failure, and only a lost peer.
  const worker = feed([
    "[rank1]:[W111 00:54:10.905768298 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=99, addr=[::ffff:172.16.21.245]:38760, remote=[::ffff:172.16.11.34]:42643): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
    "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):",
  ]);
  assert.match(worker.fatal ?? "", /Connection was likely closed/);
  assert.match(worker.cause ?? "", /Connection was likely closed/);
  assert.equal(worker.causeIsPeerLoss, true);
  assert.equal(ray.causeIsPeerLoss, true);
  for (const other of [
    "[rank1]:[W601 10:00:00.000000000 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=60, addr=[::ffff:10.0.0.2]:38760, remote=[::ffff:10.0.0.1]:29501): Broken pipe",
    "[W601 10:00:00.000000000 TCPStore.cpp:122] [c10d] failed to recv, got 0 bytes",
  ]) assert.equal(feed([other]).causeIsPeerLoss, true, other);
});

test("every figure variant: init in s with compilation and in seconds, --kv-cache-memory, negative KV memory", () => {
  const s = feed([
    "(EngineCore_DP0 pid=1) INFO 04-27 07:52:01 [gpu_model_runner.py:3118] Model loading took 75.17 GiB memory and 170.412345 seconds",
    "(Worker_TP0 pid=2) INFO 04-27 07:53:00 [gpu_worker.py:492] Initial free memory 114.65 GiB, reserved 8.2 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does not respect the gpu_memory_utilization config.",
    "(EngineCore_DP0 pid=1) INFO 04-27 07:53:01 [kv_cache_utils.py:2141] GPU KV cache size: 283,398 tokens",
    "(EngineCore_DP0 pid=1) INFO 04-27 07:53:01 [kv_cache_utils.py:2145] Maximum concurrency for 262,144 tokens per request: 1.08x",
    "(EngineCore_DP0 pid=1) INFO 04-27 07:55:18 [gpu_model_runner.py:6046] Graph capturing finished in 3 secs, took 0.34 GiB",
    "(EngineCore_DP0 pid=1) INFO 04-27 07:55:18 [core.py:283] init engine (profile, create kv cache, warmup model) took 200.69 s (compilation: 1.48 s)",
  ]);
  assert.deepEqual(s.figures, { model_gib: "75.17", load_seconds: "170.412345", kv_gib: "8.2", kv_tokens: "283398", max_concurrency: "1.08", graph_seconds: "3", init_seconds: "200.69" });
  assert.equal(s.phase, "warmup");
  assert.equal(s.pastInit, true);
  const older = feed(["INFO 07-24 11:08:25 [core.py:194] init engine (profile, create kv cache, warmup model) took 33.27 seconds"]);
  assert.equal(older.figures.init_seconds, "33.27");
  assert.equal(feed(["(Worker_TP0 pid=2) INFO 05-19 12:00:00 [gpu_worker.py:298] Available KV cache memory: -2.51 GiB"]).figures.kv_gib, "-2.51");
  const oneLine = feed(["(EngineCore pid=3) INFO 05-19 12:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 75,776 tokens, Maximum concurrency for 16,384 tokens per request: 4.62x"]);
  assert.deepEqual(oneLine.figures, { kv_tokens: "75776", max_concurrency: "4.62" });
});

test("a tqdm bar redrawn with \\r reads as its last drawing, behind the process prefix", () => {
  const bar = (pct: string, n: number) => `Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): ${pct}|██████████| ${n}/67 [00:05<00:00, 12.9it/s]`;
  const s = feed([`(EngineCore_DP0 pid=1) \r${bar("  0%", 0)}\r${bar(" 50%", 33)}\r${bar("100%", 67)}`]);
  assert.equal(s.phase, "graph-capture");
  assert.deepEqual(s.lastLines, [`(EngineCore_DP0 pid=1) ${bar("100%", 67)}`]);
});

test("CUDA error: out of memory (unified memory) is fatal and the cause", () => {
  const s = feed(record("Worker_TP0 pid=4", WORKER_HEADER, "WorkerProc failed to start.", ["Traceback (most recent call last):", "RuntimeError: CUDA error: out of memory"]));
  assert.equal(s.fatal, "RuntimeError: CUDA error: out of memory");
  assert.equal(s.cause, "RuntimeError: CUDA error: out of memory");
  for (const line of [
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "ValueError: To serve at least one request with the model's max seq len (262144), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (8.04 GiB). Based on the available memory, the estimated maximum model length is 87840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
  ]) {
    const kv = feed([`(EngineCore_DP0 pid=268) ERROR 10-21 00:35:03 [core.py:708] ${line}`]);
    assert.equal(kv.fatal, line);
    assert.equal(kv.cause, line);
  }
});

test("Failed to load plugin is a warning; its traceback is not the boot's cause", () => {
  const plugin = record("APIServer pid=1", "ERROR 05-19 12:30:00 [__init__.py:47] ", "Failed to load plugin dspark_vision", [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/plugins/__init__.py", line 44, in load_plugins_by_group',
    "    func = plugin.load()",
    "ModuleNotFoundError: No module named 'dspark'",
  ]);
  const s = feed(plugin);
  assert.deepEqual(s.warnings, ["Failed to load plugin dspark_vision (ModuleNotFoundError: No module named 'dspark')"]);
  assert.equal(s.cause, undefined);
  assert.equal(s.fatal, undefined);
  const later = feed([...workerFailed("ValueError: Model architectures ['DspV4ForCausalLM'] are not supported for now."), ...wrappers()], s);
  assert.equal(later.cause, "ValueError: Model architectures ['DspV4ForCausalLM'] are not supported for now.");
  assert.equal(later.warnings?.length, 1);
});

test("the API is worth polling once past the init line, without uvicorn's line (--uvicorn-log-level warning)", () => {
  const s = feed([
    "(EngineCore_DP0 pid=1) INFO 05-19 12:40:00 [core.py:283] init engine (profile, create kv cache, warmup model) took 136.57 s",
    "(APIServer pid=2) INFO 05-19 12:40:02 [api_server.py:2060] Starting vLLM server on http://0.0.0.0:8000",
  ]);
  assert.equal(s.pastInit, true);
  assert.equal(s.phase, "serving");
  assert.equal(s.ready, false);
  assert.equal(feed(["(APIServer pid=2) INFO 05-19 12:39:00 [gpu_model_runner.py:2602] Model loading took 1.00 GiB memory and 2.00 seconds"]).pastInit, undefined);
});
