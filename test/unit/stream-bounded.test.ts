import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { STREAM_QUEUE_LINES, streamLocal } from "../../src/remote/transport.js";

/** Bytes the process has written so far (/proc/PID/io wchar). */
const written = (pid: string): number => Number(/^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"))?.[1] ?? NaN);

test("a stream read slower than the node writes holds a bounded number of lines: the writer waits on the pipe", async () => {
  // A node's log that never stops (a model printing): the reader takes one line and pauses. Held
  // back, the writer waits on its full pipe and writes nothing more; read without a bound, the
  // stream would keep taking what it writes.
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-stream-"));
  const pidFile = path.join(dir, "pid");
  const abort = new AbortController();
  try {
    const lines = streamLocal("sh", ["-c", `echo $$ > ${pidFile}; exec yes "a line a model printed"`], abort.signal)[Symbol.asyncIterator]();
    assert.equal((await lines.next()).value, "a line a model printed");
    const pid = readFileSync(pidFile, "utf8").trim();
    let before = written(pid);
    let held = false;
    for (let i = 0; i < 40 && !held; i++) {
      await new Promise((r) => setTimeout(r, 250));
      const now = written(pid);
      held = now === before;
      before = now;
    }
    assert.ok(held, `the writer went on writing (${before} bytes): the stream read on without a bound`);
    // What was held is handed out in order, then the writer goes on.
    let n = 0;
    for (; n < STREAM_QUEUE_LINES * 3; n++) assert.equal((await lines.next()).value, "a line a model printed");
    await lines.return?.();
  } finally {
    abort.abort();
    rmSync(dir, { recursive: true, force: true });
  }
});
