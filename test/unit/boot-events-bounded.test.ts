import assert from "node:assert/strict";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { RemoteError } from "../../src/config/errors.js";
import { BootRegistry, compactEvents, MAX_BOOT_EVENTS, type BootEntry } from "../../src/supervise/boots.js";
import { progressEvents, type UpEvent } from "../../src/boot/up-events.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, type BootState } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { LineSplitter } from "../../src/remote/lines.js";

// A collection on demand, so that the heap read after a boot is what the daemon keeps of it.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heapUsed = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const T = "2026-01-01T00:00:00.000000000Z";
const CORE = "(EngineCore_DP0 pid=7)";
// A log that changes its figures line after line and repeats its phase lines (what a node shows
// changes on every KV cache line; a phase never goes back, so the architecture lines after the
// first change nothing).
const flipping = (i: number): string =>
  i % 3 === 1
    ? `${T} ${CORE} INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: ${i} tokens`
    : i % 3 === 0
      ? `${T} ${CORE} INFO 01-01 00:00:00 [model.py:1] Resolved architecture: Qwen3ForCausalLM`
      : `${T} ${CORE} INFO 01-01 00:00:00 [core.py:1] step ${i}`;
const ENDING = [
  `${T} ${CORE} INFO 01-01 00:00:01 [gpu_model_runner.py:1] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 10%`,
  `${T} ${CORE} ERROR 01-01 00:00:02 [core.py:1] EngineCore failed to start.`,
  `${T} ${CORE} ERROR 01-01 00:00:02 [core.py:1] Traceback (most recent call last):`,
  `${T} ${CORE} ERROR 01-01 00:00:02 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.00 GiB is free.`,
];

/**
 * The boot watcher's path in the daemon, in process: the log's bytes through the stream's line
 * reader in pipe-sized chunks, each line through the parser, each state through the events a
 * daemon's boot says, into the registry's entry. The boot fails on its last line, as up says it.
 */
async function bootOf(registry: BootRegistry, deployment: string, lines: number): Promise<{ entry: BootEntry; ms: number }> {
  const t0 = performance.now();
  const entry = registry.start({ deployment, cluster: "c" }, async (emit) => {
    const progress = progressEvents(emit, Date.now);
    let state: BootState = INITIAL_BOOT;
    // As up's watcher does when a container starts.
    progress.node("n1", state);
    const splitter = new LineSplitter((raw) => {
      state = advanceBoot(vllm, state, splitTimestamp(raw).text);
      progress.node("n1", state);
    });
    let chunk = "";
    for (let i = 0; i < lines; i++) {
      chunk += `${flipping(i)}\n`;
      if (chunk.length >= 64 * 1024) {
        splitter.push(chunk);
        chunk = "";
      }
    }
    splitter.push(`${chunk}${ENDING.join("\n")}\n`);
    splitter.end();
    progress.done();
    throw new RemoteError("n1 (rank 0)", `boot of ${deployment} failed: the engine failed`, `cause: ${state.cause ?? "?"}\nlast lines of n1's log:\n${state.lastLines.slice(-15).join("\n")}`);
  });
  await entry.ended;
  return { entry, ms: performance.now() - t0 };
}

test("a 1,000,000-line boot log: the daemon keeps a bounded number of events, the phases and the cause, in linear time and bounded memory", async () => {
  const registry = new BootRegistry(Date.now);
  const base = heapUsed();
  const small = await bootOf(registry, "small", 100_000);
  const afterSmall = heapUsed();
  const large = await bootOf(registry, "large", 1_000_000);
  const afterLarge = heapUsed();

  for (const { entry } of [small, large]) {
    assert.ok(entry.events.length <= MAX_BOOT_EVENTS, `${entry.identity.deployment}: ${entry.events.length} events`);
    const phases = entry.events.flatMap((e) => (e.type === "node" ? [e.state.phase] : []));
    for (const p of ["starting", "kv-cache", "loading", "graph-capture"]) assert.ok(phases.includes(p as (typeof phases)[number]), `${p} in ${[...new Set(phases)].join(", ")}`);
    const last = entry.events.at(-1);
    assert.equal(last?.type, "error");
    assert.match(last?.type === "error" && last.error.kind === "remote" ? (last.error.detail ?? "") : "", /^cause: torch\.OutOfMemoryError: CUDA out of memory/);
    assert.equal(entry.events[0]?.type, "accepted");
  }
  // What the daemon keeps of a boot does not grow with its log: ten times the lines, at most about
  // the same heap (a few MB of room for what V8 keeps compiled or cached meanwhile).
  const keptSmall = Math.max(0, afterSmall - base);
  const keptLarge = Math.max(0, afterLarge - afterSmall);
  assert.ok(keptLarge < 3 * keptSmall + 4 * 1024 * 1024, `heap kept: 100 k lines ${keptSmall} B, 1 M lines ${keptLarge} B`);
  // Linear time: ten times the lines, about ten times the time.
  assert.ok(large.ms / small.ms < 20, `100 k lines ${small.ms.toFixed(0)} ms, 1 M lines ${large.ms.toFixed(0)} ms`);
});

const node = (phase: BootState["phase"], figure: string, t: number): UpEvent => ({ type: "node", node: "n1", state: { phase, figures: { kv_tokens: figure }, ready: false, lastLines: [] }, t });

test("compactEvents keeps the steps, each node's phases (first and latest) and the end; at most half the cap", () => {
  const events: UpEvent[] = [{ type: "accepted", deployment: "d", cluster: "c", t: 0 }, { type: "note", text: "preflight ...", t: 1 }];
  for (let i = 0; i < 3000; i++) events.push(node(i % 2 === 0 ? "loading" : "kv-cache", String(i), 2 + i));
  events.push({ type: "memory", node: "n1", sample: { totalKiB: 1, availableKiB: 1 }, t: 5000 }, { type: "memory", node: "n1", sample: { totalKiB: 1, availableKiB: 0 }, t: 5001 });
  events.push({ type: "error", error: { kind: "bug", message: "x" }, t: 5002 });
  const kept = compactEvents(events, 100);
  assert.deepEqual(
    kept.map((e) => (e.type === "node" ? `${e.state.phase} ${e.state.figures.kv_tokens}` : e.type === "memory" ? `memory ${e.sample.availableKiB}` : e.type)),
    ["accepted", "note", "loading 0", "kv-cache 1", "kv-cache 2999", "memory 0", "error"],
  );
});

test("compactEvents, when the steps alone are too many, keeps the first and the last and says how many it left out", () => {
  const events: UpEvent[] = [{ type: "accepted", deployment: "d", cluster: "c", t: 0 }];
  for (let i = 1; i <= 300; i++) events.push({ type: "note", text: `step ${i}`, t: i });
  events.push({ type: "done", t: 301 }, { type: "error", error: { kind: "bug", message: "x" }, t: 302 });
  const kept = compactEvents(events, 100);
  assert.equal(kept.length, 50);
  assert.equal(kept[0]?.type, "accepted");
  assert.equal(kept.at(-1)?.type, "error");
  assert.ok(kept.some((e) => e.type === "note" && e.text === `(${303 - 49} events of this boot are not kept)`), JSON.stringify(kept.map((e) => (e.type === "note" ? e.text : e.type))));
});
