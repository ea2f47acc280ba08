'use strict';
// The practice engine's SGLang persona (a stand-in for SGLang, not SGLang):
//   node --test docker-images/practice-engine/test/sglang.test.js
// Everything runs on 127.0.0.1 with short delays and bounded waits.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const { freePort } = require('./free-port.js');
const { LAUNCH_FIRST_LINE } = require('../lib/sglang/entry.js');

const PYTHON3 = path.join(__dirname, '..', 'bin', 'python3');
const procs = new Set();
test.after(() => {
  for (const p of procs) p.kill('SIGKILL');
});

/** `python3 ARGS` of the image, run by this node (the image's interpreter is its node). */
function python3(args, env = {}) {
  const proc = spawn(process.execPath, [PYTHON3, ...args], {
    env: { PATH: process.env.PATH, PRACTICE_PHASE_DELAY_MS: '5', PRACTICE_LOAD_DELAY_MS: '20', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.add(proc);
  const r = { proc, out: '', err: '' };
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.re.test(r.out + r.err)) {
        waiters.splice(waiters.indexOf(w), 1);
        clearTimeout(w.t);
        w.resolve();
      }
    }
  };
  proc.stdout.on('data', (d) => { r.out += d; check(); });
  proc.stderr.on('data', (d) => { r.err += d; check(); });
  r.exited = new Promise((resolve) => proc.on('exit', (code, signal) => { procs.delete(proc); resolve({ code, signal }); }));
  r.waitFor = (re, ms = 5000) => new Promise((resolve, reject) => {
    const w = { re, resolve, t: setTimeout(() => reject(new Error(`timeout waiting for ${re}\nstdout:\n${r.out}\nstderr:\n${r.err}`)), ms) };
    waiters.push(w);
    check();
  });
  return r;
}

const launch = (args, env) => python3(['-m', 'sglang.launch_server', ...args], env);

function req(port, method, p, { body, key, timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = { ...(data ? { 'content-type': 'application/json' } : {}), ...(key ? { authorization: `Bearer ${key}` } : {}) };
    const q = http.request({ host: '127.0.0.1', port, method, path: p, headers }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve({ status: res.statusCode, body: s }));
    });
    q.on('error', reject);
    q.setTimeout(timeoutMs, () => q.destroy(new Error('request timeout')));
    if (data) q.write(data);
    q.end();
  });
}

/**
 * A GET of a server that logs its start line before it listens (SGLang's dummy health server does,
 * as launch_dummy_health_check_server logs before uvicorn binds): asked again while the port
 * refuses, at most 250 times over at most `ms`.
 */
