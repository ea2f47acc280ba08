'use strict';
// practice-engine's llama.cpp persona (a stand-in for llama.cpp, not llama.cpp): llama-server's
// option table, the one launcher judges recipes by (src/engine/llamacpp/llama-server-options.json,
// staged by prepare.sh as /app/llama-server-options.json), read as common/arg.cpp parses a command
// line: every option only as spelled, a flag's value the next word, `--x=v` split at the `=`.

const fs = require('node:fs');
const path = require('node:path');

const CANDIDATES = ['/app/llama-server-options.json', path.join(__dirname, '../../../../src/engine/llamacpp/llama-server-options.json')];

function readTable() {
  for (const file of CANDIDATES) if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  throw new Error(`no llama-server option table (looked in ${CANDIDATES.join(', ')})`);
}

/** A row: its spellings, then the hint of the value it takes (src/engine/llamacpp/options.ts readOptionRow). */
function readRow(row) {
  const names = [];
  let rest = row;
  for (;;) {
    const m = /^(--?[A-Za-z0-9][\w.-]*)(, |\s|$)/.exec(rest);
    if (m === null) break;
    names.push(m[1]);
    rest = rest.slice(m[0].length);
    if (m[2] !== ', ') break;
  }
  const hint = rest.trim();
  const arity = hint === '' ? 0 : hint.includes('<tensor name') || hint.startsWith('[') || hint.startsWith('<') ? 1 : hint.split(/\s+/).length;
  const braced = /^\{([^}]*)\}$/.exec(hint);
  return { names, arity, choices: braced === null ? null : braced[1].split(',') };
}

let byName = null;
function options() {
  if (byName === null) {
    byName = new Map();
    for (const row of readTable().options.map(readRow)) for (const n of row.names) byName.set(n, row);
  }
  return byName;
}

class ArgError extends Error {}

/**
 * The command line as llama-server reads it: { values: Map(long name -> value(s)), flags: Set }.
 * An unknown option: common/arg.cpp throws std::invalid_argument("error: invalid argument: X"),
 * which common_params_parse prints on stderr before it returns false (exit 1).
 */
function parseArgs(argv) {
  const values = new Map();
  const seen = new Set();
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline = null;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    if (eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const row = options().get(arg);
    if (row === undefined) throw new ArgError(`error: invalid argument: ${arg}`);
    const key = row.names.find((n) => n.startsWith('--')) ?? row.names[0];
    seen.add(key);
    if (row.arity === 0) {
      values.set(key, arg.startsWith('--no-') || arg.startsWith('-no') || arg === '-nkvo' || arg === '-nocb' ? false : true);
      continue;
    }
    const got = inline !== null ? [inline] : argv.slice(i + 1, i + 1 + row.arity);
    if (inline === null) i += row.arity;
    if (got.length < row.arity) throw new ArgError(`error while handling argument "${arg}": expected value for argument`);
    if (row.choices !== null && !row.choices.includes(got[0])) throw new ArgError(`error while handling argument "${arg}": invalid value`);
    values.set(key, row.arity === 1 ? got[0] : got);
  }
  return { values, seen };
}

module.exports = { parseArgs, ArgError, readRow };
