import assert from "node:assert/strict";
import { test } from "node:test";
import { upUseCase } from "../../src/app/up-use-case.js";
import { preflight, READ_SCRIPT } from "../../src/boot/preflight.js";
import { CLAIM_SCRIPT, claimNodes } from "../../src/claims/claims.js";
import { Interrupted } from "../../src/config/abort.js";
import { UserError } from "../../src/config/errors.js";
import type { ExecOptions, ExecResult } from "../../src/remote/transport.js";
import { Store } from "../../src/store/store.js";
import { RECIPE, type FakeCluster } from "../support/fake-cluster.js";
import type { FakeNode } from "../support/fake-node.js";
import { refused, withCluster } from "../support/refusals.js";
import { until } from "../support/until.js";

// `up` outside a lane claims and reads the plan's nodes while the fabric probe runs
// (src/app/up-use-case.ts launchWhileProbing): which nodes, and what each is asked, the fabric does
// not decide. Over fake nodes, whose answers to the probe's script are held here.

const isProbe = (argv: readonly string[]): boolean => argv[0] === "sh" && argv[1] === "-c" && (argv[2] ?? "").startsWith('hf="$1"; sysfs="$2"');
const scriptOf = (call: { op: string; args: readonly unknown[] }): unknown => (call.op === "exec" ? call.args[0] : undefined);

type Exec = (argv: readonly string[], options?: ExecOptions) => Promise<ExecResult>;
/** Puts `around` between every node's transport and the fake's own answers. */
function intercept(fc: FakeCluster, around: (node: FakeNode, argv: readonly string[], options: ExecOptions | undefined, exec: Exec) => Promise<ExecResult>): void {
  for (const node of fc.nodes) {
    const exec: Exec = node.transport.exec.bind(node.transport);
    Object.assign(node.transport, { exec: (argv: readonly string[], options?: ExecOptions) => around(node, argv, options, exec) });
  }
}
/** The script an argv runs (sh -c SCRIPT sh ARGS...), and its args. */
const scriptArgs = (argv: readonly string[], script: string): readonly string[] | undefined => (argv[0] === "sh" && argv[1] === "-c" && argv[2] === script ? argv.slice(4) : undefined);
/** Waits for `p`, or gives up after 10 s (a bound, not a timing). */
const orGiveUp = async (p: Promise<unknown>): Promise<void> => {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]).finally(() => clearTimeout(timer));
};

/**
 * Every node's read (READ_SCRIPT) takes until it is stopped (or 10 s), as a slow node's would;
 * `events` says, in order, when each read returned and each claim was given back; `asked`, which
 * nodes have been asked.
 */
function readsUntilStopped(fc: FakeCluster): { events: string[]; asked: Set<string> } {
  const events: string[] = [];
  const asked = new Set<string>();
  intercept(fc, async (node, argv, options, exec) => {
    if (scriptArgs(argv, READ_SCRIPT) !== undefined) {
      asked.add(node.node);
      await orGiveUp(new Promise((resolve) => options?.signal?.addEventListener("abort", resolve, { once: true })));
      const answer = await exec(argv, options);
      events.push(`${node.node} read ended`);
      return answer;
    }
    if (scriptArgs(argv, CLAIM_SCRIPT)?.[0] === "release") events.push(`${node.node} claim given back`);
    return exec(argv, options);
  });
  return { events, asked };
}
const readsEndedBeforeClaimsGivenBack = (events: readonly string[]): void => {
  const given = events.findIndex((e) => e.endsWith("claim given back"));
  assert.ok(given > 0, events.join("; "));
  assert.deepEqual(events.slice(0, given).sort(), ["n1 read ended", "n2 read ended"], events.join("; "));
};

