'use strict';
// The practice engine's parser (a stand-in for vLLM's, not vLLM): its description (lib/parser.js),
// the dump launcher reads from bin/python3, and `vllm serve` reading argv by it as CPython 3.12's
// argparse and vLLM's FlexibleArgumentParser do (lib/args.js, lib/argparse.js).
//   node --test docker-images/practice-engine/test/

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { describeParser, ParserError } = require('../lib/parser.js');
const { parseArgs } = require('../lib/args.js');

const ROOT = path.join(__dirname, '..');
const PY = path.join(ROOT, 'bin', 'python3');
const SERVE = path.join(ROOT, 'serve');
const DUMP = '# launcher: dump the argument parser of vllm serve (format 1)\nimport sys, json\n';
const VERSION = require('../package.json').version;
const FORK = JSON.stringify([
  { option_strings: ['--moe-backend'], dest: 'moe_backend', action: '_StoreAction', nargs: null, const: null, default: null, type: ['str'], choices: ['b12x', 'triton'] },
  { option_strings: ['--fork-turbo', '--no-fork-turbo'], dest: 'fork_turbo', action: 'BooleanOptionalAction', nargs: 0, const: null, default: null, type: null, choices: null },
]);

const run = (file, args, env = {}) =>
  spawnSync(process.execPath, [file, ...args], { cwd: ROOT, env: { PATH: process.env.PATH, PRACTICE_PHASE_DELAY_MS: '5', PRACTICE_LOAD_DELAY_MS: '5', ...env }, encoding: 'utf8', timeout: 10_000 });
const dump = (env) => run(PY, ['-c', DUMP], env);
const described = (env) => JSON.parse(dump(env).stdout.split('\n')[2]);
const optionsOf = (desc) => desc.actions.flatMap((a) => a.option_strings);
/** argv parsed by the description the environment gives; the ArgError's message when refused. */
function parsed(argv, env = {}) {
  try {
    return parseArgs(argv, describeParser(env));
  } catch (e) {
    return { error: e.message, prog: e.prog ?? 'vllm serve' };
  }
}

test('the dump: a log line, the sentinel, then the description as one line of JSON (format 1), exit 0', () => {
  const r = dump();
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.match(lines[0], /^INFO \d\d-\d\d \d\d:\d\d:\d\d \[__init__\.py:\d+\] Automatically detected platform cpu\.$/);
  assert.equal(lines[1], '@@LAUNCHER-PARSER-DUMP@@');
  assert.deepEqual(lines.slice(3), ['']);
  const desc = JSON.parse(lines[2]);
  assert.equal(desc.format, 1);
  assert.equal(desc.engine_version, VERSION, "what `vllm --version` prints, not the table's version");
  assert.equal(desc.allow_abbrev, true);
  assert.equal(typeof desc.python, 'string');
  const table = JSON.parse(fs.readFileSync(path.join(ROOT, '..', '..', 'src', 'engine', 'vllm', 'parser-table.json'), 'utf8'));
  assert.deepEqual(desc.actions, table.actions, 'without a variant: launcher\'s table as it is');
  for (const a of desc.actions) assert.deepEqual(Object.keys(a).sort(), ['action', 'choices', 'const', 'default', 'dest', 'nargs', 'option_strings', 'type']);
  assert.equal(dump({ PRACTICE_VLLM_VERSION: '0.9.2' }).stdout.includes('"engine_version":"0.9.2"'), true);
});

test('the dump: PRACTICE_PARSER_DROP removes every action having one of the strings, PRACTICE_PARSER_ADD adds a fork\'s', () => {
  const base = described();
  const dropped = described({ PRACTICE_PARSER_DROP: '--enable-prefix-caching, -tp' });
  assert.equal(dropped.actions.length, base.actions.length - 2);
  for (const o of ['--enable-prefix-caching', '--no-enable-prefix-caching', '-tp', '--tensor-parallel-size']) assert.ok(!optionsOf(dropped).includes(o), o);
  const forked = described({ PRACTICE_PARSER_ADD: FORK });
  assert.equal(forked.actions.length, base.actions.length + 1, 'the table\'s --moe-backend replaced, --fork-turbo added');
  assert.deepEqual(forked.actions.slice(-2), JSON.parse(FORK));
  assert.equal(optionsOf(forked).filter((o) => o === '--moe-backend').length, 1);
});

