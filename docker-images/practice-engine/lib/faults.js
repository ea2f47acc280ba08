'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): canned, realistic-looking
// failure output for PRACTICE_FAULT. The paths mimic a vLLM install so that
// log classifiers see what they would see from the real thing.

const log = require('./log.js');

const PY = '/usr/local/lib/python3.12/dist-packages';
const MP = '/usr/lib/python3.12/multiprocessing';

const CLI_FRAMES = [
  ['/usr/local/bin/vllm', 10, '<module>', 'sys.exit(main())'],
  [`${PY}/vllm/entrypoints/cli/main.py`, 54, 'main', 'args.dispatch_function(args)'],
  [`${PY}/vllm/entrypoints/cli/serve.py`, 57, 'cmd', 'uvloop.run(run_server(args))'],
  [`${PY}/uvloop/__init__.py`, 109, 'run', 'return __asyncio.run('],
  ['/usr/lib/python3.12/asyncio/runners.py', 195, 'run', 'return runner.run(main)'],
  [`${PY}/vllm/entrypoints/openai/api_server.py`, 1884, 'run_server', 'await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)'],
  [`${PY}/vllm/entrypoints/openai/api_server.py`, 1902, 'run_server_worker', 'async with build_async_engine_client('],
  [`${PY}/vllm/entrypoints/openai/api_server.py`, 180, 'build_async_engine_client_from_engine_args', 'async_llm = AsyncLLM.from_vllm_config('],
  [`${PY}/vllm/v1/engine/async_llm.py`, 134, '__init__', 'self.engine_core = EngineCoreClient.make_async_mp_client('],
  [`${PY}/vllm/v1/engine/core_client.py`, 102, 'make_async_mp_client', 'return AsyncMPClient(*client_args)'],
  [`${PY}/vllm/v1/engine/core_client.py`, 448, '__init__', 'with launch_core_engines(vllm_config, executor_class,'],
  ['/usr/lib/python3.12/contextlib.py', 144, '__exit__', 'next(self.gen)'],
  [`${PY}/vllm/v1/engine/utils.py`, 732, 'launch_core_engines', 'wait_for_engine_startup('],
  [`${PY}/vllm/v1/engine/utils.py`, 785, 'wait_for_engine_startup', 'raise RuntimeError('],
];

const CORE_FRAMES = [
  [`${MP}/process.py`, 314, '_bootstrap', 'self.run()'],
  [`${MP}/process.py`, 108, 'run', 'self._target(*self._args, **self._kwargs)'],
  [`${PY}/vllm/v1/engine/core.py`, 712, 'run_engine_core', 'raise e'],
  [`${PY}/vllm/v1/engine/core.py`, 699, 'run_engine_core', 'engine_core = EngineCoreProc(*args, **kwargs)'],
  [`${PY}/vllm/v1/engine/core.py`, 498, '__init__', 'super().__init__(vllm_config, executor_class, log_stats,'],
  [`${PY}/vllm/v1/engine/core.py`, 83, '__init__', 'self.model_executor = executor_class(vllm_config)'],
  [`${PY}/vllm/executor/executor_base.py`, 54, '__init__', 'self._init_executor()'],
];

// How vLLM reports a failure during start (vllm-project/vllm), in this order:
// 1. the worker process: logger.exception("WorkerProc failed to start.") with its traceback
//    (vllm/v1/executor/multiproc_executor.py WorkerProc.worker_main) -- the root cause;
// 2. the engine core: logger.exception("EngineCore failed to start.") whose traceback ends in
//    "Exception: WorkerProc initialization failed due to an exception in a background process. See
//    stack trace for root cause." (WorkerProc.wait_for_ready; vllm/v1/engine/core.py
//    run_engine_core), then multiprocessing's own "Process EngineCore_DP0:" traceback on stderr;
// 3. the API server: "RuntimeError: Engine core initialization failed. See root cause above. Failed
//    core proc(s): {...}" (vllm/v1/engine/utils.py wait_for_engine_startup).
// A headless node (vllm/entrypoints/cli/serve.py run_headless) has no engine core: after its
// worker's record, its `vllm serve` dies of the WorkerProc wrapper, uncaught, on stderr.
const WORKER_PROC_WRAPPER =
  'Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.';