async function onceListening(port, p, ms = 5000) {
  const giveUpAt = Date.now() + ms;
  for (let tries = 1; ; tries++) {
    try {
      return await req(port, 'GET', p);
    } catch (e) {
      if (e.code !== 'ECONNREFUSED' || tries >= 250 || Date.now() > giveUpAt) throw e;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const CHAT = { model: 'org/m', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
const READY = /The server is fired up and ready to roll!/;

/** The lines' messages, without SGLang's "[time TAG] " header. */
const messages = (text) => text.split('\n').map((l) => l.replace(/^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] /, ''));

test('one node: SGLang\'s lines in SGLang\'s order, /health 503 until the warm-up is done, then OpenAI and SGLang\'s metrics', async () => {
  const port = await freePort();
  // A slow warm-up: /health is asked while uvicorn listens and the warm-up request has not come back.
  const p = launch(['--model-path', 'org/m', '--host', '127.0.0.1', '--port', String(port), '--tp', '1', '--enable-metrics'], { PRACTICE_PHASE_DELAY_MS: '400' });
  await p.waitFor(/Uvicorn running on http:\/\/127\.0\.0\.1:\d+/, 15000);
  assert.equal((await req(port, 'GET', '/health')).status, 503, 'not warm yet');
  await p.waitFor(READY, 5000);
  assert.equal((await req(port, 'GET', '/health')).status, 200);
  const order = [
    /^server_args=\{'model_path': 'org\/m'/,
    /^Init torch distributed begin\./,
    /^Load weight begin\. avail mem=/,
    /^Load weight end\. elapsed=[\d.]+ s, type=\w+, avail mem=[\d.]+ GB, mem usage=84\.12 GB\./,
    /^KV Cache is allocated\. #tokens: 1250000, K size: [\d.]+ GB, V size: [\d.]+ GB/,
    /^Capture target decode CUDA graph begin\./,
    /^Capture target decode CUDA graph end\. elapsed=[\d.]+ s, /,
    /^max_total_num_tokens=1250000, /,
    /^INFO: {5}Uvicorn running on /,
    /^INFO: {5}127\.0\.0\.1:\d+ - "POST \/generate HTTP\/1\.1" 200 OK/,
    /^The server is fired up and ready to roll!$/,
  ];
  const lines = messages(p.out);
  let at = -1;
  for (const re of order) {
    const i = lines.findIndex((l, j) => j > at && re.test(l));
    assert.ok(i > at, `${re} after line ${at}:\n${p.out}`);
    at = i;
  }
  assert.match(p.out, /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Load weight end/m, 'the scheduler\'s lines carry its rank');
  const chat = await req(port, 'POST', '/v1/chat/completions', { body: CHAT });
  assert.equal(chat.status, 200, chat.body);
  const metrics = (await req(port, 'GET', '/metrics')).body;
  for (const name of ['sglang:num_running_reqs', 'sglang:num_queue_reqs', 'sglang:token_usage', 'sglang:prompt_tokens_total', 'sglang:generation_tokens_total']) assert.match(metrics, new RegExp(`^${name}\\{model_name="org/m"\\} `, 'm'), name);
  assert.doesNotMatch(metrics, /vllm:/);
});

test('a scheduler that dies after ready: its exception, the parent\'s sigquit line, and the process tree exits (SIGKILL: 137)', async () => {
  const port = await freePort();
  const p = launch(['--model-path', 'org/m', '--host', '127.0.0.1', '--port', String(port)], { PRACTICE_FAULT: 'crash_after_ready', PRACTICE_CRASH_AFTER_MS: '100' });
  await p.waitFor(READY, 15000);
  assert.deepEqual(await p.exited, { code: 137, signal: null });
  assert.match(p.out, /^\[[\d :-]+ TP0\] Scheduler hit an exception: Traceback \(most recent call last\):$/m);
  assert.match(p.out, /RuntimeError: CUDA error: device-side assert triggered\n\[[\d :-]+\] Received sigquit from a child process\. It usually means the child failed\.$/m);
  await assert.rejects(req(port, 'GET', '/health'), /ECONNREFUSED/);
});

test('a scheduler that hangs after ready (PRACTICE_SGLANG_HANG_AFTER_MS): the process and its HTTP live on, /health answers 503 after its wait, generation never answers', async () => {
  const port = await freePort();
  const p = launch(['--model-path', 'org/m', '--host', '127.0.0.1', '--port', String(port)], { PRACTICE_SGLANG_HANG_AFTER_MS: '50', PRACTICE_SGLANG_HEALTH_TIMEOUT_MS: '400' });
  await p.waitFor(READY, 15000);
  await new Promise((r) => setTimeout(r, 150));
  const t0 = Date.now();
  assert.equal((await req(port, 'GET', '/health')).status, 503);
  assert.ok(Date.now() - t0 >= 350, 'the answer comes after the health check\'s wait');
  await assert.rejects(req(port, 'POST', '/v1/chat/completions', { body: CHAT, timeoutMs: 500 }), /request timeout/);
  assert.equal(p.proc.exitCode, null, 'the process runs on');
  assert.doesNotMatch(p.out, /Scheduler hit an exception/, 'a hung scheduler says nothing');
});

test('the same fault knobs fail the boot SGLang\'s way: the scheduler\'s exception names the cause, and the process tree exits', async () => {
  const cases = [
    ['cuda_oom', /torch\.OutOfMemoryError: CUDA out of memory/],
    ['kv_too_small', /RuntimeError: Not enough memory\. Please try to increase --mem-fraction-static\./],
    ['engine_core_init', /RuntimeError: practice-engine: simulated scheduler init failure/],
  ];
  for (const [fault, cause] of cases) {
    const p = launch(['--model-path', 'org/m', '--port', String(await freePort())], { PRACTICE_FAULT: fault });
    assert.deepEqual(await p.exited, { code: 137, signal: null }, fault);
    assert.match(p.out, cause, fault);
    assert.match(p.out, /Scheduler hit an exception: Traceback/, fault);
    assert.doesNotMatch(p.out, READY, fault);
  }
});

test('argparse\'s errors: an unknown flag stops the launch with exit 2', async () => {
  const p = launch(['--model-path', 'org/m', '--no-such-flag', '1']);
  assert.deepEqual(await p.exited, { code: 2, signal: null });
  // python/sglang/srt/server_args.py prepare_server_args: ArgumentParser(prog="sglang serve").
  assert.match(p.err, /^sglang serve: error: unrecognized arguments: --no-such-flag 1$/m);
});

test('launcher\'s parser dump: the persona\'s own option table as SGLang\'s parser describes it, and the launch parses by the same table', async () => {
  const { DUMP_FIRST_LINE } = require('../lib/sglang/entry.js');
  const p = python3(['-c', `${DUMP_FIRST_LINE}\nimport sys, json, argparse`], { PRACTICE_SGLANG_VERSION: '0.5.9' });
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  const lines = p.out.split('\n');
  const dump = JSON.parse(lines[lines.indexOf('@@LAUNCHER-PARSER-DUMP@@') + 1]);
  assert.equal(dump.format, 1);
  assert.equal(dump.engine_version, '0.5.9');
  assert.equal(dump.allow_abbrev, true);
  const byFlag = (f) => dump.actions.find((a) => a.option_strings.includes(f));
  assert.deepEqual(byFlag('--model').option_strings, ['--model-path', '--model']);
  assert.equal(byFlag('--trust-remote-code').nargs, 0);
  assert.deepEqual(byFlag('--mem-fraction-static').type, ['float']);
  assert.equal(byFlag('--mem-fraction-static').default, null, 'SGLang computes its default share at start');
  assert.deepEqual(byFlag('--dtype').choices, ['auto', 'half', 'float16', 'bfloat16', 'float', 'float32']);
  // What the dump says it takes, the launch takes; a value outside a choice stops it as argparse does.
  const bad = launch(['--model-path', 'org/m', '--dtype', 'fp9']);
  assert.deepEqual(await bad.exited, { code: 2, signal: null });
  assert.match(bad.err, /error: argument --dtype: invalid choice: 'fp9' \(choose from 'auto', 'half'/);
});

test('two nodes: both ranks meet at --dist-init-addr; rank 0 serves the API, rank 1 its dummy health server at its --host/--port; a rank that dies takes its peer down (NCCL\'s or Gloo\'s words)', async () => {
  const pair = async (env) => {
    const [port, wport, dist] = [await freePort(), await freePort(), await freePort()];
    const common = ['--model-path', 'org/m', '--tp-size', '2', '--dist-init-addr', `127.0.0.1:${dist}`, '--nnodes', '2'];
    const head = launch([...common, '--node-rank', '0', '--host', '127.0.0.1', '--port', String(port)]);
    const worker = launch([...common, '--node-rank', '1', '--host', '127.0.0.1', '--port', String(wport)], env);
    return { port, wport, head, worker };
  };
  // Two pairs: the worker's health server is asked of one that serves on, so that no request can
  // meet a worker the crash already took down, however slow the machine is to get there; and
  // asked once it listens, which comes after its start line.
  const serving = await pair({});
  await serving.head.waitFor(READY, 15000);
  await serving.worker.waitFor(/Starting dummy health check server at 127\.0\.0\.1:\d+/, 5000);
  assert.doesNotMatch(serving.worker.out, /Uvicorn|ready to roll/, 'no API on rank 1');
  assert.equal((await req(serving.port, 'GET', '/health')).status, 200);
  assert.equal((await onceListening(serving.wport, '/health')).status, 200, 'the worker\'s dummy health server');
  assert.equal((await req(serving.wport, 'POST', '/v1/chat/completions', { body: CHAT })).status, 404, 'and nothing else');
  for (const p of [serving.head, serving.worker]) p.proc.kill('SIGKILL');
  const crashing = await pair({ PRACTICE_FAULT: 'crash_after_ready', PRACTICE_FAULT_RANK: '1', PRACTICE_CRASH_AFTER_MS: '300' });
  await crashing.worker.waitFor(/device-side assert triggered/, 15000);
  assert.deepEqual(await crashing.worker.exited, { code: 137, signal: null });
  await crashing.head.waitFor(/Connection closed by peer|remote process exited or there was a network error/, 10000);
  assert.match(crashing.head.out, /TP0\] Scheduler hit an exception/);
  assert.deepEqual(await crashing.head.exited, { code: 137, signal: null });
});

test('a worker whose health server\'s port is taken fails as uvicorn does: [Errno 98], exit 1', async () => {
  const [port, dist] = [await freePort(), await freePort()];
  const taken = http.createServer(() => {});
  await new Promise((r) => taken.listen(0, '127.0.0.1', r));
  const wport = taken.address().port;
  try {
    const common = ['--model-path', 'org/m', '--tp-size', '2', '--dist-init-addr', `127.0.0.1:${dist}`, '--nnodes', '2'];
    const head = launch([...common, '--node-rank', '0', '--host', '127.0.0.1', '--port', String(port)]);
    const worker = launch([...common, '--node-rank', '1', '--host', '127.0.0.1', '--port', String(wport)]);
    assert.deepEqual(await worker.exited, { code: 1, signal: null });
    assert.match(worker.out, new RegExp(`ERROR: {4}\\[Errno 98\\] error while attempting to bind on address \\('127\\.0\\.0\\.1', ${wport}\\): address already in use`));
    head.proc.kill('SIGKILL');
  } finally {
    taken.close();
  }
});

test('launcher\'s launch program passes SGLANG_API_KEY as --api-key: /v1 needs the key, /health does not; its version program prints a version', async () => {
  const port = await freePort();
  const p = python3(['-c', `${LAUNCH_FIRST_LINE}\nimport os, runpy, sys`, '--model-path', 'org/m', '--host', '127.0.0.1', '--port', String(port)], { SGLANG_API_KEY: 'k1' });
  await p.waitFor(READY, 15000);
  // SGLang logs the key in its settings' line as given (engine.py resolved_dict(), sglang#37457).
  assert.match(p.out, /^\[[\d :-]+\] server_args=\{.*'api_key': 'k1'\}$/m);
  assert.equal((await req(port, 'GET', '/health')).status, 200);
  assert.equal((await req(port, 'POST', '/v1/chat/completions', { body: CHAT })).status, 401);
  assert.equal((await req(port, 'POST', '/v1/chat/completions', { body: CHAT, key: 'k1' })).status, 200);
  const v = python3(['-c', 'import sglang; print(sglang.__version__)']);
  assert.deepEqual(await v.exited, { code: 0, signal: null });
  assert.equal(v.out, '0.5.5\n');
});

test('two nodes: the ranks meet at every collective, so a worker that fails while loading stops the head before ready: SGLang\'s load barrier says its peer did not finish', async () => {
  const [port, dist] = [await freePort(), await freePort()];
  const common = ['--model-path', 'org/m', '--tp-size', '2', '--dist-init-addr', `127.0.0.1:${dist}`, '--nnodes', '2'];
  const head = launch([...common, '--node-rank', '0', '--host', '127.0.0.1', '--port', String(port)]);
  const worker = launch([...common, '--node-rank', '1'], { PRACTICE_FAULT: 'cuda_oom', PRACTICE_FAULT_RANK: '1', PRACTICE_LOAD_DELAY_MS: '300' });
  await worker.waitFor(/torch\.OutOfMemoryError/, 10000);
  await head.waitFor(/ValueError: TP rank 0 could finish the model loading, but there are other ranks that didn't finish loading\./, 10000);
  assert.doesNotMatch(head.out, /KV Cache is allocated|ready to roll/, 'the head waited for its peer after its load');
  assert.deepEqual(await head.exited, { code: 137, signal: null });
});
