import assert from "node:assert/strict";
import { test } from "node:test";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { describeThrown, watchAdoptedBoot } from "../../src/boot/up.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import { readyEngine, SERVING_BOOT, servingNode, servingPlan } from "../support/docker-parts.js";

// launcher's own fault mid-boot (a callback that threw): the rollback removes the boot's
// containers, and a rollback that fails too never takes the fault's place.

const BOOT = SERVING_BOOT;

const plan = servingPlan;

/** The nodes of a session whose listing fails (the SSH connection lost just as the rollback lists them). */
class LostOnListing extends Map<string, Docker> {
  override [Symbol.iterator](): MapIterator<[string, Docker]> {
    throw new Error("ssh: connection to n1 lost");
  }
}

test("a callback that throws mid-boot and a rollback that fails too: the callback's fault is thrown, the removal's failure is said", async () => {
  const engine = await readyEngine();
  try {
    const fault = new Error("progress display broke");
    const notes: string[] = [];
    const progress = {
      node: () => {
        throw fault;
      },
      // The fake node has no memory sampler: its guard's warning is not this test's.
      note: (t: string) => void (t.startsWith("warning: memory guard") ? undefined : notes.push(t)),
      done: () => undefined,
    };
    const docker = new LostOnListing([["n1", servingNode([])]]);
    const session = { cluster: { nodes: [] }, docker } as unknown as ClusterSession;
    await assert.rejects(watchAdoptedBoot(plan(engine.url), BOOT, session, { timeoutMs: 20_000, signal: new AbortController().signal, progress }, Date.now()), (e: unknown) => e === fault);
    assert.match(notes[0] ?? "", /^launcher failed while booting d \(progress display broke\); removing every container this boot \(0123456789ab\) created/);
    assert.match(notes[1] ?? "", /^could not remove the containers of boot 0123456789ab \(ssh: connection to n1 lost\): run `launcher down deployment\/d` once the nodes answer$/);
  } finally {
    engine.server.close();
  }
});

test("a callback fault whose notes throw too, and that is no Error: it is what is thrown, and the rollback still removes the containers", async () => {
  const engine = await readyEngine();
  try {
    const removed: string[] = [];
    const progress = {
      node: () => {
        // A callback may throw anything, not only an Error.
        throw "a bare string";
      },
      note: (t: string) => {
        if (!t.startsWith("warning: memory guard")) throw new Error("the note's own fault");
      },
      done: () => undefined,
    };
    const session = { cluster: { nodes: [] }, docker: new Map([["n1", servingNode(removed)]]) } as unknown as ClusterSession;
    await assert.rejects(watchAdoptedBoot(plan(engine.url), BOOT, session, { timeoutMs: 20_000, signal: new AbortController().signal, progress }, Date.now()), (e: unknown) => e === "a bare string");
    assert.deepEqual(removed, ["n1:launcher-d-r0"]);
  } finally {
    engine.server.close();
  }
});

test("what a thrown value says: its message, or the value, on one bounded line, never undefined", () => {
  assert.equal(describeThrown(new Error("a\n  b")), "a b");
  assert.equal(describeThrown("text"), "text");
  assert.equal(describeThrown(undefined), "undefined");
  assert.equal(describeThrown(new Error("")), "Error");
  assert.equal(describeThrown(Object.create(null)), "[object Object]");
  assert.equal(describeThrown("x".repeat(1000)).length, 303);
});

test("a callback fault whose message is \"aborted\" is launcher's own fault, not the watch ending: it is thrown as it is", async () => {
  const engine = await readyEngine();
  try {
    const fault = new Error("aborted");
    const removed: string[] = [];
    const progress = {
      node: () => {
        throw fault;
      },
      note: () => undefined,
      done: () => undefined,
    };
    const session = { cluster: { nodes: [] }, docker: new Map([["n1", servingNode(removed)]]) } as unknown as ClusterSession;
    await assert.rejects(watchAdoptedBoot(plan(engine.url), BOOT, session, { timeoutMs: 20_000, signal: new AbortController().signal, progress }, Date.now()), (e: unknown) => e === fault);
    assert.deepEqual(removed, ["n1:launcher-d-r0"]);
  } finally {
    engine.server.close();
  }
});