test('the dump: a malformed variant or a missing table fails with one clear line', () => {
  for (const [env, re] of [
    [{ PRACTICE_PARSER_ADD: '[{"option_strings":' }, /^practice-engine: error: PRACTICE_PARSER_ADD is not JSON \(.*\); it is a JSON list of format-1 actions\n$/],
    [{ PRACTICE_PARSER_ADD: '{}' }, /^practice-engine: error: PRACTICE_PARSER_ADD must be a JSON list of at most 200 actions\n$/],
    [{ PRACTICE_PARSER_ADD: '[{"option_strings":["moe"],"dest":"x","action":"_StoreAction","nargs":null}]' }, /PRACTICE_PARSER_ADD: action 1: option string "moe" is not an option/],
    [{ PRACTICE_PARSER_ADD: `[${' '.repeat(70_000)}]` }, /PRACTICE_PARSER_ADD is longer than 65536 characters/],
    [{ PRACTICE_PARSER_DROP: '--ok,no-dash' }, /PRACTICE_PARSER_DROP: "no-dash" is not an option string/],
  ]) {
    const r = dump(env);
    assert.equal(r.status, 1, JSON.stringify(env).slice(0, 80));
    assert.equal(r.stdout, '');
    assert.match(r.stderr, re);
  }
  const serve = run(SERVE, ['m'], { PRACTICE_PARSER_DROP: 'x' });
  assert.equal(serve.status, 2, 'vllm serve stops as on any bad PRACTICE_* knob');
  assert.equal(serve.stderr, 'practice-engine: error: PRACTICE_PARSER_DROP: "x" is not an option string (-x or --name)\n');
  assert.throws(() => describeParser({}, [path.join(os.tmpdir(), 'no-such-parser.json')]), (e) => e instanceof ParserError && /no parser description: none of .*no-such-parser\.json exists \(prepare\.sh copies it into the image\)/.test(e.message));
});

test('python3 still refuses any other program', () => {
  const r = run(PY, ['-c', 'import os\nprint(1)']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /practice-engine has no Python/);
});

test('vllm serve: a flag the description lacks is refused by the top parser, as vLLM (exit 2, before the boot)', () => {
  const r = run(SERVE, ['m', '--foo', 'x', '--port', '8000']);
  assert.equal(r.status, 2);
  assert.equal(r.stderr, 'usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\nvllm: error: unrecognized arguments: --foo x\n');
  assert.doesNotMatch(r.stdout, /non-default args/);
  const gone = run(SERVE, ['m', '--enable-prefix-caching'], { PRACTICE_PARSER_DROP: '--enable-prefix-caching' });
  assert.equal(gone.status, 2);
  assert.match(gone.stderr, /^vllm: error: unrecognized arguments: --enable-prefix-caching$/m);
});

test('vllm serve: a unique prefix of a long option stands for it; several are ambiguous (CPython 3.12 wording)', () => {
  assert.deepEqual(parsed(['m', '--max-num-seq', '4', '--gpu-memory-util=0.5']).nonDefault, { model: 'm', max_num_seqs: 4, gpu_memory_utilization: 0.5 });
  assert.deepEqual(parsed(['m', '--data-parallel-s', '2']), {
    error: 'ambiguous option: --data-parallel-s could match --data-parallel-size, --data-parallel-size-local, --data-parallel-start-rank',
    prog: 'vllm serve',
  });
  assert.equal(parsed(['m', '--data-parallel-size', '2']).nonDefault.data_parallel_size, 2, 'an exact string wins over longer ones');
  const r = run(SERVE, ['m', '--enable-prefix', '--port=0']);
  assert.equal(r.status, 2, 'the prefix was taken, and then the port refused');
  assert.equal(r.stderr, 'usage: vllm serve [model_tag] [options]\nvllm serve: error: argument --port: invalid value 0: must be >= 1\n');
});

