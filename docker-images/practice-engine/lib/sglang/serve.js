'use strict';
// practice-engine's SGLang persona: what `python3 -m sglang.launch_server ARGS` prints and serves
// (a stand-in for SGLang, not SGLang). bin/python3 runs it for `-m sglang.launch_server` and for
// launcher's launch program (src/engine/sglang/command.ts), which adds `--api-key` from
// SGLANG_API_KEY. The lines are SGLang's, in its order (a real log: python/sglang/srt/
// model_executor/model_runner.py, mem_cache/memory_pool.py, cuda_graph_runner.py,
// managers/scheduler.py, entrypoints/http_server.py), each rank's scheduler lines behind its
// "TPn" tag; the PRACTICE_* knobs are the vLLM persona's (../config.js), failing SGLang's way:
// the scheduler logs "Scheduler hit an exception" with its traceback, and the process tree exits
// (launchState). PRACTICE_SGLANG_HANG_AFTER_MS hangs the scheduler instead, after ready: the
// process and its HTTP live on, /health answers 503 after its wait (./api.js).

const log = require('./log.js');
const { parseSglangArgs, SglangArgError, PROG, USAGE } = require('./args.js');
const { readConfig, ConfigError } = require('../config.js');
const { startDist } = require('./dist.js');
const { createSglangApi } = require('./api.js');

const PY = '/usr/local/lib/python3.12/dist-packages/sglang/srt';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fmt2 = (n) => Number(n).toFixed(2);

// The scheduler's frames down to where each fault strikes (python/sglang/srt/managers/scheduler.py
// run_scheduler_process builds the Scheduler, whose TpModelWorker builds the ModelRunner).
const INIT = [
  [`${PY}/managers/scheduler.py`, 2950, 'run_scheduler_process', 'scheduler = Scheduler('],
  [`${PY}/managers/scheduler.py`, 310, '__init__', 'self.tp_worker = TpModelWorker('],
  [`${PY}/managers/tp_worker.py`, 90, '__init__', 'self.model_runner = ModelRunner('],
];
const LOAD = [...INIT, [`${PY}/model_executor/model_runner.py`, 260, '__init__', 'self.load_model()']];
const POOL = [...INIT, [`${PY}/model_executor/model_runner.py`, 280, '__init__', 'self.init_memory_pool(']];
const LOOP = [[`${PY}/managers/scheduler.py`, 2990, 'run_scheduler_process', 'scheduler.event_loop_overlap()']];

