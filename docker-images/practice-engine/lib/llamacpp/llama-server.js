'use strict';
// practice-engine's llama-server (a stand-in for llama.cpp's, not llama.cpp): its log lines in
// their order, copied in form from tools/server/server.cpp, common/common.cpp, src/llama-model.cpp,
// src/llama-kv-cache.cpp and ggml/src/ggml-rpc/ggml-rpc.cpp (launcher's
// src/engine/llamacpp/log-shapes.ts reads them and names each source). Everything goes to
// stderr, as common/log.cpp writes every leveled line.
//
// With --rpc it first connects once to each rpc-server, while its arguments are parsed (aborting
// with "Failed to connect to HOST:PORT" when one does not answer, before any other line), and
// aborts when one goes away. Then the HTTP server listens and answers every route 503 "Loading
// model" until the model is loaded (./http.js).
// The model must be a file (the practice image has /app/lib/llamacpp/practice.gguf).
// PRACTICE_FAULT (rank 0, the head): oom | cuda_oom (the weights' cudaMalloc fails),
// kv_too_small (the context's KV buffer fails), engine_core_init (unknown model architecture),
// invalid_config (an invalid argument), hang (stops after warm-up starts), crash_after_ready
// (a CUDA error PRACTICE_CRASH_AFTER_MS after it serves). Workers' faults: ./rpc-server.js.

const fs = require('node:fs');
const net = require('node:net');
const { parseArgs, ArgError } = require('./options.js');
const { createLlamaApi } = require('./http.js');
const { readConfig, ConfigError } = require('../config.js');

const log = (l) => process.stderr.write(`${l}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RPC_SRC = '/app/ggml/src/ggml-rpc/ggml-rpc.cpp';
const BUILD = 'build: 0 (practice) with node for practice-engine (a stand-in for llama.cpp, not llama.cpp)';

function abort(line) {
  log(line);
  process.exit(134);
}

/** The lines after a failed load, and the exit (server.cpp: clean_up, then "exiting due to model loading error"). */
function loadFailed(model) {
  log('llama_model_load_from_file_impl: failed to load model');
  log(`common_init_from_params: failed to load model '${model}'`);
  log(`srv    load_model: failed to load model, '${model}'`);
  log('srv    operator(): operator(): cleaning up before exit...');
  log('main: exiting due to model loading error');
  process.exit(1);
}

/** Connects to every rpc-server once (ggml-rpc.cpp rpc_dispatcher::start: no retry), keeping each connection. */
async function connectWorkers(endpoints, onLost) {
  const socks = [];
  for (const ep of endpoints) {
    const [host, port] = [ep.slice(0, ep.lastIndexOf(':')), Number(ep.slice(ep.lastIndexOf(':') + 1))];
    const sock = await new Promise((resolve) => {
      const s = net.connect({ host, port, timeout: 5000 });
      s.once('connect', () => resolve(s));
      s.once('error', () => resolve(null));
      s.once('timeout', () => (s.destroy(), resolve(null)));
    });
    if (sock === null) abort(`${RPC_SRC}:612: Failed to connect to ${ep}`);
    sock.setTimeout(0);
    sock.on('error', () => {});
    sock.on('close', () => onLost(ep));
    socks.push(sock);
  }
  return socks;
}

function parseOrExit(argv) {
  try {
    const args = parseArgs(argv);
    const cfg = readConfig(process.env, { nnodes: 1 + rpcList(args).length });
    return { args, cfg };
  } catch (e) {
    if (e instanceof ArgError || e instanceof ConfigError) {
      log(e instanceof ConfigError ? `practice-engine: error: ${e.message}` : e.message);
      process.exit(1);
    }
    throw e;
  }
}

const rpcList = (args) => String(args.values.get('--rpc') ?? '').split(',').filter(Boolean);

async function main(argv, env) {
  setInterval(() => {}, 1 << 30);
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => (log('srv    operator(): operator(): cleaning up before exit...'), process.exit(0)));
  const { args, cfg } = parseOrExit(argv);
  const fault = cfg.faultRank === 0 ? cfg.fault : null;
  if (fault === 'invalid_config') abort('error: invalid argument: --practice-invalid-config');
  const model = String(args.values.get('--model') ?? '');
  const host = String(args.values.get('--host') ?? '127.0.0.1');
  const port = Number(args.values.get('--port') ?? 8080);
  const alias = String(args.values.get('--alias') ?? model).split(',')[0];
  const ctx = Number(args.values.get('--ctx-size') ?? 4096) || 4096;
  const keyArg = args.values.get('--api-key');
  const keys = String(keyArg ?? env.LLAMA_API_KEY ?? '').split(',').filter(Boolean);
  // common/arg.cpp: --rpc's handler (add_rpc_devices -> ggml_backend_rpc_add_server) connects to
  // each worker while the arguments are parsed: a dead worker aborts before `build:` and before the
  // HTTP server binds, so no /health is ever served.
  const workers = rpcList(args);
  await connectWorkers(workers, () => abort(`${RPC_SRC}:580: Remote RPC server crashed or returned malformed response`));
  const state = { loaded: false, alias, keys, ctx, metrics: args.values.get('--metrics') === true, tokensPerSec: cfg.tokensPerSec, wrongAnswers: cfg.wrongAnswers, fingerprint: 'b0-practice', counters: { prompt: 0, promptSeconds: 0, predicted: 0, predictedSeconds: 0, decodes: 0, processing: 0 } };
  log(BUILD);
  log('system info: n_threads = 10, n_threads_batch = 10, total_threads = 20');
  log('');
  log('system_info: n_threads = 10 (n_threads_batch = 10) / 20 | CUDA : ARCHS = 1210 | CPU : NEON = 1 | ARM_FMA = 1 |');
  log('');
  log('main: binding port with default address family');
  const server = createLlamaApi(state);
  await new Promise((resolve) => {
    server.once('error', () => {
      log(`main: couldn't bind HTTP server socket, hostname: ${host}, port: ${port}`);
      process.exit(1);
    });
    server.listen({ host, port }, resolve);
  });
  log(`main: HTTP server is listening, hostname: ${host}, port: ${port}, http threads: 19`);
  log('main: loading model');
  log(`srv    load_model: loading model '${model}'`);
  await load({ workers, cfg, fault, model, ctx });
  if (fault === 'hang') return;
  log('srv          init: initializing slots, n_slots = 4');
  for (let i = 0; i < 4; i++) log(`slot         init: id  ${i} | task -1 | new slot, n_ctx = ${ctx}`);
  state.loaded = true;
  log('main: model loaded');
  log(`main: server is listening on http://${host}:${port} - starting the main loop`);
  log('srv  update_slots: all slots are idle');
  if (fault === 'crash_after_ready') setTimeout(() => abort('CUDA error: an illegal memory access was encountered'), cfg.crashAfterMs);
}

