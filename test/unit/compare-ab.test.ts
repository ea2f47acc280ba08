import assert from "node:assert/strict";
import { test } from "node:test";
import { abInOneLane, type AbPorts } from "../../src/measure/compare/ab.js";
import { Interrupted } from "../../src/config/abort.js";
import { compare } from "../../src/measure/compare/compare.js";
import { textTable } from "../../src/measure/compare/table.js";
import { evalRun, series } from "./compare-fixture.js";

/** Ports that record what was asked of them and answer from the fixture: B's recipe is the faster. */
function fakePorts(failOn?: string): { ports: AbPorts; calls: string[]; lane: { serving?: string } } {
  const calls: string[] = [];
  const lane: { serving?: string } = {};
  const ports: AbPorts = {
    up: async (recipe, name) => {
      calls.push(`up ${recipe} --lane ${name}`);
      if (recipe === failOn) throw new Error(`boot of ${recipe} failed`);
      lane.serving = recipe;
    },
    bench: async (target) => {
      calls.push(`bench ${target} (${lane.serving})`);
      const fast = lane.serving === "b";
      return series(`${lane.serving}-series`, { rate: fast ? 60 : 50, ttftMs: fast ? 40 : 50, noise: 0.03 }, 3, fast ? 2 : 1);
    },
    eval: async (target) => {
      calls.push(`eval ${target} (${lane.serving})`);
      return evalRun(`${lane.serving}-eval`, 50, (i) => i < 45);
    },
    say: () => undefined,
  };
  return { ports, calls, lane };
}

test("compare --run boots A in the lane, benches and evaluates it there, swaps the lane to B, the same, and ends with the lane serving B", async () => {
  const { ports, calls, lane } = fakePorts();
  const [a, b] = await abInOneLane("a", "b", "chat", ports, new AbortController().signal);
  assert.deepEqual(calls, ["up a --lane chat", "bench chat (a)", "eval chat (a)", "up b --lane chat", "bench chat (b)", "eval chat (b)"]);
  assert.equal(lane.serving, "b");
  assert.deepEqual([a.label, b.label], ["a", "b"]);
  const c = compare(a, b);
  assert.equal(c.bench.find((m) => m.metric === "output_throughput" && m.concurrency === 4)?.verdict, "faster");
  assert.equal(c.eval?.verdict, "within noise");
  assert.match(textTable(c), /output tok\/s/);
});

test("without an eval set, compare --run benches both sides and asks for no answers", async () => {
  const { ports, calls } = fakePorts();
  const { eval: _dropped, ...benchOnly } = ports;
  const [a, b] = await abInOneLane("a", "b", "chat", benchOnly, new AbortController().signal);
  assert.deepEqual(calls, ["up a --lane chat", "bench chat (a)", "up b --lane chat", "bench chat (b)"]);
  assert.equal(a.eval, undefined);
  assert.equal(b.eval, undefined);
});

test("a failed boot of B stops the A/B with that boot's error: nothing is measured on a lane that does not serve B", async () => {
  const { ports, calls } = fakePorts("b");
  await assert.rejects(abInOneLane("a", "b", "chat", ports, new AbortController().signal), /boot of b failed/);
  assert.deepEqual(calls, ["up a --lane chat", "bench chat (a)", "eval chat (a)", "up b --lane chat"]);
});

test("Ctrl-C during A's bench: compare --run throws Interrupted and boots nothing of B (the bench port returns what it finished, as bench does)", async () => {
  const controller = new AbortController();
  const { ports, calls } = fakePorts();
  const stopped: AbPorts = {
    ...ports,
    bench: async (target) => {
      calls.push(`bench ${target}`);
      controller.abort(new Interrupted("SIGINT"));
      return [];
    },
  };
  await assert.rejects(abInOneLane("a", "b", "chat", stopped, controller.signal), (e: unknown) => e instanceof Interrupted && e.signalName === "SIGINT");
  assert.deepEqual(calls, ["up a --lane chat", "bench chat"], "no eval of A, no up of B");
});

test("Ctrl-C while A boots through the daemon (the watch only detaches and returns): neither A's bench nor B's boot starts", async () => {
  const controller = new AbortController();
  const { ports, calls } = fakePorts();
  const detached: AbPorts = {
    ...ports,
    up: async (recipe, name) => {
      calls.push(`up ${recipe} --lane ${name}`);
      controller.abort(new Interrupted("SIGINT"));
    },
  };
  await assert.rejects(abInOneLane("a", "b", "chat", detached, controller.signal), Interrupted);
  assert.deepEqual(calls, ["up a --lane chat"]);
});

test("an already interrupted compare --run starts nothing", async () => {
  const controller = new AbortController();
  controller.abort(new Interrupted("SIGTERM"));
  const { ports, calls } = fakePorts();
  await assert.rejects(abInOneLane("a", "b", "chat", ports, controller.signal), Interrupted);
  assert.deepEqual(calls, []);
});
