import assert from "node:assert/strict";
import { test } from "node:test";
import { upUseCase } from "../../src/app/up-use-case.js";
import type { ExecOptions, ExecResult } from "../../src/remote/transport.js";
import { Store } from "../../src/store/store.js";
import { RECIPE, type FakeCluster } from "../support/fake-cluster.js";
import { withCluster } from "../support/refusals.js";

// `up` outside a lane claims and reads the plan's nodes while the fabric probe runs
// (src/app/up-use-case.ts launchWhileProbing): which nodes, and what each is asked, the fabric does
// not decide. Over fake nodes, whose answers to the probe's script are held here.

const isProbe = (argv: readonly string[]): boolean => argv[0] === "sh" && argv[1] === "-c" && (argv[2] ?? "").startsWith('hf="$1"; sysfs="$2"');
const scriptOf = (call: { op: string; args: readonly unknown[] }): unknown => (call.op === "exec" ? call.args[0] : undefined);

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
