'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): a real TCP rendezvous that
// imitates the vLLM mp backend across nodes.
//
// Protocol: newline-delimited JSON over one TCP connection per worker.
//   worker -> head: {"type":"hello","rank":R,"nnodes":N}
//   head -> worker: {"type":"go"} once all nnodes-1 workers joined,
//                   {"type":"error","message":"..."} when the hello is rejected
//   both ways:      {"type":"hb"} every HEARTBEAT_MS; a peer silent for
//                   SILENCE_MS (or whose socket closes) is lost.
// Connections stay open for the life of the process.

const net = require('node:net');

const HEARTBEAT_MS = 1000;
const SILENCE_MS = 5000;
const RETRY_MS = 200;
const CONNECT_ATTEMPT_MS = 2000;
const HELLO_WAIT_MS = 10000;

function send(sock, msg) {
  if (!sock.destroyed && sock.writable) sock.write(JSON.stringify(msg) + '\n');
}

function lineReader(sock, onMsg) {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk) => {
    buf += chunk;
    if (buf.length > 1 << 20) {
      sock.destroy();
      return;
    }
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = { type: 'garbage', line };
      }
      onMsg(msg);
    }
  });
}

function fmtS(s) {
  return Number.isInteger(s) ? String(s) : String(Number(s.toFixed(3)));
}

/**
 * Rank 0. Listens on addr:port, waits for nnodes-1 workers.
 * opts: { addr, port, nnodes, timeoutS, log(msg), onJoin(rank, from), onLost(rank, why), onFatal(excLine) }
 * Returns { ready: Promise<void>, close() }.
 */
function startHead(opts) {
  const { addr, port, nnodes, timeoutS } = opts;
  const want = nnodes - 1;
  const peers = new Map(); // rank -> { sock, lastSeen, from }
  let closing = false;
  let done = false;
  let resolveReady;
  const ready = new Promise((r) => (resolveReady = r));
  let hbTimer = null;
  let timeoutTimer = null;

  const fatal = (exc) => {
    if (closing) return;
    closing = true;
    opts.onFatal(exc);
  };

  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    sock.setKeepAlive(true, 1000);
    sock.on('error', () => {});
    const from = `${sock.remoteAddress}:${sock.remotePort}`;
    let rank = null;
    const helloTimer = setTimeout(() => {
      if (rank === null) sock.destroy();
    }, HELLO_WAIT_MS);
    helloTimer.unref();
    lineReader(sock, (msg) => {
      if (rank !== null) {
        const p = peers.get(rank);
        if (p && p.sock === sock) p.lastSeen = Date.now();
        return; // heartbeats (or anything else) after hello
      }
      if (msg.type !== 'hello') {
        sock.destroy();
        return;
      }
      clearTimeout(helloTimer);
      const r = msg.rank;
      let problem = null;
      if (!Number.isInteger(r) || r < 1 || r >= nnodes) {
        problem = `out-of-range rank ${JSON.stringify(r)} from ${from} (expected 1..${nnodes - 1} for nnodes=${nnodes})`;
      } else if (peers.has(r)) {
        problem = `duplicate rank ${r} from ${from} (already joined from ${peers.get(r).from})`;
      } else if (done) {
        problem = `unexpected late worker rank ${r} from ${from} (all workers already joined)`;
      } else if (msg.nnodes !== undefined && msg.nnodes !== nnodes) {
        problem = `worker rank ${r} from ${from} has nnodes=${msg.nnodes} but the head has nnodes=${nnodes}`;
      }
      if (problem) {
        send(sock, { type: 'error', message: problem });
        setTimeout(() => sock.destroy(), 50).unref();
        fatal(`RuntimeError: rendezvous failed: ${problem}`);
        return;
      }
      rank = r;
      peers.set(r, { sock, lastSeen: Date.now(), from });
      if (opts.onJoin) opts.onJoin(r, from);
      if (peers.size === want) {
        done = true;
        clearTimeout(timeoutTimer);
        server.close(); // no new connections; existing ones stay open
        for (const p of peers.values()) send(p.sock, { type: 'go' });
        resolveReady();
      }
    });
    sock.on('close', () => {
      clearTimeout(helloTimer);
      if (closing || rank === null) return;
      const p = peers.get(rank);
      if (!p || p.sock !== sock) return;
      closing = true;
      opts.onLost(rank, 'closed');
    });
  });

  server.on('error', (e) => {
    if (e.code === 'EADDRINUSE' || e.code === 'EADDRNOTAVAIL' || e.code === 'EACCES') {
      const errno = { EADDRINUSE: -98, EADDRNOTAVAIL: -99, EACCES: -13 }[e.code];
      fatal(
        `RuntimeError: The server socket has failed to listen on any local network address. ` +
          `The server socket has failed to bind to ${addr}:${port} (errno: ${-errno} - ${e.message}). ` +
          `port: ${port}, useIpv6: ${net.isIPv6(addr) ? 1 : 0}, code: ${errno}, name: ${e.code}`,
      );
    } else {
      fatal(`RuntimeError: rendezvous server error on ${addr}:${port}: ${e.message}`);
    }
  });

  server.listen({ host: addr, port }, () => {
    if (opts.log) opts.log(`waiting for ${want} headless worker(s) on ${addr}:${port}`);
  });

  timeoutTimer = setTimeout(() => {
    if (!done) fatal(`RuntimeError: rendezvous timed out after ${fmtS(timeoutS)} s: ${peers.size} of ${want} workers joined`);
  }, timeoutS * 1000);

  hbTimer = setInterval(() => {
    if (closing) return;
    const now = Date.now();
    for (const [r, p] of peers) {
      send(p.sock, { type: 'hb' });
      if (now - p.lastSeen > SILENCE_MS) {
        closing = true;
        p.sock.destroy();
        opts.onLost(r, 'silent');
        return;
      }
    }
  }, HEARTBEAT_MS);

  function close() {
    closing = true;
    clearInterval(hbTimer);
    clearTimeout(timeoutTimer);
    try {
      server.close();
    } catch {
      /* ignore */
    }
    for (const p of peers.values()) p.sock.destroy();
  }

  return { ready, close };
}

