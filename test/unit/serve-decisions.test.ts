import assert from "node:assert/strict";
import { hostname } from "node:os";
import { test } from "node:test";
import { bootAgain } from "../../src/daemon/reboot.js";
import { RemoteError } from "../../src/config/errors.js";
import { BOOT_PHASES, LABELS } from "../../src/contract/deployment.js";
import { decodeError, type UpEvent } from "../../src/boot/up-events.js";
import type { Plan } from "../../src/plan/plan.js";
import { Store } from "../../src/store/store.js";
import { FakeCluster, HEAD_WAITING, RECIPE, WORKER_CONNECTED, WORKER_CONNECTING } from "../support/fake-cluster.js";
import { FakeDaemon } from "../support/fake-daemon.js";

// The daemon's supervision and adoption decisions, run for real (the Supervisor, its policy, the
// restart's boot through the `up` use case, adoption, the daemon's route table, a real store) over
// a FakeCluster (test/support/fake-daemon.ts). Each was a rig test that paid for real boots; the
// rig keeps one end-to-end test per family for what only the wire shows: docker's die event
// starting a restart (test/integration/supervise.test.ts) and a daemon killed with SIGKILL
// mid-boot whose boot the next daemon watches again (test/integration/adopt.test.ts).

/** The deployment's name: the recipe's id, as fc.plan makes it. */
const NAME = "r";
const HEAD = "launcher-r-r0";
const WORKER = "launcher-r-r1";
/** What the practice engine's crash_after_ready prints before it exits 1 (docker-images/practice-engine/lib/faults.js crashAfterReady). */
const CUDA_CRASH = [
  "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:05 [core.py:795] EngineCore encountered a fatal error.",
  "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:05 [core.py:795] RuntimeError: CUDA error: an illegal memory access was encountered",
];
const CAUSE = "RuntimeError: CUDA error: an illegal memory access was encountered";
/** A pid no process has (above any pid_max): the daemon that kept a boot is dead. */
const DEAD_PID = 0x7ffffffe;

/** A cluster, its store and a daemon over them; everything stopped and closed after `body`. */
async function withDaemon(body: (fc: FakeCluster, store: Store, d: FakeDaemon) => Promise<void>): Promise<void> {
  const fc = await FakeCluster.start();
  const store = new Store(":memory:");
  const d = await FakeDaemon.start(fc, store);
  try {
    await body(fc, store, d);
  } finally {
    await d.stop();
    await fc.close();
    store.close();
  }
}

/** `launcher up` of `plan` here (not through the daemon): booted and recorded, its plan kept. */
function upHere(fc: FakeCluster, store: Store, plan: Plan): Promise<unknown> {
  return bootAgain(plan, fc.session, new AbortController().signal, store, () => undefined);
}

/** The head crashes as crash_after_ready does (its cause, exit 1); the worker then loses it and exits too. */
function crash(fc: FakeCluster): void {
  fc.node("n1").say(HEAD, ...CUDA_CRASH);
  fc.node("n1").exit(HEAD, 1);
  fc.node("n2").say(WORKER, "(Worker_TP1 pid=1) ERROR 01-01 00:00:06 [multiproc_executor.py:154] lost the connection to the master");
  fc.node("n2").exit(WORKER, 1);
}

test("supervise: a group that keeps crashing after ready is restarted at most N times, each recorded with the root cause from the dead rank's log, then left degraded", () =>
  withDaemon(async (fc, store, d) => {
    await upHere(fc, store, fc.plan(RECIPE, { restart: { mode: "on-failure", max: 1 } }));
    await d.until("the daemon supervising r as ready", () => d.supervision(NAME) === "ready");
    crash(fc);
    await d.until("restart 1 serving", () => store.restarts(NAME, 5)[0]?.outcome === "ready" && d.supervision(NAME) === "ready (1 restart)");
    const [r] = store.restarts(NAME, 5);
    assert.deepEqual([r?.attempt, r?.reason, r?.node, r?.rank, r?.cause], [1, "rank-exited", "n1", 0, CAUSE], "the head that crashed, not the worker that lost it");
    assert.deepEqual(fc.containers(), [`n1:${HEAD}:running`, `n2:${WORKER}:running`]);
    assert.equal(fc.node("n1").logOf(HEAD).includes(CUDA_CRASH[1] as string), false, "the head is a new container");
    crash(fc);
    await d.until("the give-up", () => d.logs.some((l) => /supervise: r: .*not restarting it: it was restarted 1 time, the most its --restart on-failure:1 allows/.test(l)));
    assert.deepEqual(store.restarts(NAME, 5).map((x) => [x.attempt, x.outcome]), [[1, "ready"]], "no second restart");
    assert.equal(fc.started.length, 4, "two boots of two ranks: the first and restart 1");
    // Left as it is: the gateway says degraded (never restarting) once a poll read after the give-up.
    await d.poll();
    const answer = d.answer("served");
    assert.equal(answer.kind === "unavailable" ? answer.code : answer.kind, "deployment_degraded");
    assert.deepEqual(fc.containers(), [`n1:${HEAD}:exited`, `n2:${WORKER}:exited`]);
  }));

