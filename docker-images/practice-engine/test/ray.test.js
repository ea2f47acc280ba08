'use strict';
// The practice engine's Ray stand-in (NOT Ray), hand-run: node --test docker-images/practice-engine/test/
// A head, a worker joining it, launcher's join check (bin/python3) and `vllm serve` with the Ray
// backend, all on 127.0.0.x with a private RAY_TMPDIR; every process is stopped at the end.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const RAY = path.join(ROOT, 'bin', 'ray');
const PY = path.join(ROOT, 'bin', 'python3');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'practice-ray-'));
const base = { PATH: process.env.PATH, RAY_TMPDIR: tmp, HOME: tmp, PRACTICE_PHASE_DELAY_MS: '5', PRACTICE_LOAD_DELAY_MS: '20' };
const procs = [];
const port = 20000 + (process.pid % 20000);

function start(file, args, env = {}) {
  const p = spawn(process.execPath, [file, ...args], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const r = { p, out: '' };
  p.stdout.on('data', (d) => (r.out += d));
  p.stderr.on('data', (d) => (r.out += d));
  r.exit = new Promise((resolve) => p.on('exit', (code) => resolve(code)));
  procs.push(p);
  return r;
}
const within = async (what, ms, fn) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not within ${ms} ms`);
};
const CHECK = 'import sys, time, ray\nalive = ray.nodes()';

test.after(() => {
  for (const p of procs) p.kill('SIGKILL');
  try {
    process.kill(Number(fs.readFileSync(path.join(tmp, 'ray', 'gcs_server.pid'), 'utf8')), 'SIGKILL');
  } catch {
    /* not started */
  }
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('Ray stand-in: head, a worker joins, the join check and vllm serve --distributed-executor-backend ray boot; the env carry-over honours vLLM\'s exclusion file', async () => {
  const head = spawnSync(process.execPath, [RAY, 'start', '--head', '--node-ip-address=127.0.0.1', `--port=${port}`], { env: base, encoding: 'utf8', timeout: 15000 });
  assert.equal(head.status, 0, head.stderr);
  assert.match(head.stdout, /Ray runtime started\./);
  const missing = spawnSync(process.execPath, [PY, '-c', CHECK, '1', 'a=127.0.0.1,b=127.0.0.2'], { env: base, encoding: 'utf8', timeout: 15000 });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /launcher: Ray nodes not joined after 1 s: b \(127\.0\.0\.2\)/);
  const worker = start(RAY, ['start', '--block', `--address=127.0.0.1:${port}`, '--node-ip-address=127.0.0.2']);
  const joined = spawnSync(process.execPath, [PY, '-c', CHECK, '10', 'a=127.0.0.1,b=127.0.0.2'], { env: base, encoding: 'utf8', timeout: 15000 });
  assert.equal(joined.status, 0, joined.stderr);
  fs.mkdirSync(path.join(tmp, '.config', 'vllm'), { recursive: true });
  fs.writeFileSync(path.join(tmp, '.config', 'vllm', 'ray_non_carry_over_env_vars.json'), '["NCCL_SOCKET_IFNAME"]\n');
  const serve = start(path.join(ROOT, 'serve'), ['m', '--distributed-executor-backend', 'ray', '--tensor-parallel-size', '2', '--host', '127.0.0.1', '--port', String(port + 1)], { NCCL_SOCKET_IFNAME: 'lo', NCCL_DEBUG: 'WARN' });
  await within('serve ready', 10000, () => /Application startup complete/.test(serve.out));
  assert.match(serve.out, /RAY_NON_CARRY_OVER_ENV_VARS from config: \{'NCCL_SOCKET_IFNAME'\}/);
  assert.match(serve.out, /Copying the following environment variables to workers: \['NCCL_DEBUG'\]/);
  assert.doesNotMatch(worker.out, /Overwriting environment variable NCCL_SOCKET_IFNAME/);
  assert.equal(spawnSync(process.execPath, [PY, '-c', 'print(1)'], { env: base }).status, 2, 'any other Python program is refused');
  // A Ray node that dies takes its worker with it: the head's engine core fails with Ray's
  // ActorDiedError, whose `ip:` names that node (ray python/ray/exceptions.py).
  worker.p.kill('SIGKILL');
  await within('serve ends after its worker node died', 10000, () => serve.p.exitCode !== null);
  assert.equal(serve.p.exitCode, 1);
  assert.match(serve.out, /^\(EngineCore_DP0 pid=\d+\) ERROR [\d: -]+ \[core\.py:795\] ray\.exceptions\.ActorDiedError: The actor died unexpectedly before finishing this task\.\r?$/m);
  assert.match(serve.out, /^\(EngineCore_DP0 pid=\d+\) ERROR [\d: -]+ \[core\.py:795\] \tip: 127\.0\.0\.2\r?$/m);
  assert.match(serve.out, /\] The actor is dead because its node has died\. Node Id: [0-9a-f]+\r?$/m);
});
