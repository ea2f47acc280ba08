'use strict';
// Hand-run tests for the practice engine (a stand-in for vLLM, not vLLM):
//   node --test docker-images/practice-engine/test/
// Everything runs on 127.0.0.1 with short delays and bounded timeouts.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { freePort } = require('./free-port.js');
const http = require('node:http');
const path = require('node:path');

const SERVE = path.join(__dirname, '..', 'serve');
const procs = new Set();


function run(args, env = {}) {
  const proc = spawn(process.execPath, [SERVE, ...args], {
    cwd: path.dirname(SERVE),
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
  r.exit = (ms = 5000) => Promise.race([
    r.exited,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`no exit within ${ms} ms\nstdout:\n${r.out}\nstderr:\n${r.err}`)), ms)),
  ]);
  return r;
}

test.after(() => { for (const p of procs) p.kill('SIGKILL'); });

function req(port, method, p, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const q = http.request({ host: '127.0.0.1', port, method, path: p, headers: data ? { 'content-type': 'application/json' } : {} }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: s }));
    });
    q.on('error', reject);
    q.setTimeout(5000, () => q.destroy(new Error('request timeout')));
    if (data) q.write(data);
    q.end();
  });
}

const READY = /Application startup complete/;

function reqWithKey(port, method, p, key) {
  return new Promise((resolve, reject) => {
    const q = http.request({ host: '127.0.0.1', port, method, path: p, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    q.on('error', reject);
    q.end();
  });
}

// vLLM's build_app: `args.api_key or [envs.VLLM_API_KEY]`; /v1 routes then need the Bearer key.
test('--api-key or VLLM_API_KEY: /v1 answers 401 without the key, /health and /metrics do not ask', async () => {
  for (const [args, env, key] of [[['--api-key', 'k1', 'k2'], {}, 'k2'], [[], { VLLM_API_KEY: 'from-env' }, 'from-env'], [['--api-key', 'flag'], { VLLM_API_KEY: 'env' }, 'flag']]) {
    const port = await freePort();
    const e = run(['m', '--port', String(port), '--host', '127.0.0.1', ...args], env);
    await e.waitFor(READY);
    assert.equal(await reqWithKey(port, 'GET', '/v1/models'), 401);
    assert.equal(await reqWithKey(port, 'GET', '/v1/models', 'wrong'), 401);
    assert.equal(await reqWithKey(port, 'GET', '/v1/models', key), 200);
    assert.equal(await reqWithKey(port, 'GET', '/health'), 200);
    assert.equal(await reqWithKey(port, 'GET', '/metrics'), 200);
    e.proc.kill('SIGTERM');
    await e.exit();
  }
});

test('boots, serves the OpenAI API, stops on SIGTERM', async () => {
  const port = await freePort();
  const e = run(['my/model', '--port', String(port), '--host', '127.0.0.1', '--served-model-name', 'm', '--max-model-len', '524288',
    '--tensor-parallel-size', '4', '--speculative-config', '{"method":"mtp","n":1}', '--enforce-eager'], { PRACTICE_LOAD_DELAY_MS: '2000' });
  await e.waitFor(/Using max model len 524288/);
  await assert.rejects(req(port, 'GET', '/health')); // not listening yet (the load below lasts 2 s)
  await e.waitFor(READY, 15000);
  assert.match(e.out, /^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[practice\.py:1\] practice-engine: a stand-in for vLLM \(not vLLM\)/);
  assert.match(e.out, /non-default args: \{'model': 'my\/model', 'port': \d+, 'host': '127.0.0.1', 'served_model_name': \['m'\], 'max_model_len': 524288, 'tensor_parallel_size': 4, 'speculative_config': \{'method': 'mtp', 'n': 1\}, 'enforce_eager': True\}/);
  assert.match(e.out, /Maximum concurrency for 524,288 tokens per request: 2\.38x/);
  assert.match(e.out, /GPU KV cache size: 1,250,000 tokens/);
  assert.match(e.out, /Starting vLLM server on http:\/\/127\.0\.0\.1:\d+\n\(APIServer pid=\d+\) INFO: {5}Application startup complete\./);
  assert.match(e.out, /init engine \(profile, create kv cache, warmup model\) took \d+\.\d\d s\n/);
  assert.doesNotMatch(e.out, /\x1b/); // no colour without a TTY, as current vLLM
  assert.match(e.err, /^\(Worker_TP0 pid=\d+\) \rCapturing CUDA graphs \(mixed prefill-decode, PIECEWISE\):   0%\|.*\r.*\rCapturing CUDA graphs .*100%\|.*\| 15\/15 .*\n/m);

  const h = await req(port, 'GET', '/health');
  assert.equal(h.status, 200);
  assert.equal(h.body, '');
  const models = JSON.parse((await req(port, 'GET', '/v1/models')).body);
  assert.equal(models.data[0].id, 'm');
  assert.equal(models.data[0].owned_by, 'practice-engine');
  assert.equal(models.data[0].root, 'my/model');
  assert.equal(models.data[0].max_model_len, 524288);

  const chatBody = { model: 'm', messages: [{ role: 'user', content: 'hello' }], max_tokens: 7 };
  const c1 = JSON.parse((await req(port, 'POST', '/v1/chat/completions', chatBody)).body);
  const c2 = JSON.parse((await req(port, 'POST', '/v1/chat/completions', { ...chatBody, model: 'my/model' })).body);
  assert.equal(c1.object, 'chat.completion');
  assert.equal(c1.choices[0].message.content, c2.choices[0].message.content); // deterministic
  assert.equal(c1.choices[0].message.content.trim().split(' ').length, 7);
  assert.equal(c1.choices[0].finish_reason, 'length');
  assert.equal(c1.usage.completion_tokens, 7);

  const s = await req(port, 'POST', '/v1/chat/completions', { ...chatBody, stream: true, max_tokens: 3 });
  assert.match(s.headers['content-type'], /text\/event-stream/);
  const events = s.body.split('\n\n').filter(Boolean);
  assert.equal(events.length, 5); // 3 tokens + final + [DONE]
  assert.equal(events[4], 'data: [DONE]');
  const first = JSON.parse(events[0].slice(6));
  assert.equal(first.choices[0].delta.role, 'assistant');
  assert.equal(JSON.parse(events[3].slice(6)).choices[0].finish_reason, 'length');
  const streamed = events.slice(0, 3).map((ev) => JSON.parse(ev.slice(6)).choices[0].delta.content).join('');
  assert.equal(streamed, c1.choices[0].message.content.split(' ').slice(0, 3).join(' ') + ' ');

  const comp = JSON.parse((await req(port, 'POST', '/v1/completions', { model: 'm', prompt: 'hi', max_tokens: 2 })).body);
  assert.equal(comp.object, 'text_completion');
  assert.equal(comp.usage.completion_tokens, 2);

  const nf = await req(port, 'POST', '/v1/chat/completions', { ...chatBody, model: 'nope' });
  assert.equal(nf.status, 404);
  assert.deepEqual(JSON.parse(nf.body), { error: { message: 'The model `nope` does not exist.', type: 'NotFoundError', code: 404 } });
  const bad = await req(port, 'POST', '/v1/chat/completions', '{bad');
  assert.equal(bad.status, 400);
  assert.equal(JSON.parse(bad.body).error.code, 400);
  assert.equal((await req(port, 'GET', '/nope')).status, 404);

  const emb = JSON.parse((await req(port, 'POST', '/v1/embeddings', { model: 'm', input: ['a', 'b'] })).body);
  assert.equal(emb.data.length, 2);
  assert.equal(emb.data[0].embedding.length, 8);
  assert.notDeepEqual(emb.data[0].embedding, emb.data[1].embedding);
  const b64 = JSON.parse((await req(port, 'POST', '/v1/embeddings', { model: 'm', input: ['a', 'b'], encoding_format: 'base64' })).body);
  const floats = new Float32Array(new Uint8Array(Buffer.from(b64.data[0].embedding, 'base64')).buffer);
  assert.deepEqual([...floats].map((x) => Number(x.toFixed(5))), emb.data[0].embedding.map((x) => Number(x.toFixed(5))));

  const m = (await req(port, 'GET', '/metrics')).body;
  assert.match(m, /^vllm:num_requests_running\{model_name="m"\} 0$/m);
  assert.match(m, /^vllm:generation_tokens_total\{model_name="m"\} 19$/m);
  assert.match(m, /^practice_open_streams 0$/m);

  e.proc.kill('SIGTERM');
  const x = await e.exit(1500);
  assert.equal(x.code, 0);
  assert.match(e.out, /Shutting down/);
});

for (const rate of ['20', '0']) {
  test(`client abort stops the stream (PRACTICE_TOKENS_PER_SEC=${rate})`, async () => {
    const port = await freePort();
    const e = run(['m', '--port', String(port), '--host', '127.0.0.1'], { PRACTICE_TOKENS_PER_SEC: rate });
    await e.waitFor(READY);
    await new Promise((resolve, reject) => {
      const q = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } }, (res) => {
        let n = 0;
        res.on('data', () => { if (++n === 2) { q.destroy(); resolve(); } });
      });
      q.on('error', () => {});
      q.end(JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 4096, stream: true }));
      setTimeout(() => reject(new Error('no data')), 3000);
    });
    let st;
    for (let i = 0; i < 50; i++) {
      st = JSON.parse((await req(port, 'GET', '/practice/streams')).body);
      if (st.open === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(st, { open: 0, started: 1, aborted: 1 });
    const gen = () => req(port, 'GET', '/metrics').then((r) => Number(/vllm:generation_tokens_total\S* (\d+)/.exec(r.body)[1]));
    const g1 = await gen();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await gen(), g1);
    assert.ok(g1 < 4096);
    e.proc.kill('SIGTERM');
    assert.equal((await e.exit(1500)).code, 0);
  });
}