/** The restart's group (labelled with its restart count) never serves: its head waits for its workers for good, so its boot can be cancelled midway. */
function restartHangs(fc: FakeCluster): void {
  fc.script = (c, n) => (c.labels[LABELS.restarts] === undefined ? fc.serve(c, n) : n.say(c.name, ...(c.labels[LABELS.rank] === "0" ? HEAD_WAITING : WORKER_CONNECTED)));
}

/** Everything an error event says: node, message and detail, as the error funnel prints them. */
function said(end: UpEvent): string {
  assert.equal(end.type, "error", JSON.stringify(end));
  const e = decodeError((end as Extract<UpEvent, { type: "error" }>).error);
  return e instanceof RemoteError ? `${e.node}: ${e.message}\n${e.detail ?? ""}` : e.message;
}

test("supervise: launcher down NAME during a restart's boot cancels it through the daemon: rolled back, nothing left on any node, the deployment forgotten and not booted again", () =>
  withDaemon(async (fc, store, d) => {
    restartHangs(fc);
    await upHere(fc, store, fc.plan(RECIPE, { restart: { mode: "on-failure" } }));
    await d.until("the daemon supervising r as ready", () => d.supervision(NAME) === "ready");
    fc.node("n2").exit(WORKER, 137);
    // The old group removed and the new one started: the restart's boot is under way.
    await d.until("the restart's new group booting", () => fc.started.length === 4 && fc.containers().every((c) => c.endsWith(":running")) && fc.containers().length === 2);
    const text = said(await d.down(NAME));
    assert.match(text, /interrupted \(launcher down\)/);
    assert.match(text, /rolled back: removed 2 containers/);
    assert.deepEqual(fc.containers(), [], "nothing left on any node");
    await d.until("the restart recorded as cancelled", () => store.restarts(NAME, 5)[0]?.outcome === "cancelled");
    await d.supervisor.idle();
    assert.equal(d.supervision(NAME), undefined, "forgotten");
    // Marked stopped, so no daemon (this one or a later one) boots it again.
    assert.equal(store.deploymentServed(fc.cluster.name, NAME), false);
    await d.poll();
    d.supervisor.tick();
    await d.supervisor.idle();
    assert.equal(fc.started.length, 4, "not booted again");
    assert.deepEqual(store.restarts(NAME, 5).map((r) => r.outcome), ["cancelled"]);
  }));

test("supervise: a daemon killed with SIGKILL and started again adopts a serving deployment: routed at once, supervised, counting on from the restarts its labels show, nothing booted twice", () =>
  withDaemon(async (fc, store, first) => {
    await upHere(fc, store, fc.plan(RECIPE, { lane: "adopt", restart: { mode: "on-failure", max: 2 } }));
    await first.until("the first daemon supervising r as ready", () => first.supervision(NAME) === "ready");
    fc.node("n2").exit(WORKER, 137);
    await first.until("restart 1 serving", () => first.supervision(NAME) === "ready (1 restart)");
    const before = fc.containers();
    await first.kill();
    const second = await FakeDaemon.start(fc, store);
    try {
      // Routed from its first read: adopting boots nothing.
      const answer = second.answer("adopt");
      assert.equal(answer.kind === "route" ? answer.target.deployment : answer.kind, NAME);
      assert.equal(second.supervision(NAME), "ready (1 restart)", "its labels say how many restarts it had");
      assert.deepEqual(fc.containers(), before);
      assert.equal(fc.started.length, 4, "the first boot and restart 1 only");
      // Supervised again: a worker killed now is restarted by the new daemon, as restart 2 of at most 2.
      fc.node("n2").exit(WORKER, 137);
      await second.until("restart 2 recorded as ready", () => store.restarts(NAME, 5)[0]?.outcome === "ready" && store.restarts(NAME, 5).length === 2);
      assert.deepEqual(store.restarts(NAME, 5).map((r) => [r.attempt, r.node, r.rank, r.outcome]), [[2, "n2", 1, "ready"], [1, "n2", 1, "ready"]]);
      assert.ok(second.logs.some((l) => l.includes("recreating the whole group (restart 2 of at most 2)")), second.logs.join("\n"));
      assert.deepEqual(fc.containers(), [`n1:${HEAD}:running`, `n2:${WORKER}:running`]);
      assert.equal(fc.started.length, 6);
    } finally {
      await second.stop();
    }
  }));

/** Every boot of the cluster stays in its loading: the head waits for its worker, the worker is still connecting. */
function bootsHang(fc: FakeCluster): void {
  fc.script = (c, n) => n.say(c.name, ...(c.labels[LABELS.rank] === "0" ? HEAD_WAITING : WORKER_CONNECTING));
}

