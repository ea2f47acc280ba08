'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): argv read by a parser description (format 1,
// lib/parser.js) the way CPython 3.12's argparse reads it (Lib/argparse.py, 3.11/3.12 line:
// ArgumentParser._parse_optional, _get_option_tuples, _parse_known_args consume_optional /
// consume_positionals, _match_argument, _get_values, _check_value, _get_action_name), with the
// parts vLLM's serve parser uses: long and short option strings, `--x=v`, unique prefixes of long
// options (allow_abbrev), nargs null / 0 / "?" / "+" / "*" / N, choices, and int/float/JSON types.
// Not emulated: several short flags in one word (`-ab`), `@file` arguments, mutually exclusive
// groups (vLLM's serve parser has none).
// Errors are ArgError: `message` is argparse's, without the "PROG: error: " that the caller adds.

const { pyRepr } = require('./pyrepr.js');

class ArgError extends Error {}

function fail(msg) {
  throw new ArgError(msg);
}

// Lib/argparse.py ArgumentParser.__init__: _negative_number_matcher (3.12).
const NEGATIVE_NUMBER = /^-\d+$|^-\d*\.\d+$/;
const POSITIONAL = Object.freeze({ kind: 'A' });

/** The option strings of a description, each to its action (in the order they were added). */
function indexParser(desc) {
  const byOption = new Map();
  for (const action of desc.actions) for (const o of action.option_strings) byOption.set(o, action);
  const negativeOptions = [...byOption.keys()].some((o) => NEGATIVE_NUMBER.test(o));
  return { byOption, allowAbbrev: desc.allow_abbrev !== false, negativeOptions, positionals: desc.actions.filter((a) => a.option_strings.length === 0) };
}

/** _get_option_tuples: the options a word not found as it is could stand for. */
function optionTuples(word, p) {
  const out = [];
  if (word[1] === '-') {
    // "option strings starting with two prefix characters are only split at the '='"
    if (!p.allowAbbrev) return out;
    const eq = word.indexOf('=');
    const prefix = eq >= 0 ? word.slice(0, eq) : word;
    const explicit = eq >= 0 ? word.slice(eq + 1) : null;
    for (const [o, action] of p.byOption) if (o.startsWith(prefix)) out.push({ kind: 'O', action, option: o, explicit });
    return out;
  }
  // A single-dash word: its first two characters may be a short option with the value glued on.
  const short = word.slice(0, 2);
  for (const [o, action] of p.byOption) {
    if (o === short) out.push({ kind: 'O', action, option: o, explicit: word.slice(2) });
    else if (o.startsWith(word)) out.push({ kind: 'O', action, option: o, explicit: null });
  }
  return out;
}

/** _parse_optional: a word is a positional ('A'), an option (known or not), or ambiguous (an error). */
function classify(word, p) {
  if (word === '' || word[0] !== '-') return POSITIONAL;
  if (p.byOption.has(word)) return { kind: 'O', action: p.byOption.get(word), option: word, explicit: null };
  if (word.length === 1) return POSITIONAL;
  const eq = word.indexOf('=');
  if (eq >= 0 && p.byOption.has(word.slice(0, eq))) {
    return { kind: 'O', action: p.byOption.get(word.slice(0, eq)), option: word.slice(0, eq), explicit: word.slice(eq + 1) };
  }
  const tuples = optionTuples(word, p);
  if (tuples.length > 1) fail(`ambiguous option: ${word} could match ${tuples.map((t) => t.option).join(', ')}`);
  if (tuples.length === 1) return tuples[0];
  if (NEGATIVE_NUMBER.test(word) && !p.negativeOptions) return POSITIONAL;
  if (word.includes(' ')) return POSITIONAL;
  return { kind: 'O', action: null, option: word, explicit: null };
}

/** Every word classified up front, as argparse builds its pattern: '--' makes the rest positional. */
function classifyAll(words, p) {
  const out = [];
  let rest = false;
  for (const word of words) {
    if (!rest && word === '--') {
      rest = true;
      continue;
    }
    out.push({ word, ...(rest ? POSITIONAL : classify(word, p)) });
  }
  return out;
}

/** _get_action_name: how an error names an action. */
function actionName(action) {
  return action.option_strings.length > 0 ? action.option_strings.join('/') : action.dest;
}

function argFail(action, msg) {
  fail(`argument ${actionName(action)}: ${msg}`);
}

const hasType = (action, name) => Array.isArray(action.type) && action.type.includes(name);

// Python's int() and float() of a str (surrounding whitespace and digit-separating underscores allowed).
const PY_INT = /^\s*[+-]?\d+(?:_\d+)*\s*$/;
const DIGITS = '\\d+(?:_\\d+)*';
const PY_FLOAT = new RegExp(`^\\s*[+-]?(?:(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?|inf|infinity|nan)\\s*$`, 'i');
// vllm/engine/arg_utils.py union_dict_and_str: JSON only when the value is `{...}`.
const DICT_TEXT = /^\s*\{[\s\S]*\}\s*$/;

function jsonValue(action, s) {
  try {
    return JSON.parse(s);
  } catch {
    // vllm/engine/arg_utils.py parse_type: "Value {val} cannot be converted to {return_type}."
    return argFail(action, `Value ${s} cannot be converted to <function loads>`);
  }
}

