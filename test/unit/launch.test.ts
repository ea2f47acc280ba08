import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { stampBoot } from "../../src/boot/boot.js";
import type { UpOptions } from "../../src/boot/up.js";
import { Detached } from "../../src/config/abort.js";
import { RemoteError, UserError } from "../../src/config/errors.js";
import { LABELS } from "../../src/contract/deployment.js";
import { recordedUp, recordedWatch } from "../../src/boot/launch.js";
import type { Plan } from "../../src/plan/plan.js";
import { decodeSavedPlan } from "../../src/plan/saved.js";
import { Store } from "../../src/store/store.js";
import { API_UP, FakeCluster, HEAD_WAITING, RECIPE, UP_TO_MAX_LEN, WORKER_CONNECTED } from "../support/fake-cluster.js";
import { startFakeEngine } from "../support/fake-engine.js";

// What src/boot/launch.ts writes of a boot, run for real over a FakeCluster (test/support) and a
// real store: a refusal is no boot, an interrupt is, the launch id is in the store before the
// first container, a boot a daemon may leave is kept until it ends (and stays when the daemon
// leaves it), an adopted boot continues its own history row.

const dir = mkdtempSync(path.join(tmpdir(), "launcher-launch-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let stores = 0;
const newStore = (): Store => new Store(path.join(dir, `${stores++}.db`));
const now = (): Date => new Date();

const OOM_LINE = "(EngineCore_DP0 pid=1) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

function options(fc: FakeCluster, more: Partial<UpOptions> = {}): UpOptions {
  return { timeoutMs: 20_000, signal: new AbortController().signal, progress: fc.progress(), push: false, ...more };
}

async function withCluster(run: (fc: FakeCluster, store: Store) => Promise<void>): Promise<void> {
  const fc = await FakeCluster.start({ nodes: 2 });
  const store = newStore();
  try {
    await run(fc, store);
  } finally {
    store.close();
    await fc.close();
  }
}

const rejection = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => assert.fail("it succeeded"),
    (e: unknown) => e,
  );

test("a ready boot: its launch id is in the store before its first container, its row ends ready with each node's phases, the deployment is ready with its plan kept", () =>
  withCluster(async (fc, store) => {
    const plan = fc.plan(RECIPE);
    const atRun: { label: string | undefined; launched: string | undefined }[] = [];
    fc.script = (c, n) => {
      atRun.push({ label: c.labels[LABELS.boot], launched: store.launchedBoot(plan.cluster, plan.deployment) });
      return fc.serve(c, n);
    };
    const r = await recordedUp(plan, fc.session, options(fc), store, now);
    assert.equal(r.status, "ready");
    assert.equal(atRun.length, 2);
    for (const a of atRun) assert.deepEqual(a, { label: r.boot, launched: r.boot });
    const [row, ...more] = store.history(undefined, 10);
    assert.deepEqual(more, []);
    assert.equal(row?.outcome, "ready");
    assert.deepEqual(row?.nodes, ["n1", "n2"]);
    assert.deepEqual([...new Set(row?.phases.map((p) => p.node))].sort(), ["n1", "n2"]);
    assert.ok(store.deploymentServed(plan.cluster, plan.deployment));
    const saved = decodeSavedPlan(store.savedPlan(plan.cluster, plan.deployment) ?? "");
    assert.ok(saved.ok, "the plan is kept for the supervisor's restarts");
    assert.deepEqual(saved.plan, JSON.parse(JSON.stringify(plan)));
    // Not a daemon's boot: nothing kept for another to adopt.
    assert.deepEqual(store.bootsInProgress(), []);
  }));

test("a preflight refusal is no boot: no history row, no launch id, no plan kept", () =>
  withCluster(async (fc, store) => {
    fc.place(fc.plan(RECIPE, { deployment: "a" }));
    const plan = fc.plan(RECIPE, { deployment: "b" });
    const e = await rejection(recordedUp(plan, fc.session, options(fc), store, now));
    assert.ok(e instanceof UserError, String(e));
    assert.match(e.message, /no container was started/);
    assert.deepEqual(store.history(undefined, 10), []);
    assert.equal(store.launchedBoot(plan.cluster, "b"), undefined);
    assert.equal(store.savedPlan(plan.cluster, "b"), undefined);
    assert.deepEqual(fc.started, []);
  }));

test("an interrupt before any container is history: the boot's row is written and ends interrupted", () =>
  withCluster(async (fc, store) => {
    const stop = new AbortController();
    stop.abort();
    await rejection(recordedUp(fc.plan(RECIPE), fc.session, options(fc, { signal: stop.signal }), store, now));
    assert.deepEqual(fc.started, []);
    const rows = store.history(undefined, 10);
    assert.deepEqual(
      rows.map((b) => [b.deployment, b.outcome]),
      [["r", "interrupted"]],
    );
  }));

test("a boot whose head exits: its row ends failed naming the node and the error, no plan is kept, the deployment is not served", () =>
  withCluster(async (fc, store) => {
    fc.script = (c, n) => {
      if (c.labels[LABELS.rank] !== "0") return n.say(c.name, ...WORKER_CONNECTED);
      n.say(c.name, ...UP_TO_MAX_LEN, OOM_LINE);
      n.exit(c.name, 1);
    };
    const plan = fc.plan(RECIPE);
    const e = await rejection(recordedUp(plan, fc.session, options(fc), store, now));
    assert.ok(e instanceof RemoteError, String(e));
    const [row, ...more] = store.history(undefined, 10);
    assert.deepEqual(more, []);
    assert.equal(row?.outcome, "failed");
    assert.equal(row?.failed_node, e.node);
    assert.equal(row?.error, e.message);
    assert.equal(store.savedPlan(plan.cluster, plan.deployment), undefined);
    assert.equal(store.deploymentServed(plan.cluster, plan.deployment), false);
    assert.deepEqual(fc.containers(), []);
  }));

test("a daemon's boot is kept from before its first container until it ends ready", () =>
  withCluster(async (fc, store) => {
    const plan = fc.plan(RECIPE);
    const keptAtRun: string[][] = [];
    fc.script = (c, n) => {
      keptAtRun.push(store.bootsInProgress().map((b) => `${b.boot} ${b.deployment}`));
      return fc.serve(c, n);
    };
    const r = await recordedUp(plan, fc.session, options(fc, { detach: new AbortController().signal }), store, now);
    assert.equal(r.status, "ready");
    assert.deepEqual(keptAtRun, [[`${r.boot} r`], [`${r.boot} r`]]);
    assert.deepEqual(store.bootsInProgress(), [], "ended, it is no longer kept");
    assert.equal(store.history(undefined, 10)[0]?.outcome, "ready");
  }));

test("a daemon's boot that ends failed is no longer kept either", () =>
  withCluster(async (fc, store) => {
    fc.script = (c, n) => {
      if (c.labels[LABELS.rank] !== "0") return n.say(c.name, ...WORKER_CONNECTED);
      n.say(c.name, ...UP_TO_MAX_LEN, OOM_LINE);
      n.exit(c.name, 1);
    };
    await rejection(recordedUp(fc.plan(RECIPE), fc.session, options(fc, { detach: new AbortController().signal }), store, now));
    assert.deepEqual(store.bootsInProgress(), []);
    assert.equal(store.history(undefined, 10)[0]?.outcome, "failed");
  }));

/** A daemon's boot of `plan` left mid-boot (its daemon stopped once the head logged): what it throws. */
async function leftMidBoot(fc: FakeCluster, store: Store, plan: Plan): Promise<unknown> {
  fc.script = (c, n) => n.say(c.name, ...(c.labels[LABELS.rank] === "0" ? HEAD_WAITING : WORKER_CONNECTED));
  const detach = new AbortController();
  const progress = fc.progress();
  // Left once a node's first phase was heard (and so written: the recorder writes it right after).
  const node: typeof progress.node = () => void setImmediate(() => detach.abort());
  return rejection(recordedUp(plan, fc.session, options(fc, { detach: detach.signal, progress: { ...progress, node } }), store, now));
}

test("a daemon that stops mid-boot leaves it as it is: kept (linked to its history row), the row not ended, its containers running; the next daemon's watch continues that row to ready", () =>
  withCluster(async (fc, store) => {
    const plan = fc.plan(RECIPE);
    const e = await leftMidBoot(fc, store, plan);
    assert.ok(e instanceof Detached, String(e));
    const [kept, ...others] = store.bootsInProgress();
    assert.deepEqual(others, []);
    assert.ok(kept !== undefined);
    const [row] = store.history(undefined, 10);
    assert.equal(row?.outcome, "booting", "no end is written for a boot left to the next daemon");
    assert.equal(kept.history_id, row.id);
    assert.deepEqual(fc.containers(), ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"]);

    // The next daemon: the head now serves and says so.
    const url = new URL(plan.endpoint);
    const engine = await startFakeEngine({ host: url.hostname, port: Number(url.port), model: plan.served_model });
    try {
      fc.node("n1").say("launcher-r-r0", API_UP(engine.port));
      const r = await recordedWatch(kept, stampBoot(plan, kept.boot), fc.session, options(fc), store, now);
      assert.equal(r.status, "ready");
    } finally {
      await engine.close();
    }
    const rows = store.history(undefined, 10);
    assert.deepEqual(
      rows.map((b) => [b.id, b.outcome]),
      [[row.id, "ready"]],
      "the same row, ended ready",
    );
    assert.deepEqual(store.bootsInProgress(), []);
    assert.ok(store.savedPlan(plan.cluster, plan.deployment)?.includes(kept.boot));
  }));

test("an adopted boot whose head exited: a row is written (it had none), ended failed, its containers rolled back and it is no longer kept", () =>
  withCluster(async (fc, store) => {
    const bootId = "0123456789ab";
    const plan = fc.place(fc.plan(RECIPE), bootId, (rank) => (rank === 0 ? [...UP_TO_MAX_LEN, OOM_LINE] : WORKER_CONNECTED));
    fc.node("n1").exit("launcher-r-r0", 1);
    const startedAt = new Date(Date.now() - 1000).toISOString();
    store.beginBootInProgress({ boot: bootId, cluster: plan.cluster, deployment: plan.deployment, plan: "{}", started_at: startedAt, deadline_at: new Date(Date.now() + 20_000).toISOString(), pid: 1, host: "gone" });
    const [kept] = store.bootsInProgress();
    assert.ok(kept !== undefined && kept.history_id === undefined);
    const e = await rejection(recordedWatch(kept, plan, fc.session, options(fc), store, now));
    assert.ok(e instanceof RemoteError, String(e));
    const rows = store.history(undefined, 10);
    assert.deepEqual(
      rows.map((b) => [b.outcome, b.started_at, b.failed_node]),
      [["failed", startedAt, e.node]],
    );
    assert.deepEqual(store.bootsInProgress(), []);
    assert.deepEqual(fc.containers(), []);
  }));