const WAIT_FOR_READY = [
  [`${PY}/vllm/v1/executor/multiproc_executor.py`, 106, '_init_executor', 'self.workers = WorkerProc.wait_for_ready(unready_workers)'],
  [`${PY}/vllm/v1/executor/multiproc_executor.py`, 509, 'wait_for_ready', 'raise e from None'],
];

const WORKER_MAIN = [[`${PY}/vllm/v1/executor/multiproc_executor.py`, 845, 'worker_main', 'worker = WorkerProc(*args, **kwargs)']];

function workerName(rank) {
  return `Worker_TP${rank}`;
}

function apiWrapper(failed) {
  log.traceback(CLI_FRAMES, `RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): ${failed}`, 'APIServer');
}

/** The engine core's own failure during start: its record, multiprocessing's traceback, the API server's wrapper. */
function coreStartFailed(frames, exception, failed) {
  const proc = 'EngineCore_DP0';
  log.exception(proc, 'core.py:1108', 'EngineCore failed to start.', frames, exception);
  log.err(`${log.prefix(proc)}Process ${proc}:`);
  log.traceback(CORE_FRAMES, exception, proc);
  apiWrapper(failed);
}

/**
 * A worker process fails during start, on the head (rank 0) or on a headless node. In vLLM the
 * worker is a process of its own: its record (its stdout) and its parent's wrappers (stderr) reach
 * docker through different pipes, which docker may store in either order. With `lagMs` > 0
 * (PRACTICE_RECORD_LAG_MS) the record comes that long after the wrappers, as a busy machine shows it.
 */
async function workerStartFailed(rank, lagMs, frames, exception, noise = () => {}) {
  const record = () =>
    log.exception(workerName(rank), 'multiproc_executor.py:870', 'WorkerProc failed to start.', [...WORKER_MAIN, ...frames], exception);
  if (lagMs === 0) record();
  noise();
  if (rank === 0) {
    coreStartFailed([...CORE_FRAMES, ...WAIT_FOR_READY], WORKER_PROC_WRAPPER, "{'EngineCore_DP0': 1}");
  } else {
    log.traceback(
      [
        ['/usr/local/bin/vllm', 10, '<module>', 'sys.exit(main())'],
        [`${PY}/vllm/entrypoints/cli/main.py`, 54, 'main', 'args.dispatch_function(args)'],
        [`${PY}/vllm/entrypoints/cli/serve.py`, 112, 'cmd', 'run_headless(args)'],
        [`${PY}/vllm/entrypoints/cli/serve.py`, 178, 'run_headless', 'executor = MultiprocExecutor(vllm_config, monitor_workers=False)'],
        ...WAIT_FOR_READY,
      ],
      WORKER_PROC_WRAPPER,
    );
  }
  if (lagMs > 0) {
    await new Promise((resolve) => setTimeout(resolve, lagMs));
    record();
  }
}

const LOAD_FRAMES = [
  [`${PY}/vllm/v1/worker/gpu_worker.py`, 233, 'load_model', 'self.model_runner.load_model(eep_scale_up=eep_scale_up)'],
  [`${PY}/vllm/v1/worker/gpu_model_runner.py`, 2580, 'load_model', 'self.model = model_loader.load_model('],
  [`${PY}/vllm/model_executor/model_loader/base_loader.py`, 49, 'load_model', 'model = initialize_model(vllm_config=vllm_config,'],
];

function oom(rank, lagMs = 0) {
  return workerStartFailed(
    rank,
    lagMs,
    [...LOAD_FRAMES, [`${PY}/torch/utils/_device.py`, 104, '__torch_function__', 'return func(*args, **kwargs)']],
    'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free.',
  );
}

/** A raw CUDA call that finds the unified memory pool exhausted (the allocator did not see it coming). */
function cudaOom(rank, lagMs = 0) {
  return workerStartFailed(
    rank,
    lagMs,
    [...LOAD_FRAMES, [`${PY}/vllm/model_executor/model_loader/weight_utils.py`, 612, 'safetensors_weights_iterator', 'param = f.get_tensor(name).to(device)']],
    [
      'RuntimeError: CUDA error: out of memory',
      'CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.',
      'For debugging consider passing CUDA_LAUNCH_BLOCKING=1',
    ],
  );
}

