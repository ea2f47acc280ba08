'use strict';
// The practice engine's llama.cpp persona (a stand-in for llama.cpp, not llama.cpp): bin/llama-server
// and bin/rpc-server as launcher reads them (src/engine/llamacpp/log-shapes.ts).
//   node --test docker-images/practice-engine/test/llamacpp.test.js
// Everything runs on 127.0.0.1 with short delays and bounded waits.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const { freePort } = require('./free-port.js');
const { req } = require('./loopback-http.js');

const BIN = path.join(__dirname, '..', 'bin');
const MODEL = path.join(__dirname, '..', 'lib', 'llamacpp', 'practice.gguf');
const procs = new Set();
test.after(() => { for (const p of procs) p.kill('SIGKILL'); });

function run(program, args, env = {}) {
  const proc = spawn(process.execPath, [path.join(BIN, program), ...args], {
    env: { PATH: process.env.PATH, PRACTICE_PHASE_DELAY_MS: '5', PRACTICE_LOAD_DELAY_MS: '20', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.add(proc);
  const r = { proc, text: '' };
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) if (w.re.test(r.text)) (waiters.splice(waiters.indexOf(w), 1), clearTimeout(w.t), w.resolve());
  };
  proc.stdout.on('data', (d) => { r.text += d; check(); });
  proc.stderr.on('data', (d) => { r.text += d; check(); });
  r.exited = new Promise((resolve) => proc.on('exit', (code) => { procs.delete(proc); resolve(code); }));
  r.waitFor = (re, ms = 5000) => new Promise((resolve, reject) => {
    const w = { re, resolve, t: setTimeout(() => reject(new Error(`timeout waiting for ${re}:\n${r.text}`)), ms) };
    waiters.push(w);
    check();
  });
  r.exit = (ms = 5000) => Promise.race([r.exited, new Promise((_, reject) => setTimeout(() => reject(new Error(`no exit within ${ms} ms:\n${r.text}`)), ms))]);
  return r;
}

const lines = (text) => text.split('\n').filter((l) => l.trim() !== '');

test('one node: the log in llama-server\'s order, /health 503 while loading then 200, chat, metrics, the key', async () => {
  const port = await freePort();
  const s = run('llama-server', ['--model', MODEL, '--alias', 'practice', '--metrics', '--api-key', 'k1', '--host', '127.0.0.1', '--port', String(port)], { PRACTICE_LOAD_DELAY_MS: '400' });
  await s.waitFor(/main: loading model/);
  const loading = await req(port, 'GET', '/health');
  assert.equal(loading.status, 503);
  assert.deepEqual(JSON.parse(loading.body), { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
  await s.waitFor(/server is listening on http:\/\/127\.0\.0\.1:\d+ - starting the main loop/);
  const order = [/^main: HTTP server is listening/, /^main: loading model/, /^print_info: file size += [\d.]+ GiB/, /^llama_kv_cache: size = /, /^common_init_from_params: warming up/, /^main: model loaded/, /^main: server is listening on http/];
  const at = order.map((re) => lines(s.text).findIndex((l) => re.test(l)));
  assert.ok(at.every((i, k) => i >= 0 && (k === 0 || i > at[k - 1])), `${at}\n${s.text}`);
  assert.equal((await req(port, 'GET', '/health')).status, 200);
  assert.equal((await req(port, 'GET', '/v1/models')).status, 200, '/v1/models takes no key');
  const noKey = await req(port, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(noKey.status, 401);
  assert.equal(JSON.parse(noKey.body).error.message, 'Invalid API Key');
  const chat = await req(port, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'What is 2 + 3?' }], max_tokens: 5 }, { authorization: 'Bearer k1' });
  assert.equal(chat.status, 200);
  assert.equal(JSON.parse(chat.body).choices[0].message.content.trim(), '5');
  const metrics = await req(port, 'GET', '/metrics', undefined, { authorization: 'Bearer k1' });
  assert.match(metrics.body, /^llamacpp:tokens_predicted_total 1$/m);
  assert.match(metrics.body, /^llamacpp:requests_processing 0$/m);
});

test('without --metrics /metrics is 501; LLAMA_API_KEY is the key when no --api-key is given', async () => {
  const port = await freePort();
  const s = run('llama-server', ['--model', MODEL, '--host', '127.0.0.1', '--port', String(port)], { LLAMA_API_KEY: 'envkey' });
  await s.waitFor(/server is listening on http/);
  assert.equal((await req(port, 'GET', '/metrics', undefined, { authorization: 'Bearer envkey' })).status, 501);
  assert.equal((await req(port, 'POST', '/v1/completions', { prompt: 'x', max_tokens: 2 }, { authorization: 'Bearer envkey' })).status, 200);
});

/** Until 127.0.0.1:port accepts a connection, which closes at once (bounded). */
async function accepts(port, ms = 5000) {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`127.0.0.1:${port} never accepted`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('two nodes: rpc-server holds its stdout (a pipe) until a client connects; the head connects, and dies when its worker does', async () => {
  const rpcPort = await freePort();
  const port = await freePort();
  const w = run('rpc-server', ['--host', '127.0.0.1', '--port', String(rpcPort)]);
  await accepts(rpcPort);
  // A probe's connection (launcher's, from the head's node) flushes the banner; the server then serves the next client.
  await w.waitFor(/^Client connection closed$/m);
  assert.match(w.text, /^Starting RPC server v\d+\.\d+\.\d+\n {2}endpoint {7}: 127\.0\.0\.1:\d+\n {2}local cache {4}: n\/a\nDevices:\n.*\n {2}transport {6}: TCP\nAccepted client connection\n/m);
  const h = run('llama-server', ['--model', MODEL, '--host', '127.0.0.1', '--port', String(port), '--rpc', `127.0.0.1:${rpcPort}`]);
  await h.waitFor(/server is listening on http/);
  assert.match(h.text, new RegExp(`using device RPC0 \\(127\\.0\\.0\\.1:${rpcPort}\\)`));
  await w.waitFor(/^Accepted client connection\n(?:[^]*\n)?Accepted client connection$/m);
  w.proc.kill('SIGKILL');
  await h.waitFor(/ggml-rpc\.cpp:\d+: Remote RPC server crashed or returned malformed response/);
  assert.equal(await h.exit(), 134);
});

test('rpc-server on a pipe: nothing on stdout until its first client, though it listens', async () => {
  const rpcPort = await freePort();
  const w = run('rpc-server', ['--host', '127.0.0.1', '--port', String(rpcPort)], { PRACTICE_RPC_INIT_MS: '0' });
  // It listens once its (held) transport line is written: a connection proves it, and flushes.
  await new Promise((r) => setTimeout(r, 300));
  assert.doesNotMatch(w.text, /Starting RPC server|transport/, 'a log-based wait would never see it');
  await accepts(rpcPort);
  await w.waitFor(/^ {2}transport {6}: TCP\nAccepted client connection$/m);
});

test('llama-server with a dead worker aborts while it parses its arguments: no build line, no HTTP server', async () => {
  const port = await freePort();
  const h = run('llama-server', ['--model', MODEL, '--host', '127.0.0.1', '--port', String(port), '--rpc', `127.0.0.1:${await freePort()}`]);
  assert.equal(await h.exit(), 134);
  assert.match(lines(h.text)[0] ?? '', /ggml-rpc\.cpp:\d+: Failed to connect to 127\.0\.0\.1:\d+/);
  assert.doesNotMatch(h.text, /^build: |HTTP server is listening/m);
});

test('while the model loads, every route answers 503 before any API key is asked', async () => {
  const port = await freePort();
  const s = run('llama-server', ['--model', MODEL, '--api-key', 'k1', '--host', '127.0.0.1', '--port', String(port)], { PRACTICE_LOAD_DELAY_MS: '600' });
  await s.waitFor(/main: loading model/);
  const chat = await req(port, 'POST', '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(chat.status, 503);
  assert.equal(JSON.parse(chat.body).error.message, 'Loading model');
  assert.equal((await req(port, 'GET', '/metrics')).status, 503);
});

test('an rpc-server bound elsewhere than 127.0.0.1 warns that it has no authentication', async () => {
  const w = run('rpc-server', ['--host', '127.0.0.2', '--port', String(await freePort())]);
  await w.waitFor(/Never expose the RPC server to an open network!/);
});

test('failures as llama.cpp fails: no model file, out of memory, an unknown argument, an unreachable worker, a worker that cannot bind', async () => {
  const port = await freePort();
  const missing = run('llama-server', ['--model', '/nonexistent/m.gguf', '--host', '127.0.0.1', '--port', String(port)]);
  assert.equal(await missing.exit(), 1);
  assert.match(missing.text, /gguf_init_from_file: failed to open GGUF file '\/nonexistent\/m\.gguf' \(No such file or directory\)\n[\s\S]*main: exiting due to model loading error/);
  const oom = run('llama-server', ['--model', MODEL, '--host', '127.0.0.1', '--port', String(await freePort())], { PRACTICE_FAULT: 'oom' });
  assert.equal(await oom.exit(), 1);
  assert.match(oom.text, /cudaMalloc failed: out of memory/);
  const bad = run('llama-server', ['--model', MODEL, '--no-such-flag']);
  assert.equal(await bad.exit(), 1);
  assert.match(bad.text, /^error: invalid argument: --no-such-flag$/m);
  const unreachable = run('llama-server', ['--model', MODEL, '--host', '127.0.0.1', '--port', String(await freePort()), '--rpc', `127.0.0.1:${await freePort()}`]);
  assert.equal(await unreachable.exit(), 134);
  assert.match(unreachable.text, /ggml-rpc\.cpp:\d+: Failed to connect to 127\.0\.0\.1:\d+/);
  const exit = run('rpc-server', ['--host', '127.0.0.1', '--port', String(await freePort())], { PRACTICE_FAULT: 'worker_exit' });
  assert.equal(await exit.exit(), 0, 'rpc-server returns 0 when start_server returns');
  assert.match(exit.text, /^Failed to create server socket$/m);
});
