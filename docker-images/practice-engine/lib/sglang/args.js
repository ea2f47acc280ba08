'use strict';
// practice-engine's SGLang persona (a stand-in for SGLang, not SGLang): the part of
// `python3 -m sglang.launch_server`'s command line the persona reads, parsed as argparse does
// (python/sglang/srt/server_args.py ServerArgs.add_cli_args, sgl-project/sglang 001067ff: long
// options, `--flag=value`, unique prefixes (allow_abbrev), aliases), with argparse's errors.

class SglangArgError extends Error {}

// [dest, spellings, kind]: kind 'int' | 'float' | 'str' | 'bool'.
const OPTIONS = [
  ['model_path', ['--model-path', '--model'], 'str'],
  ['tokenizer_path', ['--tokenizer-path'], 'str'],
  ['revision', ['--revision'], 'str'],
  ['served_model_name', ['--served-model-name'], 'str'],
  ['host', ['--host'], 'str'],
  ['port', ['--port'], 'int'],
  ['api_key', ['--api-key'], 'str'],
  ['tp_size', ['--tp-size', '--tensor-parallel-size'], 'int'],
  ['pp_size', ['--pp-size', '--pipeline-parallel-size'], 'int'],
  ['dp_size', ['--dp-size', '--data-parallel-size'], 'int'],
  ['ep_size', ['--ep-size', '--expert-parallel-size', '--ep'], 'int'],
  ['dist_init_addr', ['--dist-init-addr', '--nccl-init-addr'], 'str'],
  ['nnodes', ['--nnodes'], 'int'],
  ['node_rank', ['--node-rank'], 'int'],
  ['mem_fraction_static', ['--mem-fraction-static'], 'float'],
  ['context_length', ['--context-length'], 'int'],
  ['max_running_requests', ['--max-running-requests'], 'int'],
  ['chunked_prefill_size', ['--chunked-prefill-size'], 'int'],
  ['cuda_graph_max_bs', ['--cuda-graph-max-bs'], 'int'],
  ['attention_backend', ['--attention-backend'], 'str'],
  ['dtype', ['--dtype'], 'str'],
  ['kv_cache_dtype', ['--kv-cache-dtype'], 'str'],
  ['quantization', ['--quantization'], 'str'],
  ['log_level', ['--log-level'], 'str'],
  ['enable_metrics', ['--enable-metrics'], 'bool'],
  ['trust_remote_code', ['--trust-remote-code'], 'bool'],
  ['disable_cuda_graph', ['--disable-cuda-graph'], 'bool'],
  ['skip_server_warmup', ['--skip-server-warmup'], 'bool'],
  ['enable_dp_attention', ['--enable-dp-attention'], 'bool'],
  ['enable_torch_compile', ['--enable-torch-compile'], 'bool'],
  ['disable_radix_cache', ['--disable-radix-cache'], 'bool'],
];
// Options that take one of a few values (server_args.py dtype: choices=[...]); argparse checks them.
const CHOICES = { dtype: ['auto', 'half', 'float16', 'bfloat16', 'float', 'float32'] };
const DEFAULTS = { host: '127.0.0.1', port: 30000, tp_size: 1, pp_size: 1, dp_size: 1, ep_size: 1, nnodes: 1, node_rank: 0, context_length: 32768 };
const ALL = OPTIONS.flatMap(([dest, names, kind]) => names.map((name) => ({ name, dest, kind })));
// python/sglang/srt/server_args.py prepare_server_args: argparse.ArgumentParser(prog="sglang serve") (sgl-project/sglang 59ef3b15).
const PROG = 'sglang serve';
const USAGE = `usage: ${PROG} [-h] --model-path MODEL_PATH [--host HOST] [--port PORT] [--tp-size TP_SIZE] ...`;

/** An option by its spelling or a unique prefix of one (argparse's allow_abbrev), else undefined or 'ambiguous'. */
function optionOf(word) {
  const exact = ALL.find((o) => o.name === word);
  if (exact) return exact;
  const hits = ALL.filter((o) => o.name.startsWith(word));
  const dests = new Set(hits.map((o) => o.dest));
  if (dests.size > 1) return { ambiguous: hits.map((o) => o.name) };
  return hits[0];
}

function convert(o, raw) {
  const choices = CHOICES[o.dest];
  if (choices && !choices.includes(raw)) throw new SglangArgError(`argument ${o.name}: invalid choice: '${raw}' (choose from ${choices.map((c) => `'${c}'`).join(', ')})`);
  if (o.kind === 'str') return raw;
  const ok = o.kind === 'int' ? /^[+-]?\d+$/.test(raw) : /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw);
  if (!ok) throw new SglangArgError(`argument ${o.name}: invalid ${o.kind} value: '${raw}'`);
  return Number(raw);
}

/** The parsed ServerArgs fields (defaults filled in), or a SglangArgError with argparse's message. */
function parseSglangArgs(argv) {
  const out = { ...DEFAULTS };
  const unknown = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    if (!word.startsWith('--')) {
      unknown.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const name = eq < 0 ? word : word.slice(0, eq);
    const o = optionOf(name);
    if (o === undefined) {
      unknown.push(word);
      if (eq < 0 && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) unknown.push(argv[++i]);
      continue;
    }
    if (o.ambiguous) throw new SglangArgError(`ambiguous option: ${name} could match ${o.ambiguous.join(', ')}`);
    if (o.kind === 'bool') {
      if (eq >= 0) throw new SglangArgError(`argument ${o.name}: ignored explicit argument '${word.slice(eq + 1)}'`);
      out[o.dest] = true;
      continue;
    }
    const raw = eq >= 0 ? word.slice(eq + 1) : argv[++i];
    if (raw === undefined) throw new SglangArgError(`argument ${o.name}: expected one argument`);
    out[o.dest] = convert(o, raw);
  }
  if (unknown.length > 0) throw new SglangArgError(`unrecognized arguments: ${unknown.join(' ')}`);
  if (out.model_path === undefined) throw new SglangArgError('the following arguments are required: --model-path/--model');
  return out;
}

const TYPES = { int: ['int'], float: ['float'], str: ['str'] };

/**
 * The persona's parser as launcher's dump program prints a real SGLang's (launcher's format 1,
 * read by src/engine/argparse-dump.ts): argparse's help action, then each option of OPTIONS as
 * argparse would hold it (store_true for an on/off flag, a store with its type otherwise).
 */
function describeSglangParser(version) {
  const action = ([dest, names, kind]) =>
    kind === 'bool'
      ? { option_strings: names, dest, action: '_StoreTrueAction', nargs: 0, const: true, default: false, type: null, choices: null }
      : { option_strings: names, dest, action: '_StoreAction', nargs: null, const: null, default: DEFAULTS[dest] ?? null, type: TYPES[kind], choices: CHOICES[dest] ?? null };
  const help = { option_strings: ['-h', '--help'], dest: 'help', action: '_HelpAction', nargs: 0, const: null, default: '==SUPPRESS==', type: null, choices: null };
  return { format: 1, engine_version: version, python: '3.12.3', allow_abbrev: true, actions: [help, ...OPTIONS.map(action)] };
}

module.exports = { parseSglangArgs, describeSglangParser, SglangArgError, PROG, USAGE };
