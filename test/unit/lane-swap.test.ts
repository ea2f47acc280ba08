import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { LABELS } from "../../src/contract/deployment.js";
import type { Plan } from "../../src/plan/plan.js";
import { Store } from "../../src/store/store.js";
import { upInLane, type LaneUpOptions } from "../../src/lanes/lane.js";
import { FakeCluster, IMAGE, RECIPE, UP_TO_MAX_LEN, WORKER_CONNECTED } from "../support/fake-cluster.js";
import { startFakeEngine, type FakeEngine } from "../support/fake-engine.js";
import { FakeGateway } from "../support/fake-gateway.js";

// A lane swap whose new boot fails leaves the lane on its old deployment whenever the old one
// still runs: the lane's record, the swap's history, what runs on the nodes, and where the
// daemon's gateway sends a chat to the lane (test/support/fake-gateway.ts: the daemon's route
// cache and route table over a discovery poll of the nodes, reading the store through its own
// connection). Four fake nodes (test/support) and a real store: lane main serves `old` on n3, n4
// (its engine answering, and gone with its head's container); the new recipe either fails its
// checks before any container starts, or starts and its head exits at loading, as an engine out
// of memory does.

const dir = mkdtempSync(path.join(tmpdir(), "launcher-lane-swap-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const OOM_LINE = "(EngineCore_DP0 pid=1) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

interface Lane {
  readonly fc: FakeCluster;
  readonly store: Store;
  readonly engine: FakeEngine;
  /** The daemon's gateway over the nodes and the store. */
  readonly gw: FakeGateway;
  /** Where the old deployment's engine listens (its labels' endpoint). */
  readonly oldEndpoint: string;
  /** The new recipe's plan on `nodes` (n1, n2 unless named). */
  readonly planNew: (nodes?: readonly string[]) => Plan;
  readonly options: LaneUpOptions;
  /** Whether the nodes' claims were given back. */
  readonly released: () => boolean;
}

/** Lane main serving `old` on n3, n4, and the recipe `new` whose head dies at loading. */
async function laneServingOld(name: string): Promise<Lane> {
  const fc = await FakeCluster.start({ nodes: 4 });
  const old = fc.place(fc.plan(RECIPE, { nodes: ["n3", "n4"], lane: "main", deployment: "old" }, "old"));
  const url = new URL(old.endpoint);
  const engine = await startFakeEngine({ host: url.hostname, port: Number(url.port), model: old.served_model });
  // Its engine goes with its head's container, as a removed container's process does.
  const n3 = fc.node("n3");
  const exited = n3.onExit;
  n3.onExit = (c) => {
    exited(c);
    if (c.name === "launcher-old-r0") void engine.close();
  };
  fc.script = (c, n) => {
    if (c.labels[LABELS.deployment] !== "new") return fc.serve(c, n);
    if (c.labels[LABELS.rank] !== "0") return n.say(c.name, ...WORKER_CONNECTED);
    n.say(c.name, ...UP_TO_MAX_LEN, OOM_LINE);
    n.exit(c.name, 1);
  };
  const file = path.join(dir, `${name}.db`);
  const store = new Store(file);
  store.setLane({ name: "main", cluster: fc.cluster.name, deployment: "old", recipe: "old", served_model: old.served_model, state: "serving", since: "2026-01-01T00:00:00.000Z" });
  let released = false;
  const options: LaneUpOptions = {
    lane: "main",
    store,
    now: () => new Date(),
    drainMs: 0,
    what: "launcher up (this test)",
    claim: async () => ({ release: async () => void (released = true) }),
    findings: [],
    timeoutMs: 20_000,
    signal: new AbortController().signal,
    push: false,
    progress: fc.progress(),
  };
  const gw = await FakeGateway.start(fc, file);
  await gw.poll();
  // Before the swap, a chat to the lane reaches the old engine.
  assert.deepEqual(await routedTo(gw), { endpoint: old.endpoint, deployment: "old" });
  return { fc, store, engine, gw, oldEndpoint: old.endpoint, planNew: (nodes) => fc.plan(RECIPE, { nodes: nodes ?? ["n1", "n2"], lane: "main", deployment: "new" }, "new"), options, released: () => released };
}

/** The swap of lane main to `new` (on `nodes` when named, else where the lane places it), which must fail: its error. */
async function failedSwap(l: Lane, nodes?: readonly string[]): Promise<unknown> {
  return upInLane((on) => l.planNew(on ?? nodes), nodes !== undefined, l.fc.session, l.options).then(
    () => assert.fail("the swap succeeded"),
    (e: unknown) => e,
  );
}

/** Where the gateway routes lane main after a discovery poll; a refusal's code when it does not. */
async function routedTo(gw: FakeGateway): Promise<{ endpoint: string; deployment: string } | { code: string }> {
  await gw.poll();
  const r = gw.resolve("main");
  return r.kind === "route" ? { endpoint: r.target.endpoint, deployment: r.target.deployment } : { code: r.kind === "unavailable" ? r.code : r.kind };
}

/** The lane still serves the old model: routed to its endpoint, and a chat to the lane is answered by its engine. */
async function stillServesOld(l: Lane): Promise<void> {
  assert.deepEqual(await routedTo(l.gw), { endpoint: l.oldEndpoint, deployment: "old" }, "the lane routes to the old deployment");
  const heard = l.engine.chats.length;
  const answer = await l.gw.chat("main");
  assert.deepEqual([answer.status, answer.model], [200, l.store.lane("main")?.served_model], JSON.stringify(answer));
  assert.equal(l.engine.chats.length, heard + 1, "the old deployment's engine answered it");
}

async function close(l: Lane): Promise<void> {
  await l.gw.close();
  l.store.close();
  await l.engine.close();
  await l.fc.close();
}

const OLD_RUNS = ["n3:launcher-old-r0:running", "n4:launcher-old-r1:running"];

test("a new recipe refused by its checks on free nodes: the lane stays on the old one, nothing stopped, the swap failed (disjoint)", async () => {
  const l = await laneServingOld("refused-disjoint");
  try {
    for (const n of ["n1", "n2"]) l.fc.node(n).images.delete(IMAGE);
    const error = await failedSwap(l);
    assert.match(String(error), /preflight failed for new; no container was started/);
    assert.match(String(error), /image img:local is missing on n1, n2/);
    const lane = l.store.lane("main");
    assert.deepEqual([lane?.state, lane?.deployment, lane?.switching_to], ["serving", "old", undefined]);
    assert.deepEqual(l.fc.containers(), OLD_RUNS, "the old deployment was not stopped");
    await stillServesOld(l);
    const swaps = l.store.swaps("main", 10);
    assert.deepEqual(swaps.map((s) => [s.from_deployment, s.to_deployment, s.mode, s.outcome]), [["old", "new", "disjoint", "failed"]]);
    assert.match(swaps[0]?.error ?? "", /preflight failed for new/);
    assert.ok(l.released(), "the nodes' claims were given back");
  } finally {
    await close(l);
  }
});

test("a swap onto the old deployment's own nodes refused by its checks never stops the old one nor marks the lane switching (overlap)", async () => {
  const l = await laneServingOld("refused-overlap");
  try {
    for (const n of ["n3", "n4"]) l.fc.node(n).images.delete(IMAGE);
    const error = await failedSwap(l, ["n3", "n4"]);
    assert.match(String(error), /preflight failed for new; no container was started/);
    const lane = l.store.lane("main");
    assert.deepEqual([lane?.state, lane?.deployment], ["serving", "old"]);
    assert.deepEqual(l.fc.containers(), OLD_RUNS, "a typo must not cost the lane its model");
    await stillServesOld(l);
    assert.deepEqual(l.store.swaps("main", 10).map((s) => [s.mode, s.outcome]), [["overlap", "failed"]]);
    assert.ok(l.released());
  } finally {
    await close(l);
  }
});

test("a new boot that fails after its containers started (free nodes): only its own containers are rolled back, the lane stays on the old one", async () => {
  const l = await laneServingOld("started-disjoint");
  try {
    const error = await failedSwap(l);
    assert.match(String(error), /boot of new failed/);
    assert.deepEqual([...l.fc.started].sort(), ["n1/launcher-new-r0", "n2/launcher-new-r1"], "the new boot did start its containers");
    assert.deepEqual(l.fc.containers(), OLD_RUNS, "what ran before runs still, and nothing else");
    await stillServesOld(l);
    const lane = l.store.lane("main");
    assert.deepEqual([lane?.state, lane?.deployment], ["serving", "old"]);
    assert.deepEqual(l.store.swaps("main", 10).map((s) => [s.to_deployment, s.mode, s.outcome]), [["new", "disjoint", "failed"]]);
    assert.ok(l.released());
  } finally {
    await close(l);
  }
});

test("a new boot on the old deployment's own nodes that fails after the old one was stopped: the lane is empty, and the error says so", async () => {
  const l = await laneServingOld("started-overlap");
  try {
    const error = await failedSwap(l, ["n3", "n4"]);
    assert.match(String(error), /boot of new failed.*; lane main is now empty \(its old deployment was stopped for this one\)/);
    assert.deepEqual(l.fc.containers(), [], "the old one was stopped for it, the new one rolled back");
    assert.deepEqual(await routedTo(l.gw), { code: "lane_empty" }, "a chat to the lane is told it is empty, not sent to a dead engine");
    const lane = l.store.lane("main");
    assert.deepEqual([lane?.state, lane?.deployment, lane?.switching_to], ["empty", undefined, undefined]);
    assert.deepEqual(l.store.swaps("main", 10).map((s) => [s.from_deployment, s.to_deployment, s.mode, s.outcome]), [["old", "new", "overlap", "failed"]]);
  } finally {
    await close(l);
  }
});