test('vllm serve: an on/off flag takes no value', () => {
  assert.deepEqual(parsed(['m', '--enable-prefix-caching=yes']), {
    error: "argument --enable-prefix-caching/--no-enable-prefix-caching: ignored explicit argument 'yes'",
    prog: 'vllm serve',
  });
  assert.deepEqual(parsed(['m', '--enable-prefix-caching', 'true']), { error: 'unrecognized arguments: true', prog: 'vllm' });
  assert.deepEqual(parsed(['m', '--no-enable-prefix-caching', '--enforce-eager']).nonDefault, { model: 'm', enable_prefix_caching: false, enforce_eager: true });
});

test("vllm serve: a fork's added flag passes with one of its choices and is refused with another", () => {
  const env = { PRACTICE_PARSER_ADD: FORK };
  assert.deepEqual(parsed(['m', '--moe-backend', 'b12x', '--fork-turbo'], env).nonDefault, { model: 'm', moe_backend: 'b12x', fork_turbo: true });
  assert.deepEqual(parsed(['m', '--moe-backend', 'cutlass'], env), { error: "argument --moe-backend: invalid choice: 'cutlass' (choose from 'b12x', 'triton')", prog: 'vllm serve' });
  assert.deepEqual(parsed(['m', '--fork-turbo']), { error: 'unrecognized arguments: --fork-turbo', prog: 'vllm' }, 'not without the fork');
  const r = run(SERVE, ['m', '--moe-backend=cutlass'], env);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^vllm serve: error: argument --moe-backend: invalid choice: 'cutlass' \(choose from 'b12x', 'triton'\)$/m);
});

test("vllm serve: FlexibleArgumentParser's rewriting: _ for -, -O, --model, dotted JSON keys", () => {
  assert.deepEqual(parsed(['m', '--max_num_seqs=8', '-O3']).nonDefault, { model: 'm', max_num_seqs: 8, optimization_level: 3 });
  assert.equal(parsed(['m', '-O', '2']).nonDefault.optimization_level, 2);
  assert.deepEqual(parsed(['m', '-O=5']), { error: 'argument --optimization-level: invalid choice: 5 (choose from 0, 1, 2, 3)', prog: 'vllm serve' });
  assert.deepEqual(parsed(['m', '-tp', 'x']), { error: "argument --tensor-parallel-size/-tp: invalid int value: 'x'", prog: 'vllm serve' });
  const moved = parsed(['--port', '9000', '--model', 'org/model', '--served_model_name', 'a', 'b']);
  assert.equal(moved.model, 'org/model');
  assert.deepEqual(moved.servedModelNames, ['a', 'b']);
  const dotted = parsed(['m', '--compilation-config.mode', '3', '--compilation_config.pass_config.fuse=true', '-sc.num_speculative_tokens=2']);
  assert.deepEqual(dotted.nonDefault.compilation_config, { mode: 3, pass_config: { fuse: true } });
  assert.deepEqual(JSON.parse(dotted.flags['speculative-config']), { num_speculative_tokens: 2 });
});

test('vllm serve: nargs "+" takes every word up to the next option; "--help" prints the usage, exit 0', () => {
  assert.deepEqual(parsed(['m', '--api-key', 'k1', 'k2', '--port', '8001']).apiKeys, ['k1', 'k2']);
  assert.deepEqual(parsed(['m', '--api-key']), { error: 'argument --api-key: expected at least one argument', prog: 'vllm serve' });
  const h = run(SERVE, ['m', '--help']);
  assert.equal(h.status, 0);
  assert.match(h.stdout, /^usage: vllm serve \[model_tag\] \[options\]$/m);
});

test('prepare.sh fails with one clear line, before staging anything, when launcher has no parser table', () => {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'practice-prepare-'));
  try {
    const dir = path.join(top, 'docker-images', 'practice-engine');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'prepare.sh'), path.join(dir, 'prepare.sh'));
    const r = spawnSync('bash', [path.join(dir, 'prepare.sh')], { encoding: 'utf8', timeout: 10_000 });
    assert.equal(r.status, 1);
    assert.equal(r.stderr, `prepare.sh: no parser table: neither ${top}/src/engine/vllm/parser-table.json nor ${top}/dist/engine/vllm/parser-table.json exists (launcher's table of vLLM's parser, which the image serves by)\n`);
    assert.ok(!fs.existsSync(path.join(dir, 'rootfs')));
  } finally {
    fs.rmSync(top, { recursive: true, force: true });
  }
});
