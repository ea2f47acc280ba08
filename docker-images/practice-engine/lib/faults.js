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

function prefixFor(proc) {
  return `(${proc} pid=${log.PID}) `;
}

function wrapper(failed) {
  log.traceback(CLI_FRAMES, `RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): ${failed}`);
}

/** How an EngineCore process dies during start: its error line, then its traceback. */
function coreStartFailed(proc, frames, exception) {
  log.error(proc, 'core.py:708', 'EngineCore failed to start.');
  const pre = prefixFor(proc);
  log.err(`${pre}Process ${proc}:`);
  log.traceback(frames, exception, pre);
}

function oom(proc) {
  coreStartFailed(
    proc,
    [
      ...CORE_FRAMES,
      [`${PY}/vllm/executor/uniproc_executor.py`, 55, '_init_executor', 'self.collective_rpc("load_model")'],
      [`${PY}/vllm/v1/worker/gpu_worker.py`, 233, 'load_model', 'self.model_runner.load_model(eep_scale_up=eep_scale_up)'],
      [`${PY}/vllm/v1/worker/gpu_model_runner.py`, 2580, 'load_model', 'self.model = model_loader.load_model('],
      [`${PY}/vllm/model_executor/model_loader/base_loader.py`, 49, 'load_model', 'model = initialize_model(vllm_config=vllm_config,'],
      [`${PY}/torch/utils/_device.py`, 104, '__torch_function__', 'return func(*args, **kwargs)'],
    ],
    'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free.',
  );
  wrapper('{}');
}

function kvTooSmall(proc, maxModelLen, kvGib, kvTokens) {
  const needed = Math.max((kvGib * maxModelLen) / kvTokens, kvGib + 12.98);
  coreStartFailed(
    proc,
    [
      ...CORE_FRAMES.slice(0, 5),
      [`${PY}/vllm/v1/engine/core.py`, 92, '__init__', 'self._initialize_kv_caches(vllm_config)'],
      [`${PY}/vllm/v1/engine/core.py`, 199, '_initialize_kv_caches', 'kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,'],
      [`${PY}/vllm/v1/core/kv_cache_utils.py`, 1243, 'get_kv_cache_configs', 'check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,'],
      [`${PY}/vllm/v1/core/kv_cache_utils.py`, 716, 'check_enough_kv_cache_memory', 'raise ValueError('],
    ],
    `ValueError: To serve at least one request with the models's max seq len (${maxModelLen}), (${needed.toFixed(2)} GiB KV cache is needed, which is larger than the available KV cache memory (${kvGib.toFixed(2)} GiB). Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine.`,
  );
  wrapper('{}');
}

function engineCoreInit(proc) {
  coreStartFailed(
    proc,
    [
      ...CORE_FRAMES,
      [`${PY}/vllm/executor/uniproc_executor.py`, 54, '_init_executor', 'self.collective_rpc("init_device")'],
      [`${PY}/vllm/v1/worker/gpu_worker.py`, 161, 'init_device', 'from vllm.model_executor.layers.quantization.utils import b12x_utils'],
      [`${PY}/vllm/model_executor/layers/quantization/utils/b12x_utils.py`, 12, '<module>', 'import b12x._C  # noqa: F401'],
    ],
    `ImportError: ${PY}/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi`,
  );
  // A little noise, as the real thing prints while tearing down.
  log.err(
    `[rank0]:[W${log.stamp().replace(/[- :]/g, '')} ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())`,
  );
  log.err(`${MP}/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown`);
  log.err("  warnings.warn('resource_tracker: There appear to be %d '");
  wrapper("{'EngineCore_DP0': 1}");
}

function crashAfterReady(proc) {
  log.error(proc, 'core.py:795', 'EngineCore encountered a fatal error.');
  log.traceback(
    [
      [`${PY}/vllm/v1/engine/core.py`, 786, 'run_engine_core', 'engine_core.run_busy_loop()'],
      [`${PY}/vllm/v1/engine/core.py`, 813, 'run_busy_loop', 'self._process_engine_step()'],
      [`${PY}/vllm/v1/engine/core.py`, 838, '_process_engine_step', 'outputs, model_executed = self.step_fn()'],
      [`${PY}/vllm/v1/worker/gpu_model_runner.py`, 2215, 'execute_model', 'valid_sampled_token_ids = sampled_token_ids.tolist()'],
    ],
    'RuntimeError: CUDA error: an illegal memory access was encountered',
    prefixFor(proc),
  );
}

function lostMaster(addr, port) {
  log.traceback(
    [
      ['/usr/local/bin/vllm', 10, '<module>', 'sys.exit(main())'],
      [`${PY}/vllm/entrypoints/cli/main.py`, 54, 'main', 'args.dispatch_function(args)'],
      [`${PY}/vllm/entrypoints/cli/serve.py`, 48, 'cmd', 'run_headless(args)'],
      [`${PY}/vllm/v1/executor/multiproc_executor.py`, 612, 'worker_busy_loop', 'raise RuntimeError('],
    ],
    `RuntimeError: lost connection to master at ${addr}:${port}`,
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

module.exports = { oom, kvTooSmall, engineCoreInit, crashAfterReady, lostMaster, startupError };