/**
 * Rank > 0. Connects to addr:port (retrying every RETRY_MS until the timeout),
 * says hello and waits for "go".
 * opts: { addr, port, rank, nnodes, timeoutS, log(msg), onLost(why), onFatal(excLine) }
 */
function startWorker(opts) {
  const { addr, port, rank, nnodes, timeoutS } = opts;
  const deadline = Date.now() + timeoutS * 1000;
  let closing = false;
  let sock = null;
  let lastSeen = Date.now();
  let hbTimer = null;
  let retryTimer = null;
  let lastError = 'none';
  // This end of the connection, taken while it is open (a closed socket no longer says it).
  let local = { address: '', port: 0 };
  let resolveReady;
  const ready = new Promise((r) => (resolveReady = r));

  const fatal = (exc) => {
    if (closing) return;
    closing = true;
    opts.onFatal(exc);
  };
  const lost = (why) => {
    if (closing) return;
    closing = true;
    opts.onLost(why, local);
  };

  function attempt() {
    if (closing) return;
    let connected = false;
    const s = net.connect({ host: addr, port });
    s.setNoDelay(true);
    const attemptTimer = setTimeout(() => {
      if (!connected) {
        lastError = 'connect timeout';
        s.destroy();
      }
    }, CONNECT_ATTEMPT_MS);
    s.on('error', (e) => {
      if (!connected) lastError = e.code || e.message;
    });
    s.on('connect', () => {
      connected = true;
      clearTimeout(attemptTimer);
      sock = s;
      local = { address: s.localAddress ?? '', port: s.localPort ?? 0 };
      s.setKeepAlive(true, 1000);
      lastSeen = Date.now();
      if (opts.log) opts.log(`connected to master at ${addr}:${port}, waiting for all workers`);
      send(s, { type: 'hello', rank, nnodes });
      hbTimer = setInterval(() => {
        if (closing) return;
        send(s, { type: 'hb' });
        if (Date.now() - lastSeen > SILENCE_MS) {
          s.destroy();
          lost('silent');
        }
      }, HEARTBEAT_MS);
      lineReader(s, (msg) => {
        lastSeen = Date.now();
        if (msg.type === 'go') resolveReady();
        else if (msg.type === 'error') fatal(`RuntimeError: rendezvous rejected by master at ${addr}:${port}: ${msg.message}`);
      });
    });
    s.on('close', () => {
      clearTimeout(attemptTimer);
      if (closing) return;
      if (connected) {
        lost('closed');
        return;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        fatal(
          `RuntimeError: rendezvous timed out after ${fmtS(timeoutS)} s: could not join master at ${addr}:${port} (last error: ${lastError})`,
        );
        return;
      }
      retryTimer = setTimeout(attempt, Math.min(RETRY_MS, left));
    });
  }
  attempt();

  function close() {
    closing = true;
    clearInterval(hbTimer);
    clearTimeout(retryTimer);
    if (sock) sock.destroy();
  }

  return { ready, close };
}

module.exports = { startHead, startWorker, HEARTBEAT_MS, SILENCE_MS };