const FAULTS = {
  engine_core_init: [INIT, 'RuntimeError: practice-engine: simulated scheduler init failure'],
  oom: [LOAD, 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free.'],
  cuda_oom: [LOAD, 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free.'],
  kv_too_small: [POOL, 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'],
  crash_after_ready: [LOOP, 'RuntimeError: CUDA error: device-side assert triggered'],
};

/** A Python value as repr() writes it in a dict. */
const py = (v) => (v === undefined || v === null ? 'None' : typeof v === 'string' ? `'${v}'` : v === true ? 'True' : v === false ? 'False' : String(v));

/**
 * python/sglang/srt/entrypoints/engine.py _launch_subprocesses: logger.info(f"server_args={server_args.resolved_dict()}")
 * (sgl-project/sglang 001067ff), the fields the persona has. api_key is in it as given, in plain
 * text, as SGLang logs it (sglang#37457): launcher hides it when it shows the log.
 */
function serverArgsLine(a) {
  const fields = ['model_path', 'tokenizer_path', 'host', 'port', 'mem_fraction_static', 'tp_size', 'pp_size', 'dp_size', 'ep_size', 'dist_init_addr', 'nnodes', 'node_rank', 'served_model_name', 'enable_metrics', 'api_key'];
  return `server_args={${fields.map((f) => `'${f}': ${py(f === 'tokenizer_path' ? (a.tokenizer_path ?? a.model_path) : a[f])}`).join(', ')}}`;
}

/** The parsed command line and knobs, or undefined after argparse's (or the knobs') error and exit 2. */
function parseOrExit(argv, env) {
  try {
    const a = parseSglangArgs(argv);
    return { a, cfg: readConfig(env, { nnodes: a.nnodes }) };
  } catch (e) {
    if (e instanceof SglangArgError) {
      log.err(USAGE);
      log.err(`${PROG}: error: ${e.message}`);
    } else if (e instanceof ConfigError) {
      log.err(`practice-engine: error: ${e.message}`);
    } else {
      throw e;
    }
    log.exit(2);
    return undefined;
  }
}

/** server_args.py check_server_args' asserts the persona has, raised in the launch process itself. */
function checkServerArgs(a) {
  let what;
  if ((a.tp_size * a.pp_size) % a.nnodes !== 0) what = 'tp_size must be divisible by number of nodes';
  else if (a.dp_size > 1 && a.nnodes > 1 && !a.enable_dp_attention) what = 'multi-node data parallel needs --enable-dp-attention';
  if (what === undefined) return true;
  log.err('Traceback (most recent call last):');
  log.err(`  File "${PY}/server_args.py", line 4110, in check_server_args`);
  log.err(`AssertionError: ${what}`);
  log.exit(1);
  return false;
}

/**
 * One launch's state. A dead scheduler takes the process tree with it: its SIGQUIT reaches the
 * parent, whose handler logs "Received sigquit from a child process. It usually means the child
 * failed." and calls kill_process_tree on itself, SIGKILL (engine.py, sgl-project/sglang 001067ff;
 * a child that dies without a word is caught by its SubprocessWatchdog, sglang#18421): exit 137.
 */
function launchState(a, cfg) {
  const rank = a.node_rank;
  const s = {
    a,
    cfg,
    rank,
    // One GPU per practice node: this node's one scheduler, by its place in the TP or PP group.
    tag: a.pp_size > 1 ? `PP${rank} TP0` : `TP${rank}`,
    faultHere: (name) => cfg.fault === name && cfg.faultRank === rank,
    api: null,
    rdv: null,
    // What this rank says when a peer's connection closes, by where it is (see rendezvous).
    stage: 'init',
    phase: () => sleep(cfg.phaseDelayMs),
  };
  s.dies = (frames, exc) => {
    log.schedulerException(s.tag, frames, exc);
    log.record('', 'Received sigquit from a child process. It usually means the child failed.');
    log.exit(137);
  };
  log.onExit(() => {
    if (s.api) s.api.close();
    if (s.rdv) s.rdv.close();
  });
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => log.exit(0));
  setInterval(() => {}, 1 << 30);
  return s;
}

async function runSglang(argv, env) {
  const parsed = parseOrExit(argv, env);
  if (parsed === undefined) return undefined;
  const s = launchState(parsed.a, parsed.cfg);
  log.record('', serverArgsLine(s.a));
  if (!checkServerArgs(s.a)) return undefined;
  if (!(await bootScheduler(s))) return undefined;
  if (s.rank === 0) {
    s.api = await serveHttp(s.a, s.cfg, s.rdv);
    if (s.api === null) return undefined;
  } else {
    // The warm-up's forward runs on every rank; then the node's dummy health server.
    if (s.rdv && !s.a.skip_server_warmup) await s.rdv.barrier('warmup');
    s.stage = 'serving';
    if (!(await serveDummyHealth(s.a))) return undefined;
  }
  s.stage = 'serving';
  afterReady(s);
  return undefined;
}

/** The scheduler's start, to its last line before HTTP: false when it died (or hangs) on the way. */
async function bootScheduler(s) {
  const { a, cfg, rank, tag } = s;
  await s.phase();
  log.record(tag, 'Init torch distributed begin.');
  if (a.nnodes > 1) await rendezvous(s);
  log.record(tag, 'Init torch distributed ends. mem usage=0.13 GB');
  if (s.faultHere('hang')) return false;
  if (s.faultHere('engine_core_init')) return s.dies(...FAULTS.engine_core_init), false;
  await s.phase();
  s.stage = 'load';
  log.record(tag, 'Load weight begin. avail mem=119.20 GB');
  const loadStart = Date.now();
  await sleep(cfg.loadDelayMs);
  if (s.faultHere('worker_exit')) return log.exit(137), false;
  if (s.faultHere('oom') || s.faultHere('cuda_oom')) return s.dies(...FAULTS[cfg.fault]), false;
  const loadSecs = cfg.loadSeconds ?? (Date.now() - loadStart) / 1000;
  // Current main's form: no dtype= (model_runner.py load_model, quant_str in its place for a quantized model).
  log.record(tag, `Load weight end. elapsed=${fmt2(loadSecs)} s, type=PracticeForCausalLM, avail mem=${fmt2(119.2 - cfg.modelGib)} GB, mem usage=${fmt2(cfg.modelGib)} GB.`);
  s.loaded = true;
  if (s.lostWhileLoading) return s.dies(...loadBarrierFailed(rank)), false;
  // model_runner.py load_model's monitored_barrier over the TP group: every rank's load ends together.
  if (s.rdv) await s.rdv.barrier('loaded');
  s.stage = 'collective';
  await s.phase();
  // The memory profile all-reduces the ranks' free memory: every rank waits for the others here.
  if (s.rdv) await s.rdv.barrier('memory');
  if (s.faultHere('kv_too_small')) return s.dies(...FAULTS.kv_too_small), false;
  const avail = 119.2 - cfg.modelGib - cfg.kvGib;
  log.record(tag, `KV Cache is allocated. #tokens: ${cfg.kvTokens}, K size: ${fmt2(cfg.kvGib / 2)} GB, V size: ${fmt2(cfg.kvGib / 2)} GB`);
  log.record(tag, `Memory pool end. avail mem=${fmt2(avail)} GB`);
  await s.phase();
  if (!a.disable_cuda_graph) {
    // The nightlies' form (v0.5.10 and before: "Capture cuda graph begin/end. Time elapsed: %.2f s").
    const graphStart = Date.now();
    log.record(tag, `Capture target decode CUDA graph begin. This can take up to several minutes. avail mem=${fmt2(avail)} GB`);
    await s.phase();
    log.record(tag, `Capture target decode CUDA graph end. elapsed=${fmt2((Date.now() - graphStart) / 1000)} s, mem usage=0.50 GB, avail mem=${fmt2(avail - 0.5)} GB.`);
  }
  log.record(tag, `max_total_num_tokens=${cfg.kvTokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=${a.max_running_requests ?? 2048}, context_len=${a.context_length}, available_gpu_mem=${fmt2(avail - 0.5)} GB`);
  return true;
}

/**
 * What follows ready: a scheduler that dies (its exception, then the tree's exit), or one that hangs
 * (PRACTICE_SGLANG_HANG_AFTER_MS: no more output, no exit; its HTTP lives and /health answers 503
 * after its wait, api.js).
 */
function afterReady(s) {
  if (s.faultHere('crash_after_ready')) setTimeout(() => s.dies(...FAULTS.crash_after_ready), s.cfg.crashAfterMs);
  const hangAfter = hangAfterMs(process.env);
  if (hangAfter !== undefined && s.api) setTimeout(() => s.api.hangScheduler(), hangAfter);
}

/** PRACTICE_SGLANG_HANG_AFTER_MS: a whole number of ms, or undefined (no hang). */
function hangAfterMs(env) {
  const text = (env.PRACTICE_SGLANG_HANG_AFTER_MS ?? '').trim();
  return /^\d{1,9}$/.test(text) ? Number(text) : undefined;
}

/** model_runner.py load_model's barrier after the load, where a rank learns a peer never finished loading. */
const loadBarrierFailed = (rank) => [
  [...LOAD, [`${PY}/model_executor/model_runner.py`, 1010, 'load_model', 'raise ValueError(']],
  `ValueError: TP rank ${rank} could finish the model loading, but there are other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.`,
];

/**
 * A rank >= 1's dummy health server: /health and /health_generate answer 200, no key
 * (launch_dummy_health_check_server(server_args.host, server_args.port, ...), python/sglang/srt/
 * utils/common.py and engine.py, sgl-project/sglang 001067ff). A port taken fails the rank as
 * uvicorn fails: its "[Errno 98]" line, exit 1. Resolves false then.
 */
async function serveDummyHealth(a) {
  const http = require('node:http');
  const server = http.createServer((req, res) => {
    const path = (req.url || '/').split('?')[0];
    res.writeHead(req.method === 'GET' && (path === '/health' || path === '/health_generate' || path === '/ping') ? 200 : 404, { 'Content-Length': 0 });
    res.end();
  });
  log.onExit(() => server.close());
  log.record('', `Starting dummy health check server at ${a.host}:${a.port}`);
  const bound = await new Promise((resolve) => {
    server.once('error', (e) => resolve(e));
    server.listen(a.port, a.host, () => resolve(null));
  });
  if (bound === null) return true;
  bindFailed(a, bound);
  return false;
}

/** uvicorn's bind failure (uvicorn/server.py startup: logger.error(exc), then exit 1). */
function bindFailed(a, e) {
  const errno = { EADDRINUSE: 98, EADDRNOTAVAIL: 99, EACCES: 13 }[e.code] ?? 0;
  const what = { 98: 'address already in use', 99: 'cannot assign requested address', 13: 'permission denied' }[errno] ?? e.message;
  log.record('', `ERROR:    [Errno ${errno}] error while attempting to bind on address ('${a.host}', ${a.port}): ${what}`);
  log.exit(1);
}

/** Rank 0's HTTP server: uvicorn's lines, then the warm-up request, then the ready line (http_server.py _wait_and_warmup). */
async function serveHttp(a, cfg, dist) {
  const servedNames = [a.served_model_name ?? a.model_path];
  const api = createSglangApi({
    model: a.model_path,
    servedNames,
    maxModelLen: a.context_length,
    kvTokens: cfg.kvTokens,
    tokensPerSec: cfg.tokensPerSec,
    wrongAnswers: cfg.wrongAnswers,
    wedgeAfterMs: cfg.wedgeAfterMs,
    startTime: Math.floor(Date.now() / 1000),
    ...(a.api_key === undefined ? {} : { apiKey: a.api_key }),
  });
  try {
    await api.listen(a.host, a.port);
  } catch (e) {
    log.uvicorn(`Started server process [${process.pid}]`);
    bindFailed(a, e);
    return null;
  }
  const shown = a.host.includes(':') ? `[${a.host}]` : a.host;
  log.uvicorn(`Started server process [${process.pid}]`);
  log.uvicorn('Waiting for application startup.');
  log.uvicorn('Application startup complete.');
  log.uvicorn(`Uvicorn running on http://${shown}:${a.port} (Press CTRL+C to quit)`);
  if (!a.skip_server_warmup) {
    await sleep(cfg.phaseDelayMs);
    log.uvicorn(`127.0.0.1:49534 - "GET /get_model_info HTTP/1.1" 200 OK`);
    if (dist) await dist.barrier('warmup');
    log.record('TP0', 'Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ');
    await sleep(cfg.phaseDelayMs);
    log.uvicorn(`127.0.0.1:49540 - "POST /generate HTTP/1.1" 200 OK`);
  }
  api.warm();
  log.record('', 'The server is fired up and ready to roll!');
  return api;
}

/**
 * torch.distributed at --dist-init-addr (./dist.js): every rank waits there for all of them. A peer
 * lost later kills this rank's scheduler in the words of where it was: loading, SGLang's barrier
 * after the load (at once when its own load is done, else once it is: bootScheduler); in the
 * forwards of the memory profile, CUDA graph capture and warm-up, NCCL's remote error; at the init
 * and serving (the scheduler's loop broadcasts its requests over the CPU group), Gloo's "Connection
 * closed by peer". A store that waited its timeout says so as torch's TCPStore does.
 */
function rendezvous(s) {
  const { a, cfg, rank } = s;
  const [host, portText] = splitAddr(a.dist_init_addr ?? '');
  const lost = (peer) => {
    if (log.isExiting()) return;
    const gloo = `RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer ${peer}`;
    if (s.stage === 'load' && !s.loaded) s.lostWhileLoading = true;
    else if (s.stage === 'load') s.dies(...loadBarrierFailed(rank));
    else if (s.stage === 'collective') s.dies(LOOP, 'torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL version 2.27.3');
    else s.dies(s.stage === 'init' ? INIT : LOOP, gloo);
  };
  s.rdv = startDist({
    host,
    port: Number(portText),
    rank,
    nnodes: a.nnodes,
    timeoutS: cfg.rendezvousTimeoutS,
    onLost: lost,
    onTimeout: (joined) => s.dies(INIT, `torch.distributed.DistStoreError: Timed out after ${cfg.rendezvousTimeoutS} seconds waiting for clients. ${joined}/${a.nnodes} clients joined.`),
  });
  // A rendezvous that fails never resolves: the rank exits meanwhile.
  return s.rdv.ready.then(() => s.rdv.barrier('init'));
}

/** "HOST:PORT" or "[V6]:PORT". */
function splitAddr(s) {
  const m = /^\[([^\]]*)\]:(\d+)$/.exec(s) ?? /^([^:]*):(\d+)$/.exec(s);
  return m ? [m[1], m[2]] : [s, '0'];
}

module.exports = { runSglang, serverArgsLine };