function kvTooSmall(maxModelLen, kvGib, kvTokens) {
  const needed = Math.max((kvGib * maxModelLen) / kvTokens, kvGib + 12.98);
  const estimated = Math.floor((kvTokens * kvGib) / needed / 16) * 16;
  // Raised in the engine core itself (vllm/v1/core/kv_cache_utils.py), no worker involved.
  coreStartFailed(
    [
      ...CORE_FRAMES.slice(0, 5),
      [`${PY}/vllm/v1/engine/core.py`, 92, '__init__', 'self._initialize_kv_caches(vllm_config)'],
      [`${PY}/vllm/v1/engine/core.py`, 199, '_initialize_kv_caches', 'kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,'],
      [`${PY}/vllm/v1/core/kv_cache_utils.py`, 1243, 'get_kv_cache_configs', 'check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,'],
      [`${PY}/vllm/v1/core/kv_cache_utils.py`, 716, 'check_enough_kv_cache_memory', 'raise ValueError('],
    ],
    `ValueError: To serve at least one request with the ${log.OLD_STYLE ? "models's" : "model's"} max seq len (${maxModelLen}), (${needed.toFixed(2)} GiB KV cache is needed, which is larger than the available KV cache memory (${kvGib.toFixed(2)} GiB). Based on the available memory, the estimated maximum model length is ${Math.min(estimated, maxModelLen - 16)}. Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine.`,
    '{}',
  );
}

function engineCoreInit(rank, lagMs = 0) {
  return workerStartFailed(
    rank,
    lagMs,
    [
      [`${PY}/vllm/v1/worker/gpu_worker.py`, 161, 'init_device', 'from vllm.model_executor.layers.quantization.utils import b12x_utils'],
      [`${PY}/vllm/model_executor/layers/quantization/utils/b12x_utils.py`, 12, '<module>', 'import b12x._C  # noqa: F401'],
    ],
    `ImportError: ${PY}/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi`,
    // A little noise, as the real thing prints while tearing down.
    () => {
      log.err(
        `[rank${rank}]:[W${log.stamp().replace(/[- :]/g, '')} ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())`,
      );
      log.err(`${MP}/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown`);
      log.err("  warnings.warn('resource_tracker: There appear to be %d '");
    },
  );
}

/**
 * A plugin that fails to load: vllm/plugins/__init__.py load_plugins_by_group logs
 * logger.exception("Failed to load plugin %s", name) and goes on without it.
 */
function pluginFailed(name) {
  log.exception(
    'APIServer',
    '__init__.py:47',
    `Failed to load plugin ${name}`,
    [
      [`${PY}/vllm/plugins/__init__.py`, 44, 'load_plugins_by_group', 'func = plugin.load()'],
      ['/usr/lib/python3.12/importlib/metadata/__init__.py', 205, 'load', 'module = import_module(match.group(\'module\'))'],
    ],
    `ModuleNotFoundError: No module named '${name}'`,
  );
}

function crashAfterReady(proc) {
  log.exception(
    proc,
    'core.py:795',
    'EngineCore encountered a fatal error.',
    [
      [`${PY}/vllm/v1/engine/core.py`, 786, 'run_engine_core', 'engine_core.run_busy_loop()'],
      [`${PY}/vllm/v1/engine/core.py`, 813, 'run_busy_loop', 'self._process_engine_step()'],
      [`${PY}/vllm/v1/engine/core.py`, 838, '_process_engine_step', 'outputs, model_executed = self.step_fn()'],
      [`${PY}/vllm/v1/worker/gpu_model_runner.py`, 2215, 'execute_model', 'valid_sampled_token_ids = sampled_token_ids.tolist()'],
    ],
    'RuntimeError: CUDA error: an illegal memory access was encountered',
  );
}

/**
 * A headless worker whose head died: what current vLLM prints there is torch's, not vLLM's. The
 * worker's TCPStore client (the store lives in the head's process) fails in recvBytes
 * (torch/csrc/distributed/c10d/Utils.hpp) and TCPStore.cpp logs it as a c10d warning with a C++
 * backtrace (vllm-project/vllm#32136 quotes it from a headless node; DGX Spark workers print the
 * same). The real worker may go on printing it without exiting (#32136); this one exits 1 after
 * the first, which launcher does not rely on either way (the head's end decides).
 */
