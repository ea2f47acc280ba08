'use strict';
// practice-engine's rpc-server (a stand-in for llama.cpp's, not llama.cpp): tools/rpc/rpc-server.cpp
// and ggml/src/ggml-rpc/ggml-rpc.cpp ggml_backend_rpc_start_server as they print and fail:
//   the warning for any host but 127.0.0.1 (stderr), then on stdout "Starting RPC server vX.Y.Z",
//   "  endpoint       : HOST:PORT", "  local cache    : n/a", "Devices:", one line per device,
//   "  transport      : TCP" right before it binds, then "Accepted client connection" and
//   "Client connection closed" per client (one at a time). stdout is held as a pipe holds a C
//   program's output, until the first client connects (see `out` below).
// It takes TCP connections on HOST:PORT; the practice llama-server connects once and keeps the
// connection, as the real client does. Faults (PRACTICE_FAULT with PRACTICE_FAULT_RANK above 0,
// which every practice worker takes as its own, since rpc-server knows no rank):
//   worker_exit  "Failed to create server socket" and exit, before it listens
//   hang         the banner, then nothing: it never binds
// PRACTICE_RPC_INIT_MS: how long its device's backend takes to start, between the device's line
// and the transport line (default 300).
//   crash_after_ready  dies PRACTICE_CRASH_AFTER_MS after its client connected (the head then
//                aborts: "Remote RPC server crashed or returned malformed response")

const net = require('node:net');

const PROTOCOL = '3.0.0';
const err = (l) => process.stderr.write(`${l}\n`);

// stdout as a C program's: on a pipe (a container run detached, without -t) it is fully buffered
// (glibc: a buffer of st_blksize, 4096 for a pipe), and ggml_backend_rpc_start_server calls
// fflush(stdout) only after "Accepted client connection" and "Client connection closed". So the
// banner and the transport line reach `docker logs` only once the first client connects, or at
// exit() (a return from main); a signal's death loses them. On a terminal, stdout is line-buffered.
let held = process.stdout.isTTY === true ? null : [];
const flush = () => {
  if (held !== null && held.length > 0) process.stdout.write(held.join(''));
  if (held !== null) held = [];
};
const out = (l, fflush = false) => {
  if (held === null) return void process.stdout.write(`${l}\n`);
  held.push(`${l}\n`);
  if (fflush) flush();
};

function usage(argv0) {
  err(`Usage: ${argv0} [options]\n\noptions:\n  -h, --help                       show this help message and exit\n  -t, --threads N                  number of threads for the CPU device (default: 4)\n  -d, --device <dev1,dev2,...>     comma-separated list of devices\n  -H, --host HOST                  host to bind to (default: 127.0.0.1)\n  -p, --port PORT                  port to bind to (default: 50052)\n  -m, --mem <M1,M2,...>            memory size for each device (in MB)\n  -c, --cache                      enable local file cache\n`);
}

/** rpc_server_params_parse: false for a missing or bad value; an unknown argument prints usage and exits 0. */
function parse(argv) {
  const p = { host: '127.0.0.1', port: 50052, cache: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-H' || a === '--host') {
      if (++i >= argv.length) return null;
      p.host = argv[i];
    } else if (a === '-p' || a === '--port') {
      if (++i >= argv.length) return null;
      p.port = Number(argv[i]);
      if (!Number.isInteger(p.port) || p.port <= 0 || p.port > 65535) return null;
    } else if (a === '-t' || a === '--threads' || a === '-d' || a === '--device' || a === '-m' || a === '--mem') {
      if (++i >= argv.length) return null;
    } else if (a === '-c' || a === '--cache') {
      p.cache = true;
    } else if (a === '-h' || a === '--help') {
      usage('rpc-server');
      process.exit(0);
    } else {
      err(`error: unknown argument: ${a}`);
      usage('rpc-server');
      process.exit(0);
    }
  }
  return p;
}

function fault(env) {
  const f = (env.PRACTICE_FAULT ?? '').trim();
  const rank = env.PRACTICE_FAULT_RANK === undefined ? (f === 'worker_exit' ? 1 : 0) : Number(env.PRACTICE_FAULT_RANK);
  return rank > 0 ? f : '';
}

function main(argv, env) {
  setInterval(() => {}, 1 << 30);
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
  const p = parse(argv);
  if (p === null) {
    err('Invalid parameters');
    process.exit(1);
  }
  if (p.host !== '127.0.0.1') {
    err('');
    err('!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!');
    err(`WARNING: Host ('${p.host}') is != '127.0.0.1'`);
    err('         Never expose the RPC server to an open network!');
    err('         This is an experimental feature and is not secure!');
    err('!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!');
    err('');
  }
  out(`Starting RPC server v${PROTOCOL}`);
  out(`  endpoint       : ${p.host}:${p.port}`);
  out(`  local cache    : ${p.cache ? '/root/.cache/llama.cpp/rpc/' : 'n/a'}`);
  out('Devices:');
  out('  CUDA0: NVIDIA GB10 (122502 MiB, 119000 MiB free)');
  const f = fault(env);
  if (f === 'hang') return;
  // The device's backend starts after its line (ggml_backend_dev_init, a CUDA context): the
  // transport line and the bind come that long later (PRACTICE_RPC_INIT_MS, default 300).
  setTimeout(() => listen(p, f, env), Number(env.PRACTICE_RPC_INIT_MS ?? 300));
}

function listen(p, f, env) {
  out('  transport      : TCP');
  if (f === 'worker_exit') {
    err('Failed to create server socket');
    flush();
    process.exit(0);
  }
  const crashAfter = Number(env.PRACTICE_CRASH_AFTER_MS ?? 1000);
  const server = net.createServer((sock) => {
    out('Accepted client connection', true);
    sock.on('error', () => {});
    sock.on('close', () => out('Client connection closed', true));
    sock.on('data', () => {});
    if (f === 'crash_after_ready') setTimeout(() => process.exit(134), crashAfter);
  });
  server.on('error', () => {
    err('Failed to create server socket');
    flush();
    process.exit(0);
  });
  server.listen({ host: p.host, port: p.port });
}

module.exports = { main, parse };