/** Holds each node's answer to the probe until `release` settles (or 10 s pass); says what each node was asked meanwhile. */
function holdProbe(fc: FakeCluster, release: Promise<unknown>): { askedDuringProbe: Map<string, unknown[]> } {
  const askedDuringProbe = new Map<string, unknown[]>();
  for (const node of fc.nodes) {
    const t = node.transport;
    const exec = t.exec.bind(t);
    Object.assign(t, {
      exec: async (argv: readonly string[], options?: ExecOptions): Promise<ExecResult> => {
        if (!isProbe(argv)) return exec(argv, options);
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([release, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]).finally(() => clearTimeout(timer));
        askedDuringProbe.set(node.node, node.calls.map(scriptOf).filter((s) => typeof s === "string"));
        return exec(argv, options);
      },
    });
  }
  return { askedDuringProbe };
}

test("outside a lane, up claims and reads the plan's nodes while the fabric probe runs, then boots on those reads: each node read once", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    try {
      const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
      // The probe answers only once every node was read: up that waited for the probe would wait 10 s and fail the look below.
      let readAll: () => void = () => undefined;
      const allRead = new Promise<void>((resolve) => (readAll = resolve));
      const watch = setInterval(() => fc.nodes.every((n) => n.calls.some((c) => scriptOf(c) === "READ_SCRIPT")) && readAll(), 5);
      const { askedDuringProbe } = holdProbe(fc, allRead);
      try {
        const r = await upUseCase({ ref: "practice-2x" }, fc.cluster, plan, fc.upHost(store, plan));
        assert.equal(r.status, "ready");
      } finally {
        clearInterval(watch);
      }
      for (const node of fc.nodes) {
        assert.deepEqual(askedDuringProbe.get(node.node)?.slice(-2), ["CLAIM_SCRIPT", "READ_SCRIPT"], `${node.node}: claimed, then read, while the probe ran`);
        assert.equal(node.calls.filter((c) => scriptOf(c) === "READ_SCRIPT").length, 1, `${node.node}: read once: the boot used the reads made during the probe`);
        assert.equal(node.claim, undefined, `${node.node}: the claim was given back`);
      }
    } finally {
      store.close();
    }
  }));

test("a plan of the probe's findings that runs on other nodes than the first plan boots under claims of its own nodes; the first plan's are given back", () =>
  withCluster({ nodes: 3 }, async (fc) => {
    const store = new Store(":memory:");
    try {
      const first = fc.plan(RECIPE, { deployment: "practice-2x" });
      const moved = fc.plan(RECIPE, { deployment: "practice-2x", nodes: ["n1", "n3"] });
      const host = fc.upHost(store, moved);
      const r = await upUseCase({ ref: "practice-2x" }, fc.cluster, first, host);
      assert.equal(r.status, "ready");
      assert.deepEqual(fc.started.sort(), ["n1/launcher-practice-2x-r0", "n3/launcher-practice-2x-r1"]);
      const n2 = fc.node("n2");
      assert.equal(n2.calls.filter((c) => scriptOf(c) === "CLAIM_SCRIPT").length, 2, "n2 claimed for the first plan, then given back");
      for (const node of fc.nodes) assert.equal(node.claim, undefined, `${node.node}: no claim left`);
    } finally {
      store.close();
    }
  }));

test("a failed claim is said after what the probe says of the nodes: a node the probe leaves unplannable is the error, not the busy claim", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    const other = await claimNodes(new Map([["n2", fc.node("n2").transport]]), { command: "launcher up other", deployment: "other", leaseMs: 60_000, now: () => new Date(), note: () => undefined, onLost: () => undefined });
    try {
      const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
      const host = { ...fc.upHost(store, plan), plan: () => {
        throw new UserError("node n2 has no fabric IP (neither in the cluster file nor detected)");
      } };
      await refused(upUseCase({ ref: "practice-2x" }, fc.cluster, plan, host), UserError, /^node n2 has no fabric IP/);
      assert.equal(fc.node("n1").claim, undefined, "n1's claim, taken first, was given back");
    } finally {
      await other.release();
      store.close();
    }
  }));

