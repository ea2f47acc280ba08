'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): the description of `vllm serve`'s argument
// parser, in launcher's dump format 1 (every argparse action of the parser, in order; the format is
// read by launcher's src/engine/argparse-dump.ts). `vllm serve` parses its argv by it (lib/args.js)
// and bin/python3 prints it for launcher's dump program.
//
// Its base is launcher's static table of vLLM's parser (src/engine/vllm/parser-table.json): in the
// image prepare.sh copies it to /app/parser.json; run from the source tree it is read where it lives.
// Two variants, from the environment (a derived image sets them with ENV):
//   PRACTICE_PARSER_DROP  comma-separated option strings: every action having one is removed
//                         (an image whose vLLM lacks a flag);
//   PRACTICE_PARSER_ADD   a JSON array of format-1 actions (a fork's own flags). One that shares an
//                         option string with an action already there replaces it (a fork redefines
//                         the flag), as argparse itself refuses two actions with one option string
//                         (CPython Lib/argparse.py _handle_conflict_error); the others are appended.

const fs = require('node:fs');
const path = require('node:path');
const { ConfigError } = require('./config.js');

// A knob's error, so `vllm serve` reports it as it reports any bad PRACTICE_* knob (exit 2).
class ParserError extends ConfigError {}

const FORMAT = 1;
// What `vllm serve` here emulates: CPython 3.12's argparse (lib/args.js cites it).
const PYTHON = '3.12.3';
// Bounds on what is read from the environment and from the table file.
const MAX_DROP_CHARS = 4096;
const MAX_ADD_CHARS = 64 * 1024;
const MAX_ADD_ACTIONS = 200;
const MAX_TABLE_BYTES = 4 * 1024 * 1024;
const MAX_STRING = 200;
const NARGS = new Set([null, '?', '+', '*']);

const APP = path.join(__dirname, '..');
// In the image (/app/lib/parser.js): /app/parser.json. From the source tree: launcher's own table.
const TABLE_PATHS = [path.join(APP, 'parser.json'), path.join(APP, '..', '..', 'src', 'engine', 'vllm', 'parser-table.json')];

function fail(msg) {
  throw new ParserError(msg);
}

function readTable(paths = TABLE_PATHS) {
  const file = paths.find((p) => fs.existsSync(p));
  if (!file) fail(`no parser description: none of ${paths.join(', ')} exists (prepare.sh copies it into the image)`);
  if (fs.statSync(file).size > MAX_TABLE_BYTES) fail(`parser description ${file} is larger than ${MAX_TABLE_BYTES} bytes`);
  let table;
  try {
    table = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    fail(`parser description ${file} is not JSON (${e.message})`);
  }
  if (!table || table.format !== FORMAT || !Array.isArray(table.actions)) fail(`parser description ${file} is not format ${FORMAT}`);
  return table;
}

const isShortString = (s) => typeof s === 'string' && s.length > 0 && s.length <= MAX_STRING;

/** One action of PRACTICE_PARSER_ADD, checked; `at` names it in errors. */
function checkAction(a, at) {
  const bad = (what) => fail(`PRACTICE_PARSER_ADD: ${at}: ${what}`);
  if (!a || typeof a !== 'object' || Array.isArray(a)) bad('not an object');
  const opts = a.option_strings;
  if (!Array.isArray(opts) || opts.length === 0 || opts.length > 10) bad('option_strings must be a list of 1 to 10 option strings');
  for (const o of opts) if (!isShortString(o) || !/^-[^\s=]+$/.test(o) || o === '--') bad(`option string ${JSON.stringify(o)} is not an option (-x or --name)`);
  if (!isShortString(a.dest)) bad('dest must be a name');
  if (!isShortString(a.action)) bad('action must be an argparse action class name');
  if (!(NARGS.has(a.nargs) || (Number.isInteger(a.nargs) && a.nargs >= 0 && a.nargs <= 100))) bad('nargs must be null, "?", "+", "*" or an integer from 0 to 100');
  if (a.type !== null && a.type !== undefined && !(Array.isArray(a.type) && a.type.length <= 10 && a.type.every(isShortString))) bad('type must be null or a list of names');
  if (a.choices !== null && a.choices !== undefined && !(Array.isArray(a.choices) && a.choices.length <= 1000)) bad('choices must be null or a list');
  return {
    option_strings: [...opts],
    dest: a.dest,
    action: a.action,
    nargs: a.nargs,
    const: a.const ?? null,
    default: a.default ?? null,
    type: a.type ?? null,
    choices: a.choices ?? null,
  };
}

/** PRACTICE_PARSER_ADD as a list of checked actions (none when unset). */
function addedActions(raw) {
  if (raw === undefined || raw.trim() === '') return [];
  if (raw.length > MAX_ADD_CHARS) fail(`PRACTICE_PARSER_ADD is longer than ${MAX_ADD_CHARS} characters`);
  let list;
  try {
    list = JSON.parse(raw);
  } catch (e) {
    fail(`PRACTICE_PARSER_ADD is not JSON (${e.message}); it is a JSON list of format-1 actions`);
  }
  if (!Array.isArray(list) || list.length > MAX_ADD_ACTIONS) fail(`PRACTICE_PARSER_ADD must be a JSON list of at most ${MAX_ADD_ACTIONS} actions`);
  return list.map((a, i) => checkAction(a, `action ${i + 1}`));
}

/** PRACTICE_PARSER_DROP as a set of option strings (none when unset). */
function droppedOptions(raw) {
  if (raw === undefined || raw.trim() === '') return new Set();
  if (raw.length > MAX_DROP_CHARS) fail(`PRACTICE_PARSER_DROP is longer than ${MAX_DROP_CHARS} characters`);
  const names = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const n of names) if (!/^-[^\s=]+$/.test(n)) fail(`PRACTICE_PARSER_DROP: ${JSON.stringify(n)} is not an option string (-x or --name)`);
  return new Set(names);
}

/** The table's actions with the variants applied: dropped ones removed, added ones in. */
function applyVariants(actions, dropped, added) {
  const addedOpts = new Set(added.flatMap((a) => a.option_strings));
  const kept = actions.filter((a) => !a.option_strings.some((o) => dropped.has(o) || addedOpts.has(o)));
  return [...kept, ...added];
}

/** The version `vllm --version` prints (the `vllm` command reads it the same way). */
function engineVersion(env) {
  return env.PRACTICE_VLLM_VERSION || require(path.join(APP, 'package.json')).version;
}

/**
 * The parser description of this image: the table with PRACTICE_PARSER_DROP / _ADD applied.
 * Throws ParserError (one line) when the table is missing or a variable is malformed.
 */
function describeParser(env = process.env, paths = TABLE_PATHS) {
  const table = readTable(paths);
  const actions = applyVariants(table.actions, droppedOptions(env.PRACTICE_PARSER_DROP), addedActions(env.PRACTICE_PARSER_ADD));
  return { format: FORMAT, engine_version: engineVersion(env), python: PYTHON, allow_abbrev: table.allow_abbrev !== false, actions };
}

module.exports = { describeParser, ParserError, TABLE_PATHS };
