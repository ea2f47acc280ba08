'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): vLLM-style log lines,
// Python-style tracebacks and a flush-then-exit helper.
//
// Rule: log lines "(Proc pid=P) LEVEL MM-DD HH:MM:SS [file.py:N] msg" go to
// stdout (vLLM's logger writes to stdout); argparse errors, raw Python-style
// tracebacks and tqdm bars go to stderr.
//
// The shapes are current vLLM's (vllm-project/vllm):
// - the process prefix "(Proc pid=P) " of vllm/utils/system_utils.py _add_prefix, in CYAN only on a
//   TTY; builds of about v0.10 to early 2026 coloured it always (PRACTICE_LOG_STYLE=v0.11);
// - vllm/logging_utils/formatter.py NewLineFormatter: every line of a multi-line message (the
//   traceback of logger.exception) carries the prefix and header again, lines joined by "\r\n".

const PID = process.pid;
// Read here, before the first line; lib/config.js checks the value.
const OLD_STYLE = (process.env.PRACTICE_LOG_STYLE ?? '').trim() === 'v0.11';
// vllm/logger.py _FORMAT = f"{VLLM_LOGGING_PREFIX}%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s":
// the env's text goes before the level, as it is (no separator added), on every logger line.
const LOGGING_PREFIX = process.env.VLLM_LOGGING_PREFIX ?? '';
const CYAN = '\x1b[0;36m';
const RESET = '\x1b[0;0m';

function prefix(proc) {
  const p = `(${proc} pid=${PID})`;
  return OLD_STYLE ? `${CYAN}${p}${RESET} ` : `${p} `;
}

function pad(n) {
  return String(n).padStart(2, '0');
}

function stamp(d = new Date()) {
  return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

let exiting = false;
const exitHooks = [];

function out(line) {
  if (exiting) return;
  process.stdout.write(line + '\n');
}

function err(line) {
  if (exiting) return;
  process.stderr.write(line + '\n');
}

/** One logger record: every line of the message behind the prefix and header (NewLineFormatter). */
function record(level, proc, src, lines) {
  const head = `${prefix(proc)}${LOGGING_PREFIX}${level} ${stamp()} [${src}] `;
  out(lines.map((l) => head + l).join('\r\n'));
}

function info(proc, src, msg) {
  record('INFO', proc, src, [msg]);
}

function warn(proc, src, msg) {
  record('WARNING', proc, src, [msg]);
}

function error(proc, src, msg) {
  record('ERROR', proc, src, [msg]);
}

function tracebackLines(frames, excLines) {
  const lines = ['Traceback (most recent call last):'];
  for (const [file, line, func, code] of frames) {
    lines.push(`  File "${file}", line ${line}, in ${func}`);
    if (code) lines.push(`    ${code}`);
  }
  for (const l of [].concat(excLines)) lines.push(l);
  return lines;
}

/** logger.exception(msg): the message and the traceback as ONE record, on stdout. */
function exception(proc, src, msg, frames, excLines) {
  record('ERROR', proc, src, [msg, ...tracebackLines(frames, excLines)]);
}

/**
 * A raw Python traceback on stderr (an uncaught exception, multiprocessing's own report).
 * frames: [[file, line, func, code], ...]; excLines: final line(s), e.g. "RuntimeError: ...".
 * proc: the process whose prefix each line carries, if any.
 */
function traceback(frames, excLines, proc) {
  const pre = proc === undefined ? '' : prefix(proc);
  for (const l of tracebackLines(frames, excLines)) err(pre + l);
}

/** A tqdm bar on stderr: redrawn with "\r" on one line, ended by "\n" when done. */
function bar(proc, desc, total) {
  let s = prefix(proc);
  for (const n of [0, Math.ceil(total / 2), total]) {
    const pct = String(Math.round((100 * n) / total)).padStart(3, ' ');
    const fill = '\u2588'.repeat(Math.round((10 * n) / total)).padEnd(10, ' ');
    s += `\r${desc}: ${pct}%|${fill}| ${n}/${total} [00:00<00:00, 51.75it/s]`;
  }
  err(s);
}

function onExit(fn) {
  exitHooks.push(fn);
}

function isExiting() {
  return exiting;
}

/** Run exit hooks (close server/sockets), flush stdout/stderr, then exit. */
function exit(code) {
  if (exiting) return;
  exiting = true;
  for (const h of exitHooks) {
    try {
      h();
    } catch {
      /* ignore */
    }
  }
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  try {
    process.stdout.write('', done);
  } catch {
    done();
  }
  try {
    process.stderr.write('', done);
  } catch {
    done();
  }
  // Never hang on a blocked pipe: hard exit well within 1 s.
  setTimeout(() => process.exit(code), 400).unref();
}

module.exports = { PID, OLD_STYLE, stamp, prefix, out, err, record, info, warn, error, exception, traceback, bar, onExit, isExiting, exit };
