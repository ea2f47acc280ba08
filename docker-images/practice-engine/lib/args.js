'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): `vllm serve MODEL [flags]` argument parsing.
// The words are read as vLLM reads them: FlexibleArgumentParser's own rewriting first
// (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args, vLLM @00da11e37d1f), then
// argparse by this image's parser description (lib/argparse.js over lib/parser.js): a flag the
// description lacks is refused, a unique prefix stands for its option, several are ambiguous.
// Then launcher-managed flags get the practice engine's own stricter checks. Errors mimic
// argparse: usage + "PROG: error: ..." on stderr, exit code 2 (done by the caller).

const { parseKnown, ArgError } = require('./argparse.js');
const { describeParser } = require('./parser.js');
const { pyRepr } = require('./pyrepr.js');

function fail(msg) {
  throw new ArgError(msg);
}

// Launcher-managed flags (names normalised to dashes).
const MANAGED = {
  'tensor-parallel-size': { type: 'int', min: 1 },
  'pipeline-parallel-size': { type: 'int', min: 1 },
  nnodes: { type: 'int', min: 1 },
  'node-rank': { type: 'int', min: 0 },
  'master-addr': { type: 'str' },
  'master-port': { type: 'int', min: 1, max: 65535 },
  headless: { type: 'bool' },
  host: { type: 'str' },
  port: { type: 'int', min: 1, max: 65535 },
  'served-model-name': { type: 'names' },
  'distributed-executor-backend': { type: 'choice', choices: ['mp', 'ray', 'uni', 'external_launcher'] },
  'max-model-len': { type: 'int', min: 1 },
  model: { type: 'str' },
  // vllm/entrypoints/openai/cli_args.py FrontendArgs.api_key: list[str], so nargs="+".
  'api-key': { type: 'names' },
};

function parseIntStrict(name, raw, spec) {
  if (typeof raw !== 'string' || !/^[+-]?\d+$/.test(raw.trim())) {
    fail(`argument --${name}: invalid int value: '${raw === true ? '' : raw}'`);
  }
  const v = Number.parseInt(raw.trim(), 10);
  if (spec.min !== undefined && v < spec.min) fail(`argument --${name}: invalid value ${v}: must be >= ${spec.min}`);
  if (spec.max !== undefined && v > spec.max) fail(`argument --${name}: invalid value ${v}: must be <= ${spec.max}`);
  return v;
}

/**
 * The keys the API demands, as vLLM's build_app takes them
 * (vllm/entrypoints/openai/api_server.py): `args.api_key or [envs.VLLM_API_KEY]`, empty ones
 * dropped. None: no authentication.
 */
function apiKeys(args, env) {
  return (args.apiKeys.length > 0 ? args.apiKeys : [env.VLLM_API_KEY]).filter((k) => typeof k === 'string' && k !== '');
}

// vllm/entrypoints/cli/main.py: `vllm serve` is a subparser of `vllm`; CPython's _SubParsersAction
// hands the words the subparser left to the top parser, whose parse_args refuses them
// (Lib/argparse.py, and FlexibleArgumentParser.error's `_show_serve_task_hint`, set on the top
// parser for exactly this). So unrecognized arguments are `vllm`'s error, with `vllm`'s usage
// (main.py _build_parser: `-v/--version` and one subparser per CLI command; which commands there
// are depends on the version, this list is one of them).
const TOP_USAGE = 'usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...';

/** FlexibleArgumentParser: `--model X` / `--model=X` (that exact spelling) moves to the front. */
function moveModel(argv) {
  const at = argv.findIndex((w) => /^--model(=.+|$)/.test(w));
  if (at < 0) return argv;
  if (argv[at] !== '--model') return [argv[at].slice('--model='.length), ...argv.slice(0, at), ...argv.slice(at + 1)];
  if (at + 1 >= argv.length || argv[at + 1].startsWith('-')) fail('argument --model: expected one argument');
  return [argv[at + 1], ...argv.slice(0, at), ...argv.slice(at + 2)];
}

/**
 * FlexibleArgumentParser, word by word: `_` -> `-` in a `--` name up to its first `.` (not in a
 * value after `=`); `-O3`, `-O=3` and `-O 3` (0 to 3) -> `--optimization-level 3`.
 */
