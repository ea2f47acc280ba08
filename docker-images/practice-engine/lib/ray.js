'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): a stand-in for Ray, as vLLM's Ray backend uses
// it. It is NOT Ray. What it keeps of Ray:
//   - `ray start --head --node-ip-address=IP --port=P` starts a "GCS" (a TCP server on IP:P) in the
//     background, writes its address to /tmp/ray/ray_current_cluster (where `ray.init(address=
//     "auto")` finds it) and returns;
//   - `ray start --block --address=H:P --node-ip-address=IP` joins that GCS over the fabric and
//     stays up as long as the GCS answers (a node is alive while its connection is open);
//   - the node table (`ray.nodes()`: NodeManagerAddress, Alive), `ray status`, `ray --version`;
//   - vLLM's env carry-over: the driver sends the env it copies to every worker node, which
//     overwrites its own env with it (vllm/ray/ray_env.py get_env_vars_to_copy, then
//     RayWorkerWrapper.update_environment_variables) and checks it the way the engine would use it.
// Protocol: newline-delimited JSON over TCP.
//   node -> gcs: {"type":"join","ip":IP}            (the connection stays open: the node is alive)
//   any  -> gcs: {"type":"nodes"}                    -> {"type":"nodes","nodes":[{NodeManagerAddress,Alive}]}
//   driver -> gcs: {"type":"env","env":{...}}       -> gcs -> every node: {"type":"env","id":N,"env":{...}}
//   node -> gcs: {"type":"env-result","id":N,"error":null|"..."} -> driver: {"type":"env-done","results":[...]}

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

// Ray keeps its session files under $RAY_TMPDIR/ray (default /tmp/ray).
const currentClusterFile = (env = process.env) => path.join(env.RAY_TMPDIR || '/tmp', 'ray', 'ray_current_cluster');
const VERSION = '2.49.0';

function lines(sock, onMsg) {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk) => {
    buf += chunk;
    if (buf.length > 1 << 20) return sock.destroy();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      try {
        onMsg(JSON.parse(line));
      } catch {
        sock.destroy();
      }
    }
  });
}

function send(sock, msg) {
  if (!sock.destroyed && sock.writable) sock.write(JSON.stringify(msg) + '\n');
}

/** The GCS stand-in: the head node is alive itself; workers while their connection is open. */
function serveGcs(ip, port, onListening) {
  const nodes = new Map(); // sock -> ip
  const dead = new Set();
  let nextId = 1;
  const pending = new Map(); // id -> { driver, waiting: Set<sock>, results: [] }
  const server = net.createServer((sock) => {
    sock.on('error', () => {});
    sock.on('close', () => {
      const was = nodes.get(sock);
      if (was !== undefined) {
        nodes.delete(sock);
        dead.add(was);
      }
      for (const [id, p] of pending) {
        if (p.waiting.delete(sock)) {
          p.results.push({ ip: was, error: `node ${was} died` });
          if (p.waiting.size === 0) finish(id);
        }
      }
    });
    lines(sock, (msg) => {
      if (msg.type === 'join' && typeof msg.ip === 'string') {
        nodes.set(sock, msg.ip);
        dead.delete(msg.ip);
      } else if (msg.type === 'nodes') {
        const alive = [ip, ...nodes.values()];
        const table = [...alive.map((a) => ({ NodeManagerAddress: a, Alive: true })), ...[...dead].filter((d) => !alive.includes(d)).map((d) => ({ NodeManagerAddress: d, Alive: false }))];
        send(sock, { type: 'nodes', nodes: table });
      } else if (msg.type === 'env') {
        const id = nextId++;
        const workers = [...nodes.keys()];
        pending.set(id, { driver: sock, waiting: new Set(workers), results: [] });
        if (workers.length === 0) return finish(id);
        for (const w of workers) send(w, { type: 'env', id, env: msg.env });
      } else if (msg.type === 'env-result') {
        const p = pending.get(msg.id);
        if (!p || !p.waiting.delete(sock)) return;
        p.results.push({ ip: nodes.get(sock), error: msg.error ?? null });
        if (p.waiting.size === 0) finish(msg.id);
      }
    });
  });
  function finish(id) {
    const p = pending.get(id);
    pending.delete(id);
    if (p) send(p.driver, { type: 'env-done', results: p.results });
  }
  server.listen(port, ip, onListening);
  return server;
}

function parseAddress(text) {
  const i = text.lastIndexOf(':');
  return { host: text.slice(0, i), port: Number(text.slice(i + 1)) };
}

/** The running cluster's GCS address, as `ray.init(address="auto")` finds it. */
function currentAddress(env = process.env) {
  if (env.RAY_ADDRESS && env.RAY_ADDRESS !== 'auto') return parseAddress(env.RAY_ADDRESS);
  try {
    return parseAddress(fs.readFileSync(currentClusterFile(env), 'utf8').trim());
  } catch {
    return null;
  }
}

/** One request to the GCS, one answer (bounded in time). */
function ask(addr, msg, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: addr.host, port: addr.port });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no answer from the GCS at ${addr.host}:${addr.port}`));
    }, timeoutMs);
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('connect', () => send(sock, msg));
    lines(sock, (answer) => {
      clearTimeout(timer);
      sock.end();
      resolve(answer);
    });
  });
}

/** `ray.nodes()`. */
async function rayNodes(addr) {
  return (await ask(addr, { type: 'nodes' })).nodes;
}

/**
 * vLLM's env carry-over, computed as vllm/ray/ray_env.py get_env_vars_to_copy does: every name
 * under its prefixes (plus PYTHONHASHSEED), minus the executor's worker-specific names
 * (vllm/v1/executor/ray_executor.py WORKER_SPECIFIC_ENV_VARS) and the names listed in
 * VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json (VLLM_CONFIG_ROOT defaults to
 * ${XDG_CONFIG_HOME:-~/.config}/vllm, vllm/envs.py).
 */
const PREFIXES = ['VLLM_', 'LMCACHE_', 'NCCL_', 'UCX_', 'HF_', 'HUGGING_FACE_'];
const EXTRA = ['PYTHONHASHSEED'];
const WORKER_SPECIFIC = ['VLLM_HOST_IP', 'VLLM_HOST_PORT', 'LOCAL_RANK', 'CUDA_VISIBLE_DEVICES'];

function nonCarryOverFile(env) {
  const home = env.HOME || '/root';
  const root = env.VLLM_CONFIG_ROOT || path.join(env.XDG_CONFIG_HOME || path.join(home, '.config'), 'vllm');
  return path.join(root, 'ray_non_carry_over_env_vars.json');
}

function carryOver(env) {
  const file = nonCarryOverFile(env);
  let excluded = [];
  let warning = null;
  try {
    if (fs.existsSync(file)) excluded = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    warning = `Failed to parse ${file}. Using an empty set for non-carry-over env vars.`;
    excluded = [];
  }
  const prefixes = [...PREFIXES, ...(env.VLLM_RAY_ENV_VAR_PREFIXES_TO_COPY || '').split(',').map((s) => s.trim()).filter(Boolean)];
  const names = Object.keys(env).filter(
    (k) => (prefixes.some((p) => k.startsWith(p)) || EXTRA.includes(k)) && !WORKER_SPECIFIC.includes(k) && !excluded.includes(k),
  );
  const copied = {};
  for (const k of names.sort()) copied[k] = env[k];
  return { file, excluded, copied, warning };
}

module.exports = { currentClusterFile, VERSION, serveGcs, currentAddress, parseAddress, ask, rayNodes, carryOver, lines, send };
