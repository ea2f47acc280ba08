'use strict';
// practice-engine's SGLang persona: SGLang's log lines (a stand-in, not SGLang).
// python/sglang/srt/utils/common.py configure_logger: "[%(asctime)s{prefix}] %(message)s" with
// datefmt "%Y-%m-%d %H:%M:%S"; the scheduler's prefix names its ranks (" TP0", " PP1 TP0"), the
// HTTP server's process has none. A multi-line message (a traceback) carries the header on its
// first line only (Python's logging). Uvicorn's records go through the same handler:
// "INFO:     Uvicorn running on ...".

const base = require('../log.js');

const pad = (n) => String(n).padStart(2, '0');

function stamp(d = new Date()) {
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** One logger record of `ranks` (e.g. "TP0"; '' for the HTTP server's process): every line of `msg` joined by "\n". */
function record(ranks, msg) {
  base.out(`[${stamp()}${ranks ? ` ${ranks}` : ''}] ${msg}`);
}

/** A uvicorn record: its level padded as uvicorn's default formatter pads it. */
function uvicorn(msg) {
  record('', `INFO:     ${msg}`);
}

/** logger.error(f"Scheduler hit an exception: {traceback}") (python/sglang/srt/managers/scheduler.py run_scheduler_process). */
function schedulerException(ranks, frames, excLine) {
  const lines = ['Traceback (most recent call last):'];
  for (const [file, line, func, code] of frames) {
    lines.push(`  File "${file}", line ${line}, in ${func}`);
    if (code) lines.push(`    ${code}`);
  }
  lines.push(excLine);
  record(ranks, `Scheduler hit an exception: ${lines.join('\n')}`);
}

module.exports = { stamp, record, uvicorn, schedulerException, out: base.out, err: base.err, exit: base.exit, onExit: base.onExit, isExiting: base.isExiting };