function lostMaster(rank, local, addr, port) {
  const t = new Date();
  const when = `${t.getMonth() + 1}${String(t.getDate()).padStart(2, '0')} ${t.toTimeString().slice(0, 8)}.${String(t.getMilliseconds()).padStart(3, '0')}000000`;
  log.err(
    `[rank${rank}]:[W${when} TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=99, addr=[::ffff:${local.address.replace(/^::ffff:/, '')}]:${local.port}, remote=[::ffff:${addr}]:${port}): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?`,
  );
  log.err('Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):');
  log.err('frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x80 (0xffff8c2a0b80 in /usr/local/lib/python3.12/dist-packages/torch/lib/libc10.so)');
  log.err('frame #1: <unknown function> + 0x5ffc5d1 (0xffff6f2f5d1 in /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cpu.so)');
}

/**
 * The head, when a headless node's workers are gone. Today's mp executor watches only its own node's
 * workers (vllm/v1/executor/multiproc_executor.py start_worker_monitor waits on `self.workers`, the
 * local processes: /work/notes/vllm28-research.md 2.4), so the head hears of a lost node in its own
 * worker's next collective: NCCL's ncclRemoteError (nccl src/init.cc ncclGetErrorString: "remote
 * process exited or there was a network error"), raised by torch's ProcessGroupNCCL as a
 * DistBackendError, which the worker logs with logger.exception("WorkerProc hit an exception.")
 * (WorkerProc.worker_busy_loop) and answers as a FAILURE; the engine core then dies of
 * collective_rpc's wrapper, "Worker failed with error '%s', please check the stack trace above for
 * the root cause", logged as "EngineCore encountered a fatal error." (vllm/v1/engine/core.py
 * run_engine_core). Builds of v0.11 watched every rank from the head and said
 * "Worker proc VllmWorker-N died unexpectedly, shutting down executor." (PRACTICE_LOG_STYLE=v0.11).
 */
function lostWorker(rank, engine) {
  if (log.OLD_STYLE) {
    log.error(engine, 'multiproc_executor.py:154', `Worker proc VllmWorker-${rank} died unexpectedly, shutting down executor.`);
    return;
  }
  const nccl = 'NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL version 2.27.3';
  log.exception(
    workerName(0),
    'multiproc_executor.py:820',
    'WorkerProc hit an exception.',
    [
      [`${PY}/vllm/v1/executor/multiproc_executor.py`, 815, 'worker_busy_loop', 'output = func(*args, **kwargs)'],
      [`${PY}/vllm/distributed/parallel_state.py`, 508, 'all_reduce', 'return self.device_communicator.all_reduce(input_)'],
      [`${PY}/torch/distributed/distributed_c10d.py`, 2950, 'all_reduce', 'work = group.allreduce([tensor], opts)'],
    ],
    [`torch.distributed.DistBackendError: ${nccl}`, 'ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.'],
  );
  log.exception(
    engine,
    'core.py:795',
    'EngineCore encountered a fatal error.',
    [
      [`${PY}/vllm/v1/engine/core.py`, 786, 'run_engine_core', 'engine_core.run_busy_loop()'],
      [`${PY}/vllm/v1/executor/multiproc_executor.py`, 361, 'get_response', 'raise RuntimeError('],
    ],
    `RuntimeError: Worker failed with error '${nccl}', please check the stack trace above for the root cause`,
  );
}

/**
 * The Ray head, when a node that ran one of its workers died: Ray's ActorDiedError (ray
 * python/ray/exceptions.py: the base message, then "\tclass_name: ", "\tactor_id: ", "\tpid: ",
 * "\tname: ", "\tnamespace: ", "\tip: " of the actor's node, then GCS's reason, for a lost node
 * "The actor is dead because its node has died. Node Id: <hex>", src/ray/gcs gcs_actor_manager.cc
 * GenNodeDiedCause; /work/notes/vllm28-research.md 2.6), raised in the head's engine core by vLLM's
 * Ray executor (vllm/v1/executor/ray_executor_v2.py, RayWorkerProc actors) and logged by
 * run_engine_core as "EngineCore encountered a fatal error." (vllm/v1/engine/core.py).
 */