function flexibleWords(argv) {
  const out = [];
  argv.forEach((w, i) => {
    if (w.startsWith('--help=')) out.push('--help');
    else if (w.startsWith('--')) {
      const eq = w.indexOf('=');
      const key = (eq >= 0 ? w.slice(0, eq) : w).replace(/(?<=--)[^.]*/, (m) => m.replace(/_/g, '-'));
      out.push(eq >= 0 ? `${key}=${w.slice(eq + 1)}` : key);
    } else if (w.startsWith('-O') && w !== '-O') out.push('--optimization-level', w[2] === '=' ? w.slice(3) : w.slice(2));
    else if (w === '-O' && ['0', '1', '2', '3'].includes(argv[i + 1])) out.push('--optimization-level');
    else out.push(w);
  });
  return out;
}

// vllm/utils/argparse_utils.py human_readable_int: 1k = 1000, 1K = 1024 (no decimals with K/M/G/T).
function humanReadableInt(s) {
  const m = /^(\d+(?:\.\d+)?)([kKmMgGtT])$/.exec(s.trim());
  if (m) {
    const dec = { k: 1e3, m: 1e6, g: 1e9, t: 1e12 }[m[2]];
    if (dec) return Math.trunc(Number(m[1]) * dec);
    if (/^\d+$/.test(m[1])) return Number(m[1]) * 2 ** (10 * ('KMGT'.indexOf(m[2]) + 1));
    return undefined;
  }
  return /^\s*[+-]?\d+\s*$/.test(s) ? Number.parseInt(s, 10) : undefined;
}

/** A dotted word's value: JSON, else a human-readable int, else the text. */
function dottedValue(text) {
  try {
    return JSON.parse(text);
  } catch {
    return humanReadableInt(text) ?? text;
  }
}

function mergeInto(into, update) {
  for (const [k, v] of Object.entries(update)) {
    const old = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && old && typeof old === 'object' && !Array.isArray(old)) mergeInto(old, v);
    else if (Array.isArray(v) && Array.isArray(old)) old.push(...v);
    else into[k] = v;
  }
}

/**
 * FlexibleArgumentParser's dotted form: `--x.a.b V` / `--x.a.b=V` / `-cc.mode V` (`--x.k+ a,b`
 * appends list items) are merged into one JSON object per option, appended as `--x '<json>'`.
 */
function mergeDotted(words) {
  const out = [];
  const dicts = new Map();
  for (let i = 0; i < words.length; i++) {
    let w = words[i];
    const eq = w.indexOf('=');
    const name = eq >= 0 ? w.slice(0, eq) : w;
    if (!w.startsWith('-') || !name.includes('.')) {
      out.push(w);
      continue;
    }
    let text = eq >= 0 ? w.slice(eq + 1) : words[++i];
    if (text === undefined) fail(`argument ${name}: expected one argument`);
    w = name;
    if (w.endsWith('+')) {
      w = w.slice(0, -1);
      text = JSON.stringify(text.split(','));
    }
    const [key, ...keys] = w.split('.');
    const nested = keys.reduceRight((inner, k) => ({ [k]: inner }), dottedValue(text));
    if (!dicts.has(key)) dicts.set(key, {});
    mergeInto(dicts.get(key), nested);
  }
  for (const [key, dict] of dicts) out.push(key, JSON.stringify(dict));
  return out;
}

