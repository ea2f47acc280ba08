'use strict';
// practice-engine's SGLang persona: torch.distributed as SGLang's ranks meet it (a stand-in, not
// torch). Every rank connects to --dist-init-addr, where rank 0 listens (torch's TCPStore); the
// store waits for all of them ("Timed out after N seconds waiting for clients. K/N clients joined."
// torch/csrc/distributed/c10d/TCPStore.cpp); then collectives (barrier(step)) block each rank until
// every rank reached the same step, as SGLang's TP all-reduces do (the memory profile before the
// KV cache, the warm-up's forward). A rank whose peer's socket closes loses it.
//
// Protocol: newline-delimited JSON, one connection per rank above 0:
//   worker -> head {"hello": rank}, {"at": step};  head -> worker {"go": step}.

const net = require('node:net');

const RETRY_MS = 200;

function lines(sock, onMsg) {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (d) => {
    buf += d;
    if (buf.length > 1 << 16) return sock.destroy();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        onMsg(JSON.parse(line));
      } catch {
        sock.destroy();
      }
    }
    return undefined;
  });
}

const send = (sock, msg) => {
  if (!sock.destroyed) sock.write(`${JSON.stringify(msg)}\n`);
};

/** opts: { host, port, rank, nnodes, timeoutS, onLost(peer), onTimeout(joined) }. Returns { ready, barrier(step), close() }. */
function startDist(opts) {
  return opts.rank === 0 ? head(opts) : worker(opts);
}

function head({ host, port, nnodes, timeoutS, onLost, onTimeout }) {
  const peers = new Map();
  const at = new Map();
  const waiting = new Map();
  let closing = false;
  let resolveReady;
  const ready = new Promise((r) => (resolveReady = r));
  const release = (step) => {
    const count = at.get(step) ?? 0;
    const w = waiting.get(step);
    if (w === undefined || count < nnodes - 1) return;
    waiting.delete(step);
    for (const s of peers.values()) send(s, { go: step });
    w();
  };
  const server = net.createServer((sock) => {
    let rank = null;
    lines(sock, (m) => {
      if (typeof m.hello === 'number' && rank === null) {
        rank = m.hello;
        peers.set(rank, sock);
        if (peers.size === nnodes - 1) {
          clearTimeout(timer);
          resolveReady();
        }
      } else if (typeof m.at === 'string') {
        at.set(m.at, (at.get(m.at) ?? 0) + 1);
        release(m.at);
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => {
      if (!closing && rank !== null) onLost(`[${sock.remoteAddress}]:${sock.remotePort}`);
    });
  });
  server.on('error', (e) => onTimeout(0, e.message));
  server.listen({ host, port });
  const timer = setTimeout(() => onTimeout(peers.size + 1), timeoutS * 1000);
  return {
    ready,
    barrier: (step) => new Promise((resolve) => {
      waiting.set(step, resolve);
      release(step);
    }),
    close: () => {
      closing = true;
      clearTimeout(timer);
      for (const s of peers.values()) s.destroy();
      server.close();
    },
  };
}

function worker({ host, port, rank, timeoutS, onLost, onTimeout }) {
  const deadline = Date.now() + timeoutS * 1000;
  const gone = new Map();
  let sock = null;
  let closing = false;
  let resolveReady;
  const ready = new Promise((r) => (resolveReady = r));
  const connect = () => {
    if (closing) return;
    const s = net.connect({ host, port });
    s.on('connect', () => {
      sock = s;
      send(s, { hello: rank });
      resolveReady();
    });
    lines(s, (m) => {
      const w = typeof m.go === 'string' ? gone.get(m.go) : undefined;
      if (w !== undefined) {
        gone.delete(m.go);
        w();
      }
    });
    s.on('error', () => {});
    s.on('close', () => {
      if (closing) return;
      if (sock === s) onLost(`[${host}]:${port}`);
      else if (Date.now() < deadline) setTimeout(connect, RETRY_MS);
      else onTimeout(rank);
    });
  };
  connect();
  return {
    ready,
    barrier: (step) => new Promise((resolve) => {
      gone.set(step, resolve);
      send(sock, { at: step });
    }),
    close: () => {
      closing = true;
      if (sock) sock.destroy();
    },
  };
}

module.exports = { startDist };
