// What a container's log costs the daemon that watches its boot (README: log lines are cut to
// LINE_MAX, each boot keeps at most MAX_BOOT_EVENTS events). Two logs, side by side in one run,
// each through the path a boot's log takes in the daemon, in process: the stream's line reader
// (src/remote/lines.ts) in pipe-sized chunks, the parser (advanceBoot with vLLM's shapes), the
// events a boot says (progressEvents) and the registry's entry (BootRegistry). One is a single
// 10 MB line (a model that prints, a crash that dumps a tensor), the other 1,000,000 lines whose
// figures and phase change line after line. Printed: the time, and that time over a plain scan of
// the same text (one fixed regex that looks at every character once); the heap (after a
// collection) and RSS growth; the events kept.
// Run: node --expose-gc --import tsx bench/log-reading.ts
import { BootRegistry } from "../src/supervise/boots.js";
import { progressEvents } from "../src/boot/up-events.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, type BootState } from "../src/engine/boot-log.js";
import { vllm } from "../src/engine/vllm/adapter.js";
import { LineSplitter } from "../src/remote/lines.js";

const CHUNK = 64 * 1024;
const PLAIN_SCAN = /[^\u0000]\u0000/;
const T = "2026-01-01T00:00:00.000000000Z";
const gc = (globalThis as { gc?: () => void }).gc ?? ((): void => undefined);
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** The log's chunks, as a pipe hands them over. */
function* chunksOf(kind: "long line" | "many lines"): Generator<string> {
  if (kind === "long line") {
    const body = `${T} (EngineCore_DP0 pid=7) ERROR 01-01 00:00:00 [core.py:1] ${"Worker proc ".repeat(Math.ceil((10 * 1024 * 1024) / 12))}`.slice(0, 10 * 1024 * 1024);
    for (let i = 0; i < body.length; i += CHUNK) yield body.slice(i, i + CHUNK);
    yield "\n";
    return;
  }
  let chunk = "";
  for (let i = 0; i < 1_000_000; i++) {
    chunk +=
      i % 2 === 0
        ? `${T} (EngineCore_DP0 pid=7) INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: ${i} tokens\n`
        : `${T} (EngineCore_DP0 pid=7) INFO 01-01 00:00:00 [model.py:1] Resolved architecture: Qwen3ForCausalLM\n`;
    if (chunk.length >= CHUNK) {
      yield chunk;
      chunk = "";
    }
  }
  yield chunk;
}

async function measure(kind: "long line" | "many lines"): Promise<string> {
  let bytes = 0;
  let scanMs = 0;
  for (const c of chunksOf(kind)) {
    bytes += c.length;
    const t = performance.now();
    PLAIN_SCAN.exec(c);
    scanMs += performance.now() - t;
  }
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const registry = new BootRegistry(Date.now);
  const t0 = performance.now();
  let lines = 0;
  const entry = registry.start({ deployment: kind.replace(" ", "-"), cluster: "bench" }, async (emit) => {
    const progress = progressEvents(emit, Date.now);
    let state: BootState = INITIAL_BOOT;
    progress.node("n1", state);
    const splitter = new LineSplitter((raw) => {
      lines++;
      state = advanceBoot(vllm, state, splitTimestamp(raw).text);
      progress.node("n1", state);
    });
    for (const c of chunksOf(kind)) splitter.push(c);
    splitter.end();
    progress.done();
    throw new Error("end of the log");
  });
  await entry.ended;
  const ms = performance.now() - t0;
  const rss1 = process.memoryUsage().rss;
  gc();
  const heap1 = process.memoryUsage().heapUsed;
  return [
    kind.padEnd(10),
    `${mib(bytes)} in ${lines.toLocaleString("en-US")} line(s)`.padEnd(30),
    `${ms.toFixed(0)} ms`.padStart(8),
    `${(ms / scanMs).toFixed(0)} x a plain scan (${scanMs.toFixed(1)} ms)`.padEnd(32),
    `heap kept +${mib(Math.max(0, heap1 - heap0))}`.padEnd(20),
    `RSS +${mib(Math.max(0, rss1 - rss0))}`.padEnd(16),
    `${entry.events.length} events kept`,
  ].join("  ");
}

if ((globalThis as { gc?: unknown }).gc === undefined) console.log("(run with node --expose-gc for the heap figures after a collection)");
console.log(await measure("long line"));
console.log(await measure("many lines"));