// What a flag's value looks like on the "non-default args" line when its type is plain text.
function shownText(raw) {
  if (typeof raw !== 'string') return raw;
  if (/^[+-]?\d+$/.test(raw) || /^[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) return Number(raw);
  return raw;
}

/**
 * The words as vLLM's parser reads them: { model, given: Map(name -> raw), shown: Map(name ->
 * value for the log line) }; names are the actions' dests with dashes. Throws ArgError.
 */
function readWords(argv, desc) {
  const words = mergeDotted(flexibleWords(moveModel(argv)));
  const { given: byAction, extras } = parseKnown(desc, words);
  if (extras.length > 0) throw Object.assign(new ArgError(`unrecognized arguments: ${extras.join(' ')}`), { prog: 'vllm', usage: TOP_USAGE });
  let model;
  const given = new Map();
  const shown = new Map();
  for (const [action, { value, words: taken }] of byAction) {
    if (action.option_strings.length === 0) {
      if (action.dest === 'model_tag') model = value;
      continue;
    }
    const name = action.dest.replace(/_/g, '-');
    const raw = action.nargs === 0 ? value : Array.isArray(value) ? taken : (taken[0] ?? value);
    given.set(name, raw);
    shown.set(name, action.type ? value : Array.isArray(raw) ? raw.map(shownText) : shownText(raw));
  }
  return { model, given, shown };
}

/**
 * Parse argv (process.argv.slice(2)): [MODEL, ...flags], by this image's parser description.
 * Returns a normalised object; throws ArgError on any malformed input (help: true for --help).
 */
function parseArgs(argv, desc = describeParser(process.env)) {
  const { model: tag, given, shown } = readWords(argv, desc);
  const model = tag ?? given.get('model');
  if (typeof model !== 'string' || model === '') fail('the following arguments are required: model_tag');

  const a = {
    model,
    tensorParallelSize: 1,
    pipelineParallelSize: 1,
    nnodes: 1,
    nodeRank: 0,
    masterAddr: null,
    masterPort: 29501,
    headless: false,
    host: '0.0.0.0',
    port: 8000,
    servedModelNames: [model],
    backend: 'mp',
    maxModelLen: 8192,
    apiKeys: [],
    flags: {}, // every flag as given (raw), for reference
    nonDefault: { model }, // python-ish dict for the log line
  };
  for (const [name, raw] of given) {
    a.flags[name] = raw;
    if (name === 'model') continue;
    const spec = MANAGED[name];
    const v = spec ? managedValue(name, raw, spec) : shown.get(name);
    a.nonDefault[name.replace(/-/g, '_')] = v;
    if (FIELDS[name]) a[FIELDS[name]] = v;
  }
  crossCheck(a);
  return a;
}

// Where each managed flag's value goes in the parsed arguments.
const FIELDS = {
  'tensor-parallel-size': 'tensorParallelSize',
  'pipeline-parallel-size': 'pipelineParallelSize',
  nnodes: 'nnodes',
  'node-rank': 'nodeRank',
  'master-addr': 'masterAddr',
  'master-port': 'masterPort',
  headless: 'headless',
  host: 'host',
  port: 'port',
  'served-model-name': 'servedModelNames',
  'distributed-executor-backend': 'backend',
  'max-model-len': 'maxModelLen',
  'api-key': 'apiKeys',
};

/** A managed flag's value, checked more strictly than vLLM does (the practice engine's own rules). */
function managedValue(name, raw, spec) {
  const nonEmpty = (s) => (typeof s === 'string' && s.trim() !== '' ? s : fail(`argument --${name}: expected a non-empty value`));
  switch (spec.type) {
    case 'int':
      return parseIntStrict(name, raw, spec);
    case 'bool':
      return raw !== false;
    case 'str':
      return nonEmpty(raw);
    case 'names':
      return [].concat(raw).map(nonEmpty);
    case 'choice':
      if (!spec.choices.includes(raw)) {
        fail(`argument --${name}: invalid choice: '${raw}' (choose from ${spec.choices.map((c) => `'${c}'`).join(', ')})`);
      }
      return raw;
    default:
      return raw;
  }
}

/** What the managed flags must say together (a practice engine of 1 GPU per node, mp or ray). */
function crossCheck(a) {
  if (a.backend !== 'mp' && a.backend !== 'ray') {
    fail(`argument --distributed-executor-backend: '${a.backend}' is not supported by practice-engine (only 'mp' and 'ray')`);
  }
  if (a.nodeRank >= a.nnodes) {
    fail(`argument --node-rank: invalid value ${a.nodeRank}: must be < --nnodes (${a.nnodes})`);
  }
  if (a.nnodes > 1 && !a.masterAddr) fail('argument --master-addr: required when --nnodes > 1');
  if (a.nodeRank > 0 && !a.headless) fail(`argument --headless: required for --node-rank ${a.nodeRank} (> 0)`);
  if (a.nodeRank === 0 && a.headless) fail('argument --headless: not allowed for --node-rank 0 (the head serves the API)');
}

const USAGE = 'usage: vllm serve [model_tag] [options]';

module.exports = { parseArgs, apiKeys, pyRepr, ArgError, USAGE, MANAGED, readWords };