test("interrupted while a node's claim hangs: up ends at once, saying it was probing, and the claims that come later are given back", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    try {
      let letClaimGo: () => void = () => undefined;
      const claimHeld = new Promise<void>((resolve) => (letClaimGo = resolve));
      intercept(fc, async (node, argv, options, exec) => {
        if (node.node === "n2" && scriptArgs(argv, CLAIM_SCRIPT)?.[0] === "take") await orGiveUp(claimHeld);
        return exec(argv, options);
      });
      const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
      const stop = new AbortController();
      const host = { ...fc.upHost(store, plan), signal: stop.signal };
      const started = Date.now();
      const running = upUseCase({ ref: "practice-2x" }, fc.cluster, plan, host);
      await until("n1 claimed, n2's claim under way", () => fc.node("n1").claim !== undefined, 10_000);
      stop.abort();
      await assert.rejects(running, (e: unknown) => e instanceof Interrupted && /while probing the nodes' fabric; nothing was started/.test(e.message));
      assert.ok(Date.now() - started < 9_000, "not held until the claim's own end");
      letClaimGo();
      await until("every claim given back once it came", () => fc.nodes.every((n) => n.claim === undefined), 10_000);
      assert.deepEqual(fc.started, []);
    } finally {
      store.close();
    }
  }));

test("a plan that fails once the probe answers: the reads made meanwhile end before the claims are given back", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    try {
      const { events } = readsUntilStopped(fc);
      const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
      const host = { ...fc.upHost(store, plan), plan: () => {
        throw new UserError("node n2 has no fabric IP (neither in the cluster file nor detected)");
      } };
      await refused(upUseCase({ ref: "practice-2x" }, fc.cluster, plan, host), UserError, /^node n2 has no fabric IP/);
      readsEndedBeforeClaimsGivenBack(events);
    } finally {
      store.close();
    }
  }));

test("a boot that ends before it asks for the reads handed to it (made while the probe ran) ends them before the claims are given back", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    try {
      const { events } = readsUntilStopped(fc);
      const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
      const base = fc.upHost(store, plan);
      // The boot's first step after the probe fails: here its first line cannot be said.
      const host = { ...base, say: (line: string) => {
        if (line.startsWith("launcher: starting")) throw new Error("stdout is gone");
        base.say(line);
      } };
      const started = Date.now();
      await assert.rejects(upUseCase({ ref: "practice-2x" }, fc.cluster, plan, host), /^Error: stdout is gone$/);
      assert.ok(Date.now() - started < 9_000, "the reads were stopped, not waited out");
      readsEndedBeforeClaimsGivenBack(events);
      assert.ok(fc.nodes.every((n) => n.claim === undefined), "every claim given back");
    } finally {
      store.close();
    }
  }));

test("an up interrupted while the reads it asked are under way ends once they have returned", () =>
  withCluster({}, async (fc) => {
    const { events, asked } = readsUntilStopped(fc);
    const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
    const stop = new AbortController();
    const running = fc.up(plan, { signal: stop.signal }).finally(() => events.push("up ended"));
    await until("both nodes asked", () => asked.size === 2, 10_000);
    stop.abort();
    await assert.rejects(running, Interrupted);
    assert.deepEqual(events.slice(0, 2).sort(), ["n1 read ended", "n2 read ended"], events.join("; "));
    assert.deepEqual(events.slice(2), ["up ended"], events.join("; "));
    assert.deepEqual(fc.started, []);
  }));

test("a preflight that reads the nodes itself (a lane swap's) and is interrupted ends once its reads have returned", () =>
  withCluster({}, async (fc) => {
    const { events, asked } = readsUntilStopped(fc);
    const plan = fc.plan(RECIPE, { deployment: "practice-2x" });
    const stop = new AbortController();
    const checking = preflight(plan, fc.session, stop.signal).finally(() => events.push("preflight ended"));
    await until("both nodes asked", () => asked.size === 2, 10_000);
    stop.abort();
    await assert.rejects(checking, Interrupted);
    assert.deepEqual(events.slice(0, 2).sort(), ["n1 read ended", "n2 read ended"], events.join("; "));
    assert.deepEqual(events.slice(2), ["preflight ended"], events.join("; "));
  }));