/** From the model file to the warm-up: the figures, the workers' devices, and the faults on the way. */
async function load({ workers, cfg, fault, model, ctx }) {
  workers.forEach((ep, i) => log(`llama_model_load_from_file_impl: using device RPC${i} (${ep}) (unknown id) - 119000 MiB free`));
  log('llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GB10) (000f:01:00.0) - 119000 MiB free');
  if (!fs.existsSync(model) || !fs.statSync(model).isFile()) {
    log(`gguf_init_from_file: failed to open GGUF file '${model}' (No such file or directory)`);
    log(`llama_model_load: error loading model: llama_model_loader: failed to load model from ${model}`);
    return loadFailed(model);
  }
  log(`llama_model_loader: loaded meta data with 35 key-value pairs and 459 tensors from ${model} (version GGUF V3 (latest))`);
  // src/llama-model-loader.cpp: a split model loads only from its first part ("-00001-of-N").
  const split = /-(\d{5})-of-(\d{5})\.gguf$/.exec(model);
  if (split !== null && Number(split[1]) !== 1) {
    log(`llama_model_load: error loading model: illegal split file idx: ${Number(split[1]) - 1} (file: ${model}), model must be loaded with the first split`);
    return loadFailed(model);
  }
  if (fault === 'engine_core_init') {
    log("llama_model_load: error loading model: error loading model architecture: unknown model architecture: 'practice'");
    return loadFailed(model);
  }
  log('print_info: file format = GGUF V3 (latest)');
  log('print_info: file type   = Q4_K - Medium');
  log(`print_info: file size   = ${cfg.modelGib.toFixed(2)} GiB (4.87 BPW)`);
  log('load_tensors: loading model tensors, this can take a while... (mmap = true)');
  await sleep(cfg.loadDelayMs);
  const mib = ((cfg.modelGib * 1024) / (workers.length + 1)).toFixed(2);
  if (fault === 'oom' || fault === 'cuda_oom') {
    log(`ggml_backend_cuda_buffer_type_alloc_buffer: allocating ${mib} MiB on device 0: cudaMalloc failed: out of memory`);
    log(`alloc_tensor_range: failed to allocate CUDA0 buffer of size ${Math.round(Number(mib) * 1048576)}`);
    log('llama_model_load: error loading model: unable to allocate CUDA0 buffer');
    return loadFailed(model);
  }
  log('load_tensors: offloaded 49/49 layers to GPU');
  workers.forEach((ep, i) => log(`load_tensors: RPC${i}[${ep}] model buffer size = ${mib} MiB`));
  log(`load_tensors:        CUDA0 model buffer size = ${mib} MiB`);
  log('llama_context: constructing llama_context');
  log(`llama_context: n_ctx         = ${ctx}`);
  await sleep(cfg.phaseDelayMs);
  if (fault === 'kv_too_small') {
    log('llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache');
    log(`common_init_from_params: failed to create context with model '${model}'`);
    return loadFailed(model);
  }
  const kvMib = (ctx * 0.09375).toFixed(2);
  log(`llama_kv_cache:      CUDA0 KV buffer size = ${kvMib} MiB`);
  log(`llama_kv_cache: size = ${kvMib} MiB (${String(ctx).padStart(6)} cells,  48 layers,  4/1 seqs), K (f16): ${(kvMib / 2).toFixed(2)} MiB, V (f16): ${(kvMib / 2).toFixed(2)} MiB`);
  log('common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)');
  await sleep(cfg.phaseDelayMs);
}

module.exports = { main };