function rayNodeDied(engine, ip, rank) {
  const hex = (s) => Buffer.from(s).toString('hex').padEnd(56, '0').slice(0, 56);
  log.exception(
    engine,
    'core.py:795',
    'EngineCore encountered a fatal error.',
    [
      [`${PY}/vllm/v1/engine/core.py`, 786, 'run_engine_core', 'engine_core.run_busy_loop()'],
      [`${PY}/vllm/v1/executor/ray_executor_v2.py`, 455, 'monitor_workers', 'ray.get(ref)'],
      [`${PY}/ray/_private/worker.py`, 2961, 'get', 'raise value'],
    ],
    [
      'ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.',
      '\tclass_name: RayWorkerProc',
      `\tactor_id: ${hex(`actor-${rank}`).slice(0, 32)}`,
      `\tpid: ${log.PID + rank}`,
      `\tname: vllm_Worker_TP${rank}`,
      '\tnamespace: vllm',
      `\tip: ${ip}`,
      `The actor is dead because its node has died. Node Id: ${hex(ip)}`,
    ],
  );
}

/**
 * A config that vLLM's pydantic dataclasses refuse while `vllm serve` builds its VllmConfig
 * (vllm/engine/arg_utils.py create_engine_config, in the API server; in run_headless on a headless
 * node), before any engine core or worker starts: uncaught, on stderr, each line behind the
 * process prefix. pydantic-core words the exception line as "1 validation error for CLASS" and puts
 * the model validator's ValueError on the indented line under it, "  Value error, MESSAGE
 * [type=value_error, input_value=..., input_type=ArgsKwargs]", then "    For further information
 * visit https://errors.pydantic.dev/..." (pydantic-core src/errors/validation_exception.rs; the
 * lines as vLLM users quote them, /work/notes/vllm28-research.md 2.7). The message is
 * vllm/config/parallel.py's check "num_redundant_experts should be used with EPLB.%d." (its
 * f-string puts the value right after the period, as the quoted line shows).
 */
function validationError(isHead) {
  const entry = isHead
    ? [
        [`${PY}/vllm/entrypoints/cli/serve.py`, 57, 'cmd', 'uvloop.run(run_server(args))'],
        [`${PY}/vllm/entrypoints/openai/api_server.py`, 1884, 'run_server', 'await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)'],
        [`${PY}/vllm/entrypoints/openai/api_server.py`, 172, 'build_async_engine_client_from_engine_args', 'vllm_config = engine_args.create_engine_config(usage_context=usage_context)'],
      ]
    : [
        [`${PY}/vllm/entrypoints/cli/serve.py`, 112, 'cmd', 'run_headless(args)'],
        [`${PY}/vllm/entrypoints/cli/serve.py`, 150, 'run_headless', 'vllm_config = engine_args.create_engine_config(usage_context=usage_context, headless=True)'],
      ];
  log.traceback(
    [
      ['/usr/local/bin/vllm', 10, '<module>', 'sys.exit(main())'],
      [`${PY}/vllm/entrypoints/cli/main.py`, 54, 'main', 'args.dispatch_function(args)'],
      ...entry,
      [`${PY}/vllm/engine/arg_utils.py`, 1512, 'create_engine_config', 'parallel_config = ParallelConfig('],
      [`${PY}/pydantic/_internal/_dataclasses.py`, 121, '__init__', 's.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)'],
    ],
    [
      'pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig',
      "  Value error, num_redundant_experts should be used with EPLB.16. [type=value_error, input_value=ArgsKwargs((), {'pipeline_parallel_size': 1, 'tensor_parallel_size': 1, 'num_redundant_experts': 16}), input_type=ArgsKwargs]",
      '    For further information visit https://errors.pydantic.dev/2.12/v/value_error',
    ],
    'APIServer',
  );
}

/** A generic start-up failure (env checks, rendezvous, bind errors). */
function startupError(exc, where = 'vllm/entrypoints/cli/serve.py') {
  log.traceback(
    [
      ['/usr/local/bin/vllm', 10, '<module>', 'sys.exit(main())'],
      [`${PY}/vllm/entrypoints/cli/main.py`, 54, 'main', 'args.dispatch_function(args)'],
      [`${PY}/${where}`, 1, 'cmd', `raise ${exc.split(':')[0]}(...)`],
    ],
    exc,
  );
}

module.exports = { oom, cudaOom, kvTooSmall, engineCoreInit, pluginFailed, crashAfterReady, lostMaster, lostWorker, rayNodeDied, validationError, startupError };