const argCases = [
  // argparse names an action by all its option strings (Lib/argparse.py _get_action_name).
  [['m', '--node-rank', 'x'], /vllm serve: error: argument --node-rank\/-r: invalid int value: 'x'/],
  [['m', '--speculative-config', '{bad'], /vllm serve: error: argument --speculative-config\/-sc: Value \{bad cannot be converted to <function loads>/],
  [['m', '--limit-mm-per-prompt=[1,'], /argument --limit-mm-per-prompt: Value \[1, cannot be converted/],
  [['m', '--headless'], /argument --headless: not allowed for --node-rank 0/],
  [['m', '--nnodes', '2', '--node-rank', '1', '--master-addr', '127.0.0.1'], /argument --headless: required/],
  [['m', '--nnodes', '2'], /argument --master-addr: required when --nnodes > 1/],
  [['m', '--nnodes', '2', '--node-rank', '2', '--master-addr', '127.0.0.1', '--headless'], /argument --node-rank: invalid value 2/],
  [['m', '--distributed-executor-backend', 'uni'], /'uni' is not supported/],
  [['m', '--master-port', '70000'], /argument --master-port: invalid value 70000/],
  [['m', '--tensor-parallel-size'], /argument --tensor-parallel-size\/-tp: expected one argument/],
  [['m', 'extra'], /unrecognized arguments: extra/],
  [[], /required: model_tag/],
];
for (const [args, re] of argCases) {
  test(`usage error exit 2: ${args.join(' ')}`, async () => {
    const e = run(args);
    const x = await e.exit();
    assert.equal(x.code, 2);
    assert.match(e.err, re);
  });
}

test('unknown PRACTICE_FAULT exits 2', async () => {
  const e = run(['m'], { PRACTICE_FAULT: 'nope' });
  assert.equal((await e.exit()).code, 2);
  assert.match(e.err, /unknown PRACTICE_FAULT 'nope'/);
});

const envCases = [
  [{ NCCL_SOCKET_IFNAME: 'eth7' }, /RuntimeError: NCCL_SOCKET_IFNAME=eth7: no such interface on this host \(have: .*lo.*\)\n$/],
  [{ NCCL_SOCKET_IFNAME: '^lo,nope0' }, /RuntimeError: NCCL_SOCKET_IFNAME=\^lo,nope0: no such interface on this host: nope0/],
  [{ VLLM_HOST_IP: '203.0.113.9' }, /ValueError: VLLM_HOST_IP=203\.0\.113\.9 is not an address of this host\n$/],
  [{ HF_HOME: '/nonexistent/hf' }, /FileNotFoundError: \[Errno 2\] No such file or directory: '\/nonexistent\/hf' \(HF_HOME\)\n$/],
  [{ TRITON_CACHE_DIR: '/nonexistent/t' }, /\(TRITON_CACHE_DIR\)\n$/],
];
for (const [env, re] of envCases) {
  test(`environment check fails: ${JSON.stringify(env)}`, async () => {
    const e = run(['m'], env);
    assert.equal((await e.exit()).code, 1);
    assert.match(e.err, /^Traceback \(most recent call last\):/);
    assert.match(e.err, re);
  });
}

test('environment checks pass for good values', async () => {
  const port = await freePort();
  const e = run(['m', '--port', String(port), '--host', '127.0.0.1'], { NCCL_SOCKET_IFNAME: 'lo', VLLM_HOST_IP: '127.0.0.1', HF_HOME: '/tmp', HF_HUB_OFFLINE: '1' });
  await e.waitFor(READY);
  e.proc.kill('SIGINT');
  assert.equal((await e.exit(1500)).code, 0);
});

// The worker's exception as one logger.exception record on stdout, the header on every line
// (vllm/logging_utils/formatter.py), then the wrappers; the API server's last, on stderr.
const rec = (proc, file) => `^\\(${proc} pid=\\d+\\) ERROR \\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\[${file}\\] `;
const faultCases = [
  ['oom', new RegExp(`${rec('Worker_TP0', 'multiproc_executor\\.py:870')}torch\\.OutOfMemoryError: CUDA out of memory\\. Tried to allocate 2\\.00 GiB\\.`, 'm'), "{'EngineCore_DP0': 1}"],
  ['cuda_oom', new RegExp(`${rec('Worker_TP0', 'multiproc_executor\\.py:870')}RuntimeError: CUDA error: out of memory\\r$`, 'm'), "{'EngineCore_DP0': 1}"],
  ['kv_too_small', new RegExp(`${rec('EngineCore_DP0', 'core\\.py:1108')}ValueError: To serve at least one request with the model's max seq len \\(8192\\), \\(24\\.00 GiB KV cache is needed, which is larger than the available KV cache memory \\(11\\.02 GiB\\)\\. Based on the available memory, the estimated maximum model length is \\d+\\.`, 'm'), '{}'],
  ['engine_core_init', new RegExp(`${rec('Worker_TP0', 'multiproc_executor\\.py:870')}ImportError: /usr/local/lib/python3\\.12/dist-packages/b12x/_C\\.abi3\\.so: undefined symbol: _ZN3c104cuda9SetDeviceEi$`, 'm'), "{'EngineCore_DP0': 1}"],
];
for (const [fault, cause, failed] of faultCases) {
  test(`fault ${fault}: the cause logged the vLLM way, then the wrappers`, async () => {
    const e = run(['m', '--port', String(await freePort())], { PRACTICE_FAULT: fault });
    assert.equal((await e.exit()).code, 1);
    assert.match(e.out, cause);
    assert.match(e.out, /WorkerProc failed to start\.|EngineCore failed to start\./);
    assert.ok(e.err.endsWith(`(APIServer pid=${e.proc.pid}) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): ${failed}\n`), e.err);
    assert.doesNotMatch(e.out, READY);
  });
}

test('PRACTICE_RECORD_LAG_MS: the worker record comes after the wrappers, as a busy docker may store two pipes', async () => {
  const [, cause] = faultCases.find(([f]) => f === 'engine_core_init');
  const e = run(['m', '--port', String(await freePort())], { PRACTICE_FAULT: 'engine_core_init', PRACTICE_RECORD_LAG_MS: '300' });
  await e.waitFor(/Engine core initialization failed/);
  assert.doesNotMatch(e.out, cause, 'not yet: the wrappers first');
  assert.equal((await e.exit()).code, 1);
  assert.match(e.out, cause);
});

test('PRACTICE_LOG_STYLE=v0.11: the coloured prefix and older spellings of about v0.10 to early 2026', async () => {
  const e = run(['m', '--port', String(await freePort()), '--host', '127.0.0.1'], { PRACTICE_LOG_STYLE: 'v0.11' });
  await e.waitFor(READY);
  assert.match(e.out, /^\x1b\[0;36m\(APIServer pid=\d+\)\x1b\[0;0m INFO /m);
  assert.match(e.out, /init engine \(profile, create kv cache, warmup model\) took \d+\.\d\d seconds\n/);
  assert.match(e.out, /Starting vLLM API server 0 on http:\/\/127\.0\.0\.1:\d+\n/);
  e.proc.kill('SIGTERM');
  assert.equal((await e.exit(1500)).code, 0);
  const bad = run(['m'], { PRACTICE_LOG_STYLE: 'v0.1' });
  assert.equal((await bad.exit()).code, 2);
  assert.match(bad.err, /unknown PRACTICE_LOG_STYLE 'v0\.1'/);
});

test("--uvicorn-log-level warning hides uvicorn's line; the API serves anyway", async () => {
  const port = await freePort();
  const e = run(['m', '--port', String(port), '--host', '127.0.0.1', '--uvicorn-log-level', 'warning']);
  await e.waitFor(/Starting vLLM server on/);
  let health;
  for (let i = 0; i < 50 && health?.status !== 200; i++) {
    health = await req(port, 'GET', '/health').catch(() => undefined);
    if (health?.status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(health?.status, 200);
  assert.doesNotMatch(e.out, READY);
  e.proc.kill('SIGTERM');
  assert.equal((await e.exit(1500)).code, 0);
});

test('PRACTICE_FAILED_PLUGIN: logged with its traceback, and the boot goes on', async () => {
  const e = run(['m', '--port', String(await freePort()), '--host', '127.0.0.1'], { PRACTICE_FAILED_PLUGIN: 'dspark_vision' });
  await e.waitFor(READY);
  assert.match(e.out, new RegExp(`${rec('APIServer', '__init__\\.py:47')}Failed to load plugin dspark_vision\\r$`, 'm'));
  assert.match(e.out, new RegExp(`${rec('APIServer', '__init__\\.py:47')}ModuleNotFoundError: No module named 'dspark_vision'$`, 'm'));
  e.proc.kill('SIGTERM');
  assert.equal((await e.exit(1500)).code, 0);
});

test('fault hang: stops after "Using max model len", still obeys SIGTERM', async () => {
  const e = run(['m', '--port', String(await freePort())], { PRACTICE_FAULT: 'hang' });
  await e.waitFor(/Using max model len/);
  await new Promise((r) => setTimeout(r, 500));
  assert.doesNotMatch(e.out, /Model loading took/);
  e.proc.kill('SIGTERM');
  assert.equal((await e.exit(1500)).code, 0);
});

test('fault crash_after_ready', async () => {
  const e = run(['m', '--port', String(await freePort()), '--host', '127.0.0.1'], { PRACTICE_FAULT: 'crash_after_ready', PRACTICE_CRASH_AFTER_MS: '200' });
  await e.waitFor(READY);
  assert.equal((await e.exit()).code, 1);
  assert.match(e.out, /\[core\.py:795\] RuntimeError: CUDA error: an illegal memory access was encountered\n/);
  // Then the API server's engine core monitor (vllm/v1/engine/core_client.py), last.
  assert.match(e.out, /\(APIServer pid=\d+\) ERROR [\d: -]+ \[core_client\.py:564\] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client\.\n$/);
});

test('fault invalid_config: pydantic\'s ValidationError with the value error under it, uncaught, before any engine core', async () => {
  const e = run(['m', '--port', String(await freePort())], { PRACTICE_FAULT: 'invalid_config' });
  assert.equal((await e.exit()).code, 1);
  const pre = `\\(APIServer pid=${e.proc.pid}\\) `;
  assert.match(e.err, new RegExp(`^${pre}Traceback \\(most recent call last\\):$`, 'm'));
  assert.match(e.err, new RegExp(`^${pre}pydantic_core\\._pydantic_core\\.ValidationError: 1 validation error for ParallelConfig\\n${pre}  Value error, num_redundant_experts should be used with EPLB\\.16\\. \\[type=value_error, input_value=ArgsKwargs\\(.*\\), input_type=ArgsKwargs\\]\\n${pre}    For further information visit https://errors\\.pydantic\\.dev/[\\d.]+/v/value_error\\n$`, 'm'));
  assert.match(e.out, /Resolved architecture: /);
  assert.doesNotMatch(e.out, /Using max model len|EngineCore/);
});

test('VLLM_USE_RUST_FRONTEND=1: the Rust frontend\'s ready line instead of "Starting vLLM server" and uvicorn\'s', async () => {
  const port = await freePort();
  const e = run(['m', '--port', String(port), '--host', '127.0.0.1', '--served-model-name', 'qwen3'], { VLLM_USE_RUST_FRONTEND: '1' });
  await e.waitFor(/starting OpenAI server/);
  assert.match(e.out, new RegExp(`^\\(RustFrontend pid=\\d+\\) INFO \\d\\d-\\d\\d [\\d:]+ \\[server/src/lib\\.rs:87\\] starting OpenAI server bind_address=127\\.0\\.0\\.1:${port} model=qwen3$`, 'm'));
  assert.equal((await req(port, 'GET', '/health')).status, 200);
  assert.doesNotMatch(e.out, /Starting vLLM server|Application startup complete/);
  e.proc.kill('SIGTERM');
  assert.equal((await e.exit(1500)).code, 0);
});

async function twoRanks(env = {}, nnodes = 2) {
  const mport = await freePort();
  const port = await freePort();
  const common = ['m', '--nnodes', String(nnodes), '--master-addr', '127.0.0.1', '--master-port', String(mport)];
  const workers = [];
  for (let r = 1; r < nnodes; r++) workers.push(run([...common, '--node-rank', String(r), '--headless'], env));
  await new Promise((r) => setTimeout(r, 300)); // the head starts after the workers
  const head = run([...common, '--node-rank', '0', '--port', String(port), '--host', '127.0.0.1'], env);
  return { head, workers, port };
}

// The line's index in out, or a failure naming it: for the order of lines.
const at = (out, re) => {
  const i = out.search(re);
  assert.ok(i >= 0, `${re} not in:\n${out}`);
  return i;
};

test("2-rank rendezvous in today's lines; a headless node's start line after its config; killing the worker takes the head down", async () => {
  const { head, workers: [w] } = await twoRanks();
  await head.waitFor(READY);
  await w.waitFor(/Headless mode: worker rank 1 ready/);
  // vllm/v1/executor/multiproc_executor.py _init_executor (the head's engine core), then each worker's
  // vllm/distributed/parallel_state.py init_distributed_environment line before the group blocks,
  // and initialize_model_parallel's once it is up.
  const leader = at(head.out, /^\(EngineCore_DP0 pid=\d+\) INFO [\d: -]+ \[multiproc_executor\.py:134\] DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127\.0\.0\.1, mq_connect_ip=127\.0\.0\.1 \(local\), world_size=2, local_world_size=1$/m);
  const rank0 = at(head.out, /^\(Worker_TP0 pid=\d+\) INFO [\d: -]+ \[parallel_state\.py:1400\] world_size=2 rank=0 local_rank=0 distributed_init_method=tcp:\/\/127\.0\.0\.1:\d+ backend=nccl$/m);
  assert.ok(leader < rank0 && rank0 < at(head.out, /rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank 0$/m));
  assert.ok(at(w.out, /^\(Worker_TP1 pid=\d+\) INFO [\d: -]+ \[parallel_state\.py:1400\] world_size=2 rank=1 local_rank=0 distributed_init_method=tcp:\/\/127\.0\.0\.1:\d+ backend=nccl$/m) < at(w.out, /Model loading took/));
  // vllm/entrypoints/cli/serve.py run_headless: the config first, then the start line.
  const launching = at(w.out, /^INFO [\d: -]+ \[serve\.py:230\] Launching vLLM \(v[^)]+\) headless multiproc executor/m);
  assert.ok(at(w.out, /Resolved architecture: /) < launching && at(w.out, /Using max model len /) < launching);
  assert.ok(launching < at(w.out, /world_size=2 rank=1 /));
  assert.doesNotMatch(head.out + w.out, /waiting for \d+ headless worker|headless worker rank 1 joined|connect(?:ing|ed) to master|rendezvous complete/);
  w.proc.kill('SIGTERM');
  assert.equal((await w.exit(1500)).code, 0);
  assert.equal((await head.exit()).code, 1);
  // Today's head watches its own workers only: it hears of the lost node in its worker's collective,
  // as NCCL's remote error, and its engine core dies of the wrapper.
  assert.match(head.out, /\(Worker_TP0 pid=\d+\) ERROR [\d: -]+ \[multiproc_executor\.py:820\] WorkerProc hit an exception\./);
  assert.match(head.out, /\(Worker_TP0 pid=\d+\) ERROR [\d: -]+ \[multiproc_executor\.py:820\] torch\.distributed\.DistBackendError: NCCL error in: \S+, remote process exited or there was a network error, NCCL version [\d.]+$/m);
  assert.match(head.out, /\(EngineCore_DP0 pid=\d+\) ERROR [\d: -]+ \[core\.py:795\] RuntimeError: Worker failed with error 'NCCL error in: /);
  assert.doesNotMatch(head.out, /Worker proc VllmWorker-1 died unexpectedly/);
});

test('2-rank rendezvous in the v0.11 style: its own rendezvous words, the start line first, the head\'s line for a lost worker', async () => {
  const { head, workers: [w] } = await twoRanks({ PRACTICE_LOG_STYLE: 'v0.11' });
  await head.waitFor(READY);
  await w.waitFor(/Headless mode: worker rank 1 ready/);
  assert.match(head.out, /waiting for 1 headless worker\(s\) on 127\.0\.0\.1:\d+/);
  assert.match(head.out, /headless worker rank 1 joined from /);
  assert.match(w.out, /connected to master at 127\.0\.0\.1:\d+, waiting for all workers/);
  assert.ok(at(w.out, /Launching vLLM \(v[^)]+\) headless multiproc executor/) < at(w.out, /Resolved architecture: /));
  assert.doesNotMatch(head.out + w.out, /DP group leader|world_size=2 rank=/);
  w.proc.kill('SIGTERM');
  assert.equal((await head.exit()).code, 1);
  assert.match(head.out, /EngineCore_DP0 pid=\d+\)\x1b\[0;0m ERROR [\d: -]+ \[multiproc_executor\.py:154\] Worker proc VllmWorker-1 died unexpectedly, shutting down executor\./);
  assert.doesNotMatch(head.out, /remote process exited/);
});

test('2-rank rendezvous; killing the head takes the worker down', async () => {
  const { head, workers: [w] } = await twoRanks();
  await head.waitFor(READY);
  await w.waitFor(/Headless mode: worker rank 1 ready/);
  head.proc.kill('SIGKILL');
  assert.equal((await w.exit()).code, 1);
  // torch's c10d warning, as a headless worker of current vLLM prints it when the head dies.
  assert.match(w.err, /^\[rank1\]:\[W\d+ [\d:.]+ TCPStore\.cpp:125\] \[c10d\] recvValue failed on SocketImpl\(fd=\d+, addr=\[::ffff:127\.0\.0\.1\]:\d+, remote=\[::ffff:127\.0\.0\.1\]:\d+\): Failed to recv, got 0 bytes\. Connection was likely closed\. Did the remote server shutdown or crash\?$/m);
  assert.match(w.err, /^Exception raised from recvBytes at .*Utils\.hpp:\d+ \(most recent call first\):$/m);
});

test('fault engine_core_init on a headless worker: its start line, its worker record, then the uncaught wrapper', async () => {
  const { head, workers: [w] } = await twoRanks({ PRACTICE_FAULT: 'engine_core_init', PRACTICE_FAULT_RANK: '1' });
  assert.equal((await w.exit()).code, 1);
  assert.match(w.out, /^INFO \d\d-\d\d [\d:]+ \[serve\.py:230\] Launching vLLM \(v[^)]+\) headless multiproc executor, with head node address 127\.0\.0\.1:\d+ for torch\.distributed process group\.$/m);
  assert.match(w.out, new RegExp(`${rec('Worker_TP1', 'multiproc_executor\\.py:870')}ImportError: .*undefined symbol: _ZN3c104cuda9SetDeviceEi$`, 'm'));
  assert.ok(w.err.endsWith('Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.\n'), w.err);
  assert.equal((await head.exit()).code, 1);
  assert.match(head.out, /remote process exited or there was a network error/);
});

test('fault invalid_config on a headless node: refused in run_headless, before its start line', async () => {
  const mport = await freePort();
  const w = run(['m', '--nnodes', '2', '--node-rank', '1', '--headless', '--master-addr', '127.0.0.1', '--master-port', String(mport)], { PRACTICE_FAULT: 'invalid_config', PRACTICE_FAULT_RANK: '1' });
  assert.equal((await w.exit()).code, 1);
  assert.match(w.err, /run_headless\n.*\n.*ValidationError: 1 validation error for ParallelConfig\n.*  Value error, /s);
  assert.doesNotMatch(w.out, /Launching vLLM|world_size=/);
});

test('fault worker_exit (3 ranks): last worker exits, everybody fails', async () => {
  const { head, workers } = await twoRanks({ PRACTICE_FAULT: 'worker_exit' }, 3);
  const [w1, w2] = workers;
  assert.equal((await w2.exit()).code, 1);
  assert.match(w2.out, /Worker exiting: simulated fault \(practice-engine\)/);
  // Today's form: the node's own executor names its killed worker's exit code (multiproc_executor.py start_worker_monitor).
  assert.match(w2.out, /\(Worker_TP2 pid=\d+\) ERROR [\d: -]+ \[multiproc_executor\.py:275\] Worker proc VllmWorker-2 died unexpectedly \(exit code: -9\), shutting down executor\.$/m);
  assert.equal((await head.exit()).code, 1);
  assert.match(head.out, /torch\.distributed\.DistBackendError: NCCL error in: \S+, remote process exited or there was a network error/);
  assert.doesNotMatch(head.out, READY);
  assert.equal((await w1.exit()).code, 1);
});

test('fault worker_exit on the head: its own killed worker, today and in the v0.11 style', async () => {
  for (const [style, line] of [
    ['current', /\(EngineCore_DP0 pid=\d+\) ERROR [\d: -]+ \[multiproc_executor\.py:275\] Worker proc VllmWorker-0 died unexpectedly \(exit code: -9\), shutting down executor\./],
    ['v0.11', /EngineCore_DP0 pid=\d+\)\x1b\[0;0m ERROR [\d: -]+ \[multiproc_executor\.py:154\] Worker proc VllmWorker-0 died unexpectedly, shutting down executor\./],
  ]) {
    const e = run(['m', '--port', String(await freePort()), '--host', '127.0.0.1'], { PRACTICE_FAULT: 'worker_exit', PRACTICE_FAULT_RANK: '0', PRACTICE_LOG_STYLE: style });
    assert.equal((await e.exit()).code, 1);
    assert.match(e.out, line);
  }
});

test('rendezvous timeout counts the workers that joined', async () => {
  const mport = await freePort();
  const common = ['m', '--nnodes', '3', '--master-addr', '127.0.0.1', '--master-port', String(mport)];
  // The worker waits long and has started (it retries every 200 ms once it dials) before the head starts its 1 s:
  // with one short timeout for both, a worker started late on a busy machine gave up first.
  const w = run([...common, '--node-rank', '1', '--headless'], { PRACTICE_RENDEZVOUS_TIMEOUT_S: '30' });
  await w.waitFor(/a stand-in for vLLM/);
  const head = run([...common, '--node-rank', '0'], { PRACTICE_RENDEZVOUS_TIMEOUT_S: '1' });
  assert.equal((await head.exit()).code, 1);
  assert.match(head.err, /RuntimeError: rendezvous timed out after 1 s: 1 of 2 workers joined\n$/);
  assert.equal((await w.exit()).code, 1);
});

test('worker alone times out connecting', async () => {
  const mport = await freePort();
  const w = run(['m', '--nnodes', '2', '--node-rank', '1', '--headless', '--master-addr', '127.0.0.1', '--master-port', String(mport)], { PRACTICE_RENDEZVOUS_TIMEOUT_S: '0.6' });
  assert.equal((await w.exit()).code, 1);
  assert.match(w.err, /rendezvous timed out after 0\.6 s: could not join master/);
});

test('duplicate rank is an error', async () => {
  const mport = await freePort();
  const common = ['m', '--nnodes', '3', '--master-addr', '127.0.0.1', '--master-port', String(mport)];
  const w1 = run([...common, '--node-rank', '1', '--headless']);
  const w2 = run([...common, '--node-rank', '1', '--headless']);
  const head = run([...common, '--node-rank', '0']);
  assert.equal((await head.exit()).code, 1);
  assert.match(head.err, /RuntimeError: rendezvous failed: duplicate rank 1/);
  assert.equal((await w1.exit()).code, 1);
  assert.equal((await w2.exit()).code, 1);
});

// VmRSS of a process, in MiB (proc(5): /proc/PID/status).
const rssMib = (pid) => {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(require('node:fs').readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
};

test('PRACTICE_LOAD_ALLOC_MIB: the loader takes memory step by step while loading and holds it; more than 2 GiB is refused', async () => {
  const port = await freePort();
  // 300 ms between the phases: the baseline is read before the first step, even when this process is scheduled late.
  const r = run(['m', '--port', String(port)], { PRACTICE_LOAD_ALLOC_MIB: '256', PRACTICE_LOAD_ALLOC_STEP_MIB: '32', PRACTICE_LOAD_DELAY_MS: '1600', PRACTICE_PHASE_DELAY_MS: '300' });
  await r.waitFor(/Using max model len/);
  const base = rssMib(r.proc.pid);
  const seen = new Set();
  // Bounded: at most 60 looks, 50 ms apart, or until the model is loaded.
  for (let i = 0; i < 60 && !/Model loading took/.test(r.out); i++) {
    seen.add(Math.round((rssMib(r.proc.pid) - base) / 32));
    await new Promise((res) => setTimeout(res, 50));
  }
  await r.waitFor(READY, 15000);
  const grown = rssMib(r.proc.pid) - base;
  assert.ok(grown >= 240 && grown < 400, `holds about 256 MiB after loading (grew ${grown.toFixed(0)} MiB)`);
  assert.ok([...seen].filter((s) => s > 0 && s < 8).length >= 3, `several steps in between, not one jump (${[...seen].sort((a, b) => a - b).join(',')} x 32 MiB)`);
  r.proc.kill('SIGTERM');
  await r.exit();
  const big = run(['m'], { PRACTICE_LOAD_ALLOC_MIB: '2049' });
  assert.equal((await big.exit()).code, 2);
  assert.match(big.err, /PRACTICE_LOAD_ALLOC_MIB must be at most 2048/);
});

test('VLLM_LOGGING_PREFIX goes before the level of every logger line (vllm/logger.py _FORMAT)', async () => {
  const e = run(['m', '--port', String(await freePort()), '--host', '127.0.0.1'], { VLLM_LOGGING_PREFIX: '[spark-a] ', PRACTICE_FAULT: 'worker_exit', PRACTICE_FAULT_RANK: '0' });
  assert.equal((await e.exit()).code, 1);
  assert.match(e.out, /^\(EngineCore_DP0 pid=\d+\) \[spark-a\] ERROR [\d: -]+ \[multiproc_executor\.py:275\] Worker proc VllmWorker-0 died unexpectedly/m);
  assert.doesNotMatch(e.out, /^\([\w ]+pid=\d+\) (?:INFO|WARNING|ERROR) /m);
});
