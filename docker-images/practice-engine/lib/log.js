'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): vLLM-style log lines,
// Python-style tracebacks and a flush-then-exit helper.
//
// Rule: log lines "(Proc pid=P) LEVEL MM-DD HH:MM:SS [file.py:N] msg" go to
// stdout (vLLM's logger writes to stdout); argparse errors and raw Python-style
// tracebacks go to stderr.

const PID = process.pid;

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

function info(proc, src, msg) {
  out(`(${proc} pid=${PID}) INFO ${stamp()} [${src}] ${msg}`);
}

function warn(proc, src, msg) {
  out(`(${proc} pid=${PID}) WARNING ${stamp()} [${src}] ${msg}`);
}

function error(proc, src, msg) {
  out(`(${proc} pid=${PID}) ERROR ${stamp()} [${src}] ${msg}`);
}

/**
 * Python-style traceback on stderr.
 * frames: [[file, line, func, code], ...]; excLines: final line(s), e.g. "RuntimeError: ...".
 * prefix: optional per-line prefix such as "(EngineCore_DP0 pid=P) ".
 */
function traceback(frames, excLines, prefix = '') {
  const lines = ['Traceback (most recent call last):'];
  for (const [file, line, func, code] of frames) {
    lines.push(`  File "${file}", line ${line}, in ${func}`);
    if (code) lines.push(`    ${code}`);
  }
  for (const l of [].concat(excLines)) lines.push(l);
  for (const l of lines) err(prefix + l);
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

module.exports = { PID, stamp, out, err, info, warn, error, traceback, onExit, isExiting, exit };