/** A boot submitted to `d` and under way on both nodes, then left by `d` stopping (SIGTERM), and its process gone. */
async function leftMidBoot(fc: FakeCluster, store: Store, d: FakeDaemon, plan: Plan): Promise<void> {
  const entry = d.submit(plan);
  await d.until("both ranks of r run", () => fc.containers().filter((c) => c.endsWith(":running")).length === 2 && entry.events.some((e) => e.type === "node"));
  await d.stop();
  // A stopping daemon leaves its boots running (a restart of the daemon never costs a boot).
  assert.deepEqual(fc.containers(), [`n1:${HEAD}:running`, `n2:${WORKER}:running`], "the boot goes on after its daemon stopped");
  const kept = store.bootsInProgress();
  assert.deepEqual(kept.map((b) => [b.deployment, b.pid]), [[NAME, process.pid]], "kept in the store for the next daemon");
  // The daemon's process ends: the row's pid is one that runs no more.
  assert.ok(store.takeBootInProgress(kept[0]?.boot as string, { pid: process.pid, host: hostname() }, { pid: DEAD_PID, host: hostname() }));
}

/** The worker exits as the practice engine's worker_exit fault does. */
function workerExits(fc: FakeCluster): void {
  fc.node("n2").say(WORKER, "(Worker_TP1 pid=1) INFO 01-01 00:00:05 [multiproc_executor.py:702] Worker exiting: simulated fault (practice-engine)");
  fc.node("n2").exit(WORKER, 1);
}

test("adopt: stopped with SIGTERM mid-boot, the boot is left running; the next daemon adopts it, it fails (before or after it was adopted), and it is rolled back on every node", async () => {
  for (const when of ["after the adoption", "between the daemons"] as const) {
    await withDaemon(async (fc, store, first) => {
      bootsHang(fc);
      await leftMidBoot(fc, store, first, fc.plan(RECIPE));
      if (when === "between the daemons") workerExits(fc);
      const second = await FakeDaemon.start(fc, store);
      try {
        assert.ok(second.logs.some((l) => new RegExp(`adopted the boot of r \\([0-9a-f]{12}\\) left by launcher serve pid ${DEAD_PID}`).test(l)), second.logs.join("\n"));
        const entry = second.registry.find(NAME);
        assert.ok(entry !== undefined, when);
        if (when === "after the adoption") {
          await second.until("the adopted boot's watch reports its nodes", () => entry.events.some((e) => e.type === "node"));
          workerExits(fc);
        }
        const text = said(await entry.ended);
        assert.match(text, /^n2 \(rank 1\): boot of r failed/, when);
        assert.match(text, /Worker exiting: simulated fault \(practice-engine\)/, when);
        assert.match(text, /rolled back: removed 2 containers/, when);
        assert.deepEqual(fc.containers(), [], `${when}: nothing left on any node`);
        assert.deepEqual(store.history(undefined, 5).map((b) => b.outcome), ["failed"], when);
        assert.deepEqual(store.bootsInProgress(), [], when);
        assert.equal(fc.started.length, 2, `${when}: booted once`);
      } finally {
        await second.stop();
      }
    });
  }
});

test("adopt: a boot its daemon left mid-boot is watched again by the next daemon and becomes ready: booted once, recorded once, routed through its lane, supervised under its --restart", () =>
  withDaemon(async (fc, store, first) => {
    let release: (() => void) | undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    fc.script = async (c, n) => {
      if (c.labels[LABELS.rank] !== "0") return n.say(c.name, ...WORKER_CONNECTED);
      n.say(c.name, ...HEAD_WAITING);
      await released;
      await fc.serve(c, n);
    };
    await leftMidBoot(fc, store, first, fc.plan(RECIPE, { lane: "adopt-lane", restart: { mode: "on-failure" } }));
    const second = await FakeDaemon.start(fc, store);
    try {
      const entry = second.registry.find(NAME);
      assert.ok(entry !== undefined);
      await second.until("the adopted boot's watch reports its nodes", () => entry.events.some((e) => e.type === "node"));
      release?.();
      const end = await entry.ended;
      assert.equal(end.type, "result", JSON.stringify(end));
      // What attach follows: the takeover said, and the head's last phase reached.
      assert.ok(entry.events.some((e) => e.type === "say" && /the daemon that started this boot of r .* stopped; this one watches it again/.test(e.text)));
      assert.ok(entry.events.some((e) => e.type === "node" && e.node === "n1" && e.state.phase === BOOT_PHASES.at(-1)));
      assert.equal(fc.started.length, 2, "booted once");
      assert.deepEqual(store.history(undefined, 5).map((b) => b.outcome), ["ready"], "one boot, recorded as up records it");
      assert.deepEqual(store.bootsInProgress(), []);
      await second.poll();
      const answer = second.answer("adopt-lane");
      assert.equal(answer.kind === "route" ? answer.target.deployment : JSON.stringify(answer), NAME);
      assert.equal(second.supervision(NAME), "ready", "supervised under its --restart (its plan kept for a restart)");
      assert.ok(store.savedPlan(fc.cluster.name, NAME) !== undefined);
    } finally {
      await second.stop();
    }
  }));