/** _get_value: a word converted by the action's type (the types vLLM's serve parser uses). */
function convert(action, s) {
  // vllm/engine/arg_utils.py optional_type: "" and "None" are None.
  if (hasType(action, 'optional_type') && (s === '' || s === 'None')) return null;
  if (hasType(action, 'int')) {
    if (!PY_INT.test(s)) argFail(action, `invalid int value: ${pyRepr(s)}`);
    return Number.parseInt(s.replace(/_/g, ''), 10);
  }
  if (hasType(action, 'float')) {
    if (!PY_FLOAT.test(s)) argFail(action, `invalid float value: ${pyRepr(s)}`);
    return Number(s.replace(/_/g, '').trim().replace(/^([+-]?)inf(inity)?$/i, '$1Infinity'));
  }
  if (hasType(action, 'loads') || hasType(action, 'parse_dataclass')) return jsonValue(action, s);
  if (hasType(action, 'union_dict_and_str') && DICT_TEXT.test(s)) return jsonValue(action, s);
  return s;
}

/** _check_value, with CPython 3.12's wording: the value and the choices as repr() (3.14 prints str()). */
function checkChoice(action, value) {
  if (!Array.isArray(action.choices)) return;
  const same = (c) => c === value || ((c === null || c === 'None') && (value === null || value === 'None'));
  if (action.choices.some(same)) return;
  const shown = (c) => (c === null || c === 'None' ? 'None' : pyRepr(c));
  argFail(action, `invalid choice: ${shown(value)} (choose from ${action.choices.map(shown).join(', ')})`);
}

/** _get_values: the words an action took, as the value it stores. */
function values(action, option, words) {
  if (action.nargs === 0) return onOffValue(action, option);
  if (words.length === 0) return action.const; // nargs "?" given without its value
  const converted = words.map((w) => convert(action, w));
  for (const v of converted) checkChoice(action, v);
  return action.nargs === null || action.nargs === '?' ? converted[0] : converted;
}

/** What an on/off action stores (BooleanOptionalAction: false for its --no- string). */
function onOffValue(action, option) {
  if (action.action === 'BooleanOptionalAction') return !option.startsWith('--no-');
  if (action.action === '_StoreFalseAction') return false;
  if (action.action === '_StoreConstAction') return action.const;
  return true;
}

/** _match_argument: how many of the `avail` positional words after an option it takes. */
function wordCount(action, avail) {
  const n = action.nargs;
  if (n === null) return avail >= 1 ? 1 : argFail(action, 'expected one argument');
  if (n === '?') return Math.min(avail, 1);
  if (n === '*') return avail;
  if (n === '+') return avail >= 1 ? avail : argFail(action, 'expected at least one argument');
  if (avail >= n) return n;
  return argFail(action, `expected ${n} argument${n === 1 ? '' : 's'}`);
}

/** consume_optional: the option at `at` and the words it takes; returns where the next word is. */
function consumeOptional(items, at, state) {
  const { action, option, explicit } = items[at];
  if (!action) {
    state.extras.push(items[at].word);
    return at + 1;
  }
  if (action.action === '_HelpAction') throw Object.assign(new ArgError('help'), { help: true });
  if (explicit !== null) {
    // An explicit `=v` (or a value glued to a short option) is the one word an option may take.
    const takes = action.nargs === 0 ? 0 : wordCount(action, 1);
    if (takes !== 1) argFail(action, `ignored explicit argument ${pyRepr(explicit)}`);
    state.take(action, option, [explicit]);
    return at + 1;
  }
  let avail = 0;
  while (at + 1 + avail < items.length && items[at + 1 + avail].kind === 'A') avail++;
  const n = action.nargs === 0 ? 0 : wordCount(action, avail);
  state.take(action, option, items.slice(at + 1, at + 1 + n).map((i) => i.word));
  return at + 1 + n;
}

/** consume_positionals: a run of positional words to the positionals still open; the rest are extras. */
function consumePositionals(run, state) {
  let used = 0;
  while (state.positionals.length > 0 && used < run.length) {
    const action = state.positionals.shift();
    const many = action.nargs === '+' || action.nargs === '*';
    const n = many ? run.length - used : Number.isInteger(action.nargs) ? action.nargs : 1;
    state.take(action, action.dest, run.slice(used, used + n));
    used += n;
  }
  state.extras.push(...run.slice(used));
}

/**
 * Parse words by a description. Returns { given: Map(action -> {option, value}), extras: words
 * no action took } in argv order; throws ArgError (help: true for -h/--help).
 */
function parseKnown(desc, words) {
  const p = indexParser(desc);
  const items = classifyAll(words, p);
  const given = new Map();
  const state = {
    extras: [],
    positionals: [...p.positionals],
    take(action, option, taken) {
      given.delete(action); // a later occurrence wins (store actions), and keeps argv order
      given.set(action, { option, value: values(action, option, taken), words: taken });
    },
  };
  let at = 0;
  while (at < items.length) {
    if (items[at].kind === 'O') {
      at = consumeOptional(items, at, state);
      continue;
    }
    let end = at;
    while (end < items.length && items[end].kind === 'A') end++;
    consumePositionals(items.slice(at, end).map((i) => i.word), state);
    at = end;
  }
  return { given, extras: state.extras };
}

module.exports = { parseKnown, ArgError, actionName };
