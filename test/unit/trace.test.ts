import { test } from "node:test";
import assert from "node:assert/strict";
import { commandName, formatTrace, MAX_SPANS, runTraced, Trace, traced, tracedTransport, traceMark } from "../../src/remote/trace.js";
import type { Transport } from "../../src/remote/transport.js";

/** A clock the test moves by hand. */
function handClock(start = 1000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

test("a span keeps its start offset from the trace's origin and its duration; a mark has none", () => {
  const clock = handClock();
  const trace = new Trace(clock.now);
  clock.advance(5);
  const end = trace.begin("preflight");
  clock.advance(20);
  trace.mark("ready line", "spark-1");
  clock.advance(10);
  end();
  end(); // a second end changes nothing
  assert.deepEqual(trace.record(), {
    spans: [
      { name: "preflight", start_ms: 5, ms: 30 },
      { name: "ready line", node: "spark-1", start_ms: 25, ms: 0 },
    ],
    dropped: 0,
  });
});

test("spans are listed by start, the enclosing one first on a tie", () => {
  const clock = handClock();
  const trace = new Trace(clock.now);
  const outer = trace.begin("up");
  const inner = trace.begin("same-name check");
  clock.advance(3);
  inner();
  clock.advance(3);
  outer();
  assert.deepEqual(trace.record().spans.map((s) => s.name), ["up", "same-name check"]);
});

test("the spans kept are bounded: the first and the last half kept, the middle counted and said", () => {
  let t = 0;
  const trace = new Trace(() => t++);
  for (let i = 0; i < MAX_SPANS * 3 + 7; i++) trace.mark(`m${i}`);
  trace.mark("ready line");
  const record = trace.record();
  const names = record.spans.map((s) => s.name);
  assert.equal(record.spans.length, MAX_SPANS);
  assert.equal(record.dropped, MAX_SPANS * 2 + 8);
  assert.deepEqual(names.slice(0, 2), ["m0", "m1"], "the first spans");
  assert.equal(names[MAX_SPANS / 2 - 1], `m${MAX_SPANS / 2 - 1}`);
  assert.equal(names[MAX_SPANS / 2], `m${MAX_SPANS * 3 + 8 - MAX_SPANS / 2}`, "then the last ones, in order");
  assert.equal(names.at(-1), "ready line", "the last span survives a long boot");
  assert.match(formatTrace(record).at(-1) ?? "", new RegExp(`${MAX_SPANS * 2 + 8} more spans not kept`));
});

test("formatTrace: one line per span with offset, duration and node", () => {
  const lines = formatTrace({ spans: [{ name: "docker run", node: "spark-2", start_ms: 1234, ms: 56 }, { name: "ready line", start_ms: 2000, ms: 0 }], dropped: 0 });
  assert.equal(lines.length, 3);
  assert.match(lines[1] ?? "", /^\s+\+\s*1\.234 s\s+0\.056 s\s+spark-2\s+docker run$/);
  assert.match(lines[2] ?? "", /^\s+\+\s*2\.000 s\s+-\s+ready line$/);
});

test("formatTrace: launcher's own process, when the record says it: its start before the trace and its CPU", () => {
  const lines = formatTrace({ spans: [], dropped: 0, process_ms: 183, cpu_ms: 412 });
  assert.equal(lines.at(-1), "  launcher's own process: 0.183 s before the trace began (Node's start, launcher's modules); 0.412 s of CPU in all");
  assert.equal(formatTrace({ spans: [], dropped: 0 }).length, 1, "a record without them (a bench's old one) prints no such line");
});

test("commandName names the program and subcommand only, a script by its first word, never an argument's value", () => {
  assert.equal(commandName(["docker", "image", "inspect", "--format", "{{.Id}}", "--", "secret-image"]), "docker image");
  assert.equal(commandName(["docker", "--context=secret", "ps"]), "docker");
  assert.equal(commandName(["cat", "/home/u/secret-path"]), "cat");
  assert.equal(commandName(["mkdir", "secretname"]), "mkdir");
  assert.equal(commandName(["sh", "-c", "\n  missing=''\nfor p in ...", "sh", "ro:/x"]), "sh -c missing");
  assert.equal(commandName(["sh", "-c", "x".repeat(100)]).length, 48);
});

test("traced and traceMark add to the trace of their async context only, and run fn without one", async () => {
  const clock = handClock();
  const a = new Trace(clock.now);
  const b = new Trace(clock.now);
  const inA = runTraced(a, async () => {
    await traced("step", "n1", async () => {
      await new Promise((r) => setImmediate(r));
      clock.advance(4);
    });
    traceMark("after");
    return "a";
  });
  const inB = runTraced(b, () => traced("other", undefined, async () => "b"));
  assert.deepEqual(await Promise.all([inA, inB]), ["a", "b"]);
  assert.deepEqual(a.record().spans.map((s) => s.name), ["step", "after"]);
  assert.deepEqual(b.record().spans.map((s) => s.name), ["other"]);
  // No trace: the function just runs, and a failure passes through unchanged.
  assert.equal(await traced("none", undefined, async () => 7), 7);
  await assert.rejects(runTraced(a, () => traced("fails", undefined, async () => Promise.reject(new Error("boom")))), /boom/);
  assert.ok(a.record().spans.some((s) => s.name === "fails"));
});

test("tracedTransport: each exec is a span on its node, named by its command; outside a trace it is the transport's own", async () => {
  const calls: string[][] = [];
  const inner: Transport = {
    node: "spark-3",
    exec: async (argv) => {
      calls.push([...argv]);
      return { code: 0, stdout: "ok", stderr: "" };
    },
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("unused");
    },
  };
  const t = tracedTransport(inner);
  const trace = new Trace(handClock().now);
  const r = await runTraced(trace, () => t.exec(["cat", "/proc/meminfo"]));
  assert.equal(r.stdout, "ok");
  await t.exec(["true"]);
  assert.equal(calls.length, 2);
  assert.deepEqual(trace.record().spans, [{ name: "ssh cat", node: "spark-3", start_ms: 0, ms: 0 }]);
});
