'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): `vllm serve MODEL [flags]`
// argument parsing. Launcher-managed flags are checked strictly; every other
// `--flag` is accepted. Errors mimic argparse: usage + "vllm serve: error: ..."
// on stderr, exit code 2 (done by the caller).

class ArgError extends Error {}

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

function checkJson(name, value) {
  if (typeof value !== 'string') return undefined;
  if (!(value.startsWith('{') || value.startsWith('['))) return undefined;
  try {
    return { parsed: JSON.parse(value) };
  } catch {
    fail(`argument --${name}: Value ${value} cannot be converted to <function loads>`);
  }
  return undefined;
}

/** Python-ish repr of a JS value (for the "non-default args" line). */
function pyRepr(v) {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'nan';
  if (typeof v === 'string') {
    const q = v.includes("'") && !v.includes('"') ? '"' : "'";
    let s = v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
    if (q === "'") s = s.replace(/'/g, "\\'");
    return q + s + q;
  }
  if (Array.isArray(v)) return '[' + v.map(pyRepr).join(', ') + ']';
  if (typeof v === 'object') {
    return '{' + Object.entries(v).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ') + '}';
  }
  return String(v);
}

/**
 * The keys the API demands, as vLLM's build_app takes them
 * (vllm/entrypoints/openai/api_server.py): `args.api_key or [envs.VLLM_API_KEY]`, empty ones
 * dropped. None: no authentication.
 */
function apiKeys(args, env) {
  return (args.apiKeys.length > 0 ? args.apiKeys : [env.VLLM_API_KEY]).filter((k) => typeof k === 'string' && k !== '');
}

/**
 * Parse argv (process.argv.slice(2)): [MODEL, ...flags].
 * Returns a normalised object; throws ArgError on any malformed input.
 */
function parseArgs(argv) {
  const given = new Map(); // flag name -> raw value (string | true | string[])
  const positionals = [];
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i];
    if (tok.startsWith('--') && tok.length > 2) {
      let name = tok.slice(2);
      let value;
      let hasEq = false;
      const eq = name.indexOf('=');
      if (eq >= 0) {
        value = name.slice(eq + 1);
        name = name.slice(0, eq);
        hasEq = true;
      }
      name = name.replace(/_/g, '-');
      if (!name) fail(`unrecognized arguments: ${tok}`);
      const spec = MANAGED[name];
      if (spec && spec.type === 'bool') {
        if (hasEq) fail(`argument --${name}: ignored explicit argument '${value}'`);
        value = true;
      } else if (!hasEq) {
        if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
          value = argv[++i];
          if (spec && spec.type === 'names') {
            const names = [value];
            while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) names.push(argv[++i]);
            value = names;
          }
        } else if (spec) {
          fail(`argument --${name}: expected ${spec.type === 'names' ? 'at least one argument' : 'one argument'}`);
        } else {
          value = true;
        }
      }
      if (spec && spec.type === 'names' && !Array.isArray(value)) value = [value];
      for (const v of [].concat(value)) checkJson(name, v);
      given.set(name, value);
    } else if (tok === '--') {
      fail(`unrecognized arguments: --`);
    } else {
      positionals.push(tok);
    }
  }

  let model;
  if (positionals.length > 0) {
    model = positionals.shift();
  } else if (given.has('model')) {
    model = given.get('model');
  }
  if (positionals.length > 0) fail(`unrecognized arguments: ${positionals.join(' ')}`);
  if (typeof model !== 'string' || model === '') fail('the following arguments are required: model_tag');

  // Managed values.
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
    nonDefault: {}, // python-ish dict for the log line
  };
  const nd = { model };
  for (const [name, raw] of given) {
    const spec = MANAGED[name];
    const key = name.replace(/-/g, '_');
    a.flags[name] = raw;
    if (name === 'model') continue;
    if (!spec) {
      // Unmanaged: keep as given; show parsed JSON / numbers nicely.
      let shown = raw;
      const j = checkJson(name, raw);
      if (j) shown = j.parsed;
      else if (typeof raw === 'string' && /^[+-]?\d+$/.test(raw)) shown = Number(raw);
      else if (typeof raw === 'string' && /^[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) shown = Number(raw);
      nd[key] = shown;
      continue;
    }
    let v;
    switch (spec.type) {
      case 'int':
        v = parseIntStrict(name, raw, spec);
        break;
      case 'bool':
        v = true;
        break;
      case 'str':
        if (typeof raw !== 'string' || raw.trim() === '') fail(`argument --${name}: expected a non-empty value`);
        v = raw;
        break;
      case 'names':
        for (const n of raw) if (n.trim() === '') fail(`argument --${name}: expected a non-empty value`);
        v = raw;
        break;
      case 'choice':
        if (!spec.choices.includes(raw)) {
          fail(`argument --${name}: invalid choice: '${raw}' (choose from ${spec.choices.map((c) => `'${c}'`).join(', ')})`);
        }
        v = raw;
        break;
      default:
        v = raw;
    }
    nd[key] = v;
    switch (name) {
      case 'tensor-parallel-size': a.tensorParallelSize = v; break;
      case 'pipeline-parallel-size': a.pipelineParallelSize = v; break;
      case 'nnodes': a.nnodes = v; break;
      case 'node-rank': a.nodeRank = v; break;
      case 'master-addr': a.masterAddr = v; break;
      case 'master-port': a.masterPort = v; break;
      case 'headless': a.headless = true; break;
      case 'host': a.host = v; break;
      case 'port': a.port = v; break;
      case 'served-model-name': a.servedModelNames = v; break;
      case 'distributed-executor-backend': a.backend = v; break;
      case 'max-model-len': a.maxModelLen = v; break;
      case 'api-key': a.apiKeys = v; break;
      default: break;
    }
  }
  a.nonDefault = nd;

  // Cross-checks.
  if (a.backend !== 'mp' && a.backend !== 'ray') {
    fail(`argument --distributed-executor-backend: '${a.backend}' is not supported by practice-engine (only 'mp' and 'ray')`);
  }
  if (a.nodeRank >= a.nnodes) {
    fail(`argument --node-rank: invalid value ${a.nodeRank}: must be < --nnodes (${a.nnodes})`);
  }
  if (a.nnodes > 1 && !a.masterAddr) fail('argument --master-addr: required when --nnodes > 1');
  if (a.nodeRank > 0 && !a.headless) fail(`argument --headless: required for --node-rank ${a.nodeRank} (> 0)`);
  if (a.nodeRank === 0 && a.headless) fail('argument --headless: not allowed for --node-rank 0 (the head serves the API)');
  return a;
}

const USAGE = 'usage: vllm serve [model_tag] [options]';

module.exports = { parseArgs, apiKeys, pyRepr, ArgError, USAGE, MANAGED };
