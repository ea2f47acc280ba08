import assert from "node:assert/strict";
import { test } from "node:test";
import { encodeLabels, type DeploymentStatus } from "../../src/contract/deployment.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { Supervisor, type Seen } from "../../src/supervise/supervisor.js";
import type { UpOutcome } from "../../src/boot/up-events.js";
import type { Plan } from "../../src/plan/plan.js";
import { encodeSavedPlan } from "../../src/plan/saved.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import { Store } from "../../src/store/store.js";
import { within } from "../integration/practice-cluster.js";
import { dockerFrom } from "../support/docker-parts.js";
import { supervisorOf } from "./supervisor-fixture.js";

// The supervisor's shell against fakes: what it removes, what it boots, what it records.

const labels = (rank: number, node: string) =>
  encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000", lane: "chat", restart: { mode: "on-failure", max: 3 } });

function fakeDocker(node: string, rank: number, log: readonly string[], removed: string[]): Docker {
  let gone = false;
  // The worker (rank 1) died; the head still runs.
  let info: ContainerInfo = { id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, node), state: rank === 0 ? "running" : "exited", running: rank === 0, exitCode: rank === 0 ? 0 : 1, startedAt: "t", finishedAt: rank === 0 ? "0001-01-01T00:00:00Z" : "2026-01-01T00:00:01Z", image: "img" };
  return dockerFrom({
    containers: async () => (gone ? [] : [info]),
    // Stopped by the restart: it ends then, after the rank that died by itself.
    stop: async () => {
      if (info.running) info = { ...info, state: "exited", running: false, exitCode: 137, finishedAt: "2026-01-01T00:00:09Z" };
    },
    stopAndRemove: async (names) => {
      removed.push(...names.map((n) => `${node}:${n}`));
      gone = true;
    },
    logs: async function* () {
      yield* log;
    },
  });
}

const plan = {
  deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h", lane: "chat",
  recipe: { id: "r", engine: "vllm", docker_image: "img" },
  nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] }],
  start_order: ["n1"],
  start: "head first",
} as unknown as Plan;

/** A store that kept a two-rank plan of `d` and saw it serve. */
function twoRankStore(): Store {
  const store = new Store(":memory:");
  const twoRanks = { ...plan, nodes: [...plan.nodes, { rank: 1, node: "n2", container: "launcher-d-r1", labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] }] } as unknown as Plan;
  store.savePlan("c", "d", encodeSavedPlan(twoRanks), "t");
  served(store);
  return store;
}

const ready: UpOutcome = { status: "ready", deployment: "d", endpoint: "http://n1:8000", served_model: "m", seconds: 1 };

/** The store as `up` leaves it once the deployment served. */
function served(store: Store): void {
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", lane: "chat", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1", "n2"] };
  const boot = store.beginBoot({ ...b, started_at: "2026-01-01T00:00:00Z" });
  store.deploymentReady({ ...b, boot_id: boot, ready_at: "2026-01-01T00:00:10Z" });
}

const status = (over: Partial<DeploymentStatus>): Seen => ({
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", lane: "chat", restart: "on-failure:3", served_model: "m", endpoint: "http://n1:8000",
  status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "running", started_at: "t" },
  ],
  ...over,
});
const dead = status({
  status: "degraded", phase: "-", missing: ["rank 1 on n2 (exited, exit 1)"],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 1, started_at: "t", finished_at: "2026-01-01T00:00:01Z" },
  ],
});

test("supervisor: a rank that died after ready: root cause read from its log, the whole group removed on every node, the kept plan booted again, the restart recorded", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  const workerLog = ["2026-01-01T00:00:00.000000000Z INFO loading", "2026-01-01T00:00:00.100000000Z RuntimeError: CUDA error: an illegal memory access was encountered"];
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], removed)], ["n2", fakeDocker("n2", 1, workerLog, removed)]]) } as unknown as ClusterSession;
  let clock = 1000;
  const booted: Plan[] = [];
  let finishBoot: (() => void) | undefined;
  const logs: string[] = [];
  let refreshed = 0;
  const sup = new Supervisor({
    store,
    session: async (c) => (c === "c" ? session : undefined),
    boot: async (p, _session, _signal, _emit, _detach, recreating) => {
      // As up does: its first container starts once the old group is removed.
      await recreating;
      booted.push(p);
      await new Promise<void>((resolve) => (finishBoot = resolve));
      return ready;
    },
    boots: new BootRegistry(() => 0),
    refresh: () => refreshed++,
    log: (l) => logs.push(l),
    now: () => clock,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  sup.observe([status({})], clock);
  clock += 500;
  sup.observe([dead], clock);
  assert.equal(refreshed, 1, "a failure seen once: looked at again at once");
  assert.deepEqual(sup.restarting(), []);
  clock += 500;
  sup.observe([dead], clock);
  // Issued: the gateway says restarting while the boot runs.
  const r = sup.restarting();
  assert.equal(r.length, 1);
  assert.equal(r[0]?.lane, "chat");
  assert.equal(r[0]?.attempt, 1);
  assert.equal(r[0]?.max, 3);
  await new Promise((resolve) => setImmediate(resolve));
  // The restart first waits the settle `up` gives a failure (600 ms).
  await within(5_000, "the restart's boot starts", async () => (finishBoot !== undefined ? true : undefined));
  assert.deepEqual(removed.sort(), ["n1:launcher-d-r0", "n2:launcher-d-r1"], "every rank of the group, on every node");
  assert.equal(booted.length, 1);
  assert.equal(booted[0]?.deployment, "d");
  // The new group carries its restart count, so a daemon started later counts on from it.
  assert.equal(booted[0]?.nodes[0]?.labels["launcher.restarts"], "1");
  assert.deepEqual(booted[0]?.nodes[0]?.argv, ["docker", "run", "--label", "launcher.restarts=1", "--label", "launcher.deployment=d", "--", "img"]);
  const during = store.restarts("d", 10);
  assert.equal(during[0]?.outcome, "restarting");
  assert.equal(during[0]?.cause, "RuntimeError: CUDA error: an illegal memory access was encountered");
  assert.equal(during[0]?.node, "n2");
  // The lock of the deployment and its lane is held while it boots.
  assert.equal(store.lockHolder("deployment:c/d")?.pid, process.pid);
  assert.equal(store.lockHolder("lane:chat")?.pid, process.pid);
  clock += 3000;
  finishBoot?.();
  await sup.idle();
  assert.equal(store.restarts("d", 10)[0]?.outcome, "ready");
  assert.equal(store.lockHolder("deployment:c/d"), undefined);
  // Served again, but the last poll still shows it down: restarting for one more poll, not lane_empty.
  assert.equal(sup.restarting()[0]?.retryAfter, 1);
  sup.observe([status({})], (clock += 500));
  assert.deepEqual(sup.restarting(), []);
  assert.ok(logs.some((l) => l.includes("serves again (restart 1 of at most 3)")), logs.join("\n"));
  store.close();
});

test("supervisor: without a kept plan the restart fails, is recorded as failed, and is tried again after its backoff", async () => {
  const store = new Store(":memory:");
  const removed: string[] = [];
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], removed)], ["n2", fakeDocker("n2", 1, [], removed)]]) } as unknown as ClusterSession;
  let clock = 0;
  const sup = new Supervisor({
    store,
    session: async () => session,
    boot: async () => assert.fail("nothing to boot"),
    boots: new BootRegistry(() => 0),
    refresh: () => undefined,
    log: () => undefined,
    now: () => clock,
    timing: { confirmMs: 2000, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
  });
  sup.observe([status({})], clock);
  sup.observe([dead], (clock += 100));
  sup.observe([dead], (clock += 100));
  await sup.idle();
  const [rec] = store.restarts("d", 10);
  assert.equal(rec?.outcome, "failed");
  assert.match(rec?.error ?? "", /no plan of d is kept/);
  assert.deepEqual(removed, [], "nothing removed when it cannot be booted again");
  assert.equal(sup.restarting()[0]?.attempt, 2, "in backoff: the next try is the second");
  await sup.stop();
  store.close();
});

test("stampLabel: a kept plan stamped again replaces its label, in the labels and in docker run", async () => {
  const { stampLabel } = await import("../../src/boot/boot.js");
  const once = stampLabel(plan, "launcher.restarts", "1");
  const twice = stampLabel(once, "launcher.restarts", "2");
  assert.deepEqual(twice.nodes[0]?.argv, ["docker", "run", "--label", "launcher.restarts=2", "--label", "launcher.deployment=d", "--", "img"]);
  assert.equal(twice.nodes[0]?.labels["launcher.restarts"], "2");
});

test("supervisor: a daemon started again counts on from the restarts its labels show (at most N across daemons)", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  const logs: string[] = [];
  const sup = new Supervisor({
    store,
    session: async () => assert.fail("no restart"),
    boot: async () => assert.fail("no restart"),
    boots: new BootRegistry(() => 0),
    refresh: () => undefined,
    log: (l) => logs.push(l),
    now: () => 0,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  const adopted = (s: Seen): Seen => ({ ...s, restarts: 3 });
  sup.observe([adopted(status({}))], 0);
  sup.observe([adopted(dead)], 100);
  sup.observe([adopted(dead)], 200);
  await sup.idle();
  assert.ok(logs.some((l) => l.includes("not restarting it: it was restarted 3 times")), logs.join("\n"));
  store.close();
});

test("supervisor: given up on docker's die event, before a poll shows it: the gateway is told degraded until a poll read since", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  let clock = 0;
  const sup = new Supervisor({
    store,
    session: async () => assert.fail("no restart"),
    boot: async () => assert.fail("no restart"),
    boots: new BootRegistry(() => clock),
    refresh: () => undefined,
    log: () => undefined,
    now: () => clock,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  // Its restarts are spent (3 of at most 3): the next death gives up.
  const spent = (s: Seen): Seen => ({ ...s, restarts: 3 });
  sup.observe([spent(status({}))], clock);
  clock = 5000;
  sup.died("c", { deployment: "d", node: "n2", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 1)" } });
  assert.deepEqual(
    sup.restarting().map((r) => [r.deployment, r.gaveUp, r.attempt, r.reason]),
    [["d", true, 3, "rank 1 on n2 exited (exit 1)"]],
  );
  sup.observe([spent(dead)], 5100);
  assert.deepEqual(sup.restarting(), [], "a poll read since shows it as it is");
  await sup.stop();
  store.close();
});

test("supervisor: a deployment stopped by `launcher down` since it served is not booted again: cancelled, forgotten", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  store.deploymentStopped("c", "d", "2026-01-01T00:01:00Z");
  const removed: string[] = [];
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], removed)], ["n2", fakeDocker("n2", 1, [], removed)]]) } as unknown as ClusterSession;
  const sup = new Supervisor({
    store,
    session: async () => session,
    boot: async () => assert.fail("a stopped deployment is not booted"),
    boots: new BootRegistry(() => 0),
    refresh: () => undefined,
    log: () => undefined,
    now: () => 1000,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  sup.observe([status({})], 0);
  sup.observe([dead], 100);
  sup.observe([dead], 200);
  await sup.idle();
  assert.deepEqual(removed, []);
  assert.equal(store.restarts("d", 10)[0]?.outcome, "cancelled");
  assert.deepEqual(sup.restarting(), []);
  assert.deepEqual(sup.describe(), {}, "forgotten");
  store.close();
});

test("store: a deployment `launcher down` begins to stop no longer counts as served (before its containers are gone); a new boot that serves does again", () => {
  const store = new Store(":memory:");
  served(store);
  assert.equal(store.deploymentServed("c", "d"), true);
  store.deploymentStopping("c", "d", "2026-01-01T00:01:00Z");
  assert.equal(store.deploymentServed("c", "d"), false);
  served(store);
  assert.equal(store.deploymentServed("c", "d"), true);
  store.close();
});

/** A daemon that saw `d` serve hears rank `rank` on `node` die; the restart it recorded, once it is idle. */
async function restartOnDeath(store: Store, session: ClusterSession, rank: number, node: string): Promise<ReturnType<Store["restarts"]>[number] | undefined> {
  const sup = supervisorOf(store, session, new BootRegistry(Date.now), async () => ready);
  sup.observe([status({})], Date.now() - 1000);
  sup.died("c", { deployment: "d", node, failure: { kind: "rank-exited", rank, node, container: `launcher-d-r${rank}`, message: `rank ${rank} on ${node} exited (exit 1)` } });
  await sup.idle();
  await sup.stop();
  return store.restarts("d", 10)[0];
}

const until = async (what: string, check: () => boolean): Promise<void> => void (await within(2000, what, async () => (check() ? true : undefined)));

test("supervisor: a restart is a boot of the daemon's registry: attach follows it from its start (the failure, the removal, the boot's progress) to up's result", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], [])], ["n2", fakeDocker("n2", 1, [], [])]]) } as unknown as ClusterSession;
  const boots = new BootRegistry(Date.now);
  let finish: (() => void) | undefined;
  const sup = supervisorOf(store, session, boots, async (emit) => {
    emit({ type: "node", node: "n1", state: { phase: "loading", figures: {}, ready: false, lastLines: [] }, t: Date.now() });
    await new Promise<void>((resolve) => (finish = resolve));
    return ready;
  });
  sup.observe([status({})], Date.now());
  sup.observe([dead], Date.now() + 1);
  sup.observe([dead], Date.now() + 2);
  await until("the restart's boot runs", () => finish !== undefined);
  const running = boots.find("d");
  assert.ok(running?.running, "the restart is a running boot of the registry");
  assert.deepEqual(running.identity, { deployment: "d", cluster: "c", lane: "chat" });
  // A second boot of the name or the lane is refused while it runs, as for a submitted up.
  assert.throws(() => boots.start({ deployment: "other", cluster: "c", lane: "chat" }, async () => ready), /busy: lane chat/);
  const seenByAttach: string[] = [];
  running.follow((e) => seenByAttach.push(e.type === "say" ? `say ${e.text}` : e.type === "node" ? `node ${e.node} ${e.state.phase}` : e.type));
  finish?.();
  await sup.idle();
  assert.equal(seenByAttach[0], "accepted");
  assert.match(seenByAttach[1] ?? "", /^say launcher serve: rank 1 on n2 exited \(exit 1\); recreating the whole group \(restart 1 of at most 3\)$/);
  assert.ok(seenByAttach.some((l) => /^say launcher serve: removed 2 containers/.test(l)), seenByAttach.join("\n"));
  assert.ok(seenByAttach.includes("node n1 loading"), seenByAttach.join("\n"));
  assert.equal(seenByAttach.at(-1), "result");
  assert.equal(store.restarts("d", 10)[0]?.outcome, "ready");
  await sup.stop();
  store.close();
});

test("supervisor: `launcher down NAME` cancelling a restart's boot rolls it back, leaves nothing of the deployment, marks it stopped and the supervisor forgets it", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], removed)], ["n2", fakeDocker("n2", 1, [], removed)]]) } as unknown as ClusterSession;
  const boots = new BootRegistry(Date.now);
  let booting = false;
  const sup = supervisorOf(store, session, boots, async (_emit, signal) => {
    booting = true;
    // As up's boot: an abort rolls back and ends it with the signal's interruption.
    await new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true }));
    return ready;
  });
  sup.observe([status({})], Date.now());
  sup.observe([dead], Date.now() + 1);
  sup.observe([dead], Date.now() + 2);
  await until("the restart's boot runs", () => booting);
  // A poll that read the restart's new group (labelled --restart) just before the cancel.
  const readBefore = Date.now() - 1;
  const final = await boots.find("d")?.cancel("launcher down d");
  assert.equal(final?.type, "error");
  await sup.idle();
  assert.deepEqual(removed.sort(), ["n1:launcher-d-r0", "n2:launcher-d-r1"], "the old group, removed before the boot");
  assert.equal(store.restarts("d", 10)[0]?.outcome, "cancelled");
  assert.equal(store.deploymentServed("c", "d"), false, "stopped: a daemon started later does not boot it again");
  assert.deepEqual(sup.describe(), {}, "forgotten");
  assert.deepEqual(sup.restarting(), []);
  // That poll's snapshot arrives after the cancel: what it shows was removed since, so it is not adopted again.
  sup.observe([status({ status: "booting", phase: "loading" })], readBefore);
  assert.deepEqual(sup.describe(), {}, "a snapshot read before the cancel does not bring it back");
  // A later `up --restart` of the same name, read after the cancel, is supervised as any.
  // Read 1 ms past now: strictly after the drop, which came before now (no waiting for the clock).
  sup.observe([status({})], Date.now() + 1);
  assert.deepEqual(Object.keys(sup.describe()), ["c/d"], "a deployment read after the cancel is supervised again");
  await sup.stop();
  store.close();
});

test("supervisor: a cancel that comes before the old group was removed still leaves nothing of the deployment", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  let readCause: (() => void) | undefined;
  const n2 = fakeDocker("n2", 1, [], removed);
  // The dead rank's log is slow to read: `down` comes meanwhile.
  const slowLogs = Object.assign(Object.create(n2) as Docker, {
    logs: async function* () {
      await new Promise<void>((resolve) => (readCause = resolve));
      yield "2026-01-01T00:00:00.000000000Z bye";
    },
  });
  const session = { cluster: {}, docker: new Map([["n1", fakeDocker("n1", 0, [], removed)], ["n2", slowLogs]]) } as unknown as ClusterSession;
  const boots = new BootRegistry(Date.now);
  const sup = supervisorOf(store, session, boots, async () => assert.fail("a cancelled restart boots nothing"));
  sup.observe([status({})], Date.now());
  sup.observe([dead], Date.now() + 1);
  sup.observe([dead], Date.now() + 2);
  await until("the restart reads the cause", () => readCause !== undefined);
  const cancelled = boots.find("d")?.cancel("launcher down d");
  readCause?.();
  assert.equal((await cancelled)?.type, "error");
  await sup.idle();
  assert.deepEqual(removed.sort(), ["n1:launcher-d-r0", "n2:launcher-d-r1"]);
  assert.equal(store.deploymentServed("c", "d"), false);
  assert.deepEqual(sup.describe(), {});
  await sup.stop();
  store.close();
});

test("supervisor: a rank's die event restarts the group at once, naming the rank whose container ended first and reading its cause", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  // The head crashed first; the worker lost it a moment later, and its death was heard of first.
  const ended = (rank: number, node: string, at: string, log: readonly string[]): Docker => {
    const d = fakeDocker(node, rank, log, removed);
    const listed = async (): Promise<ContainerInfo[]> => [{ id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, node), state: "exited", running: false, exitCode: 1, startedAt: "t", finishedAt: at, image: "img" }];
    return Object.assign(Object.create(d) as Docker, { containers: listed });
  };
  const headLog = ["2026-01-01T00:00:00.000000000Z RuntimeError: CUDA error: an illegal memory access was encountered"];
  const session = { cluster: {}, docker: new Map([["n1", ended(0, "n1", "2026-01-01T00:00:01.5Z", headLog)], ["n2", ended(1, "n2", "2026-01-01T00:00:01.523456789Z", [])]]) } as unknown as ClusterSession;
  let booted = 0;
  const sup = supervisorOf(store, session, new BootRegistry(Date.now), async () => {
    booted++;
    return ready;
  });
  sup.observe([status({})], Date.now() - 1000);
  sup.died("c", { deployment: "d", node: "n2", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 1)" } });
  await sup.idle();
  assert.equal(booted, 1, "restarted without a poll");
  const [rec] = store.restarts("d", 10);
  assert.equal(`${rec?.node} ${rec?.rank}`, "n1 0");
  assert.equal(rec?.cause, "RuntimeError: CUDA error: an illegal memory access was encountered");
  await sup.stop();
  store.close();
});

test("supervisor: a worker that only lost its head ended first: the head, with its own cause, is named, both logs read in the removal's round trip", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  const read: string[] = [];
  const ended = (rank: number, node: string, at: string, log: readonly string[]): Docker => {
    const d = fakeDocker(node, rank, log, removed);
    const listed = async (): Promise<ContainerInfo[]> => (removed.some((r) => r.startsWith(`${node}:`)) ? [] : [{ id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, node), state: "exited", running: false, exitCode: 1, startedAt: "t", finishedAt: at, image: "img" }]);
    return Object.assign(Object.create(d) as Docker, {
      containers: listed,
      logs: async function* (container: string) {
        read.push(`${node}:${container}`);
        yield* log;
      },
    });
  };
  // The worker's c10d warning (torch's TCPStore client, vllm-project/vllm#32136) and its end came
  // 40 ms before the head's, whose own exception is the cause.
  const workerLog = ["2026-01-01T00:00:01.400000000Z [rank1]:[W101 00:00:01.400000000 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=99, addr=[::ffff:10.0.0.2]:38760, remote=[::ffff:10.0.0.1]:29501): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"];
  const headLog = ["2026-01-01T00:00:01.000000000Z RuntimeError: CUDA error: an illegal memory access was encountered"];
  const session = { cluster: {}, docker: new Map([["n1", ended(0, "n1", "2026-01-01T00:00:01.54Z", headLog)], ["n2", ended(1, "n2", "2026-01-01T00:00:01.5Z", workerLog)]]) } as unknown as ClusterSession;
  const rec = await restartOnDeath(store, session, 1, "n2");
  assert.equal(`${rec?.node} ${rec?.rank}`, "n1 0", "the head, not the worker that only lost it");
  assert.equal(rec?.cause, "RuntimeError: CUDA error: an illegal memory access was encountered");
  assert.deepEqual(read.sort(), ["n1:launcher-d-r0", "n2:launcher-d-r1"], "both ended ranks' logs read");
  assert.deepEqual(removed.sort(), ["n1:launcher-d-r0", "n2:launcher-d-r1"]);
  store.close();
});

test("supervisor: the head ended by itself saying only that a process of its own died; the worker this restart stopped (no cause, ended last) is not blamed", async () => {
  const store = twoRankStore();
  const removed: string[] = [];
  // The head exited on its own at 00:00:01; the worker ran until the restart stopped it (00:00:09, exit 137).
  const node = (name: string, rank: number, log: readonly string[], running: boolean): Docker => {
    let info: ContainerInfo = { id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, name), state: running ? "running" : "exited", running, exitCode: running ? 0 : 1, startedAt: "t", finishedAt: running ? "0001-01-01T00:00:00Z" : "2026-01-01T00:00:01Z", image: "img" };
    return Object.assign(Object.create(fakeDocker(name, rank, log, removed)) as Docker, {
      containers: async () => (removed.some((r) => r.startsWith(`${name}:`)) ? [] : [info]),
      stop: async () => void (info.running && (info = { ...info, state: "exited", running: false, exitCode: 137, finishedAt: "2026-01-01T00:00:09Z" })),
    });
  };
  // The kernel killed the head's own VllmWorker-0: its EngineCore says so with the peer-loss line.
  const headLog = ["2026-01-01T00:00:00.900000000Z (EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [multiproc_executor.py:150] Worker proc VllmWorker-0 died unexpectedly, shutting down executor."];
  const workerLog = ["2026-01-01T00:00:00.100000000Z (APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] Headless mode: worker rank 1 ready"];
  const session = { cluster: {}, docker: new Map([["n1", node("n1", 0, headLog, false)], ["n2", node("n2", 1, workerLog, true)]]) } as unknown as ClusterSession;
  const rec = await restartOnDeath(store, session, 0, "n1");
  assert.equal(`${rec?.node} ${rec?.rank}`, "n1 0", "the head ended first on its own");
  store.close();
});

test("supervisor: a restart stops the old group at once (no settle, no grace) and claims and checks the new one while the old is removed", async () => {
  const store = twoRankStore();
  const removed: string[] = [];
  const stops: string[] = [];
  const removals: (() => void)[] = [];
  const gated = (node: string, rank: number, log: readonly string[]): Docker => {
    const d = fakeDocker(node, rank, log, removed);
    return Object.assign(Object.create(d) as Docker, {
      stop: async (names: readonly string[], grace: number) => {
        stops.push(`${node}:${names.join(",")} grace ${grace}`);
        await d.stop(names, grace);
      },
      // The removal takes a while: the new group's boot is already under way meanwhile.
      stopAndRemove: async (names: readonly string[], grace: number) => {
        await new Promise<void>((resolve) => removals.push(resolve));
        await d.stopAndRemove(names, grace);
      },
    });
  };
  const session = { cluster: {}, docker: new Map([["n1", gated("n1", 0, [])], ["n2", gated("n2", 1, ["2026-01-01T00:00:00.100000000Z RuntimeError: CUDA error: an illegal memory access was encountered"])]]) } as unknown as ClusterSession;
  let bootCalledAt: number | undefined;
  let removedWhenBootCalled: number | undefined;
  let startedAfterRemoval = false;
  const sup = new Supervisor({
    store,
    session: async () => session,
    boot: async (_p, _s, _signal, _emit, _detach, recreating) => {
      bootCalledAt = Date.now();
      removedWhenBootCalled = removed.length;
      await recreating;
      startedAfterRemoval = removed.length === 2;
      return ready;
    },
    boots: new BootRegistry(Date.now),
    refresh: () => undefined,
    log: () => undefined,
    now: Date.now,
    timing: { confirmMs: 2000, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
  });
  sup.observe([status({})], Date.now() - 1000);
  const diedAt = Date.now();
  sup.died("c", { deployment: "d", node: "n2", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 1)" } });
  await within(5_000, "the new group's boot is called", async () => (bootCalledAt !== undefined ? true : undefined));
  assert.equal(removedWhenBootCalled, 0, "the boot (claims, checks) runs alongside the old group's removal");
  assert.ok((bootCalledAt ?? Infinity) - diedAt < 300, `no settle before the restart goes on (${(bootCalledAt ?? Infinity) - diedAt} ms)`);
  assert.deepEqual(stops.sort(), ["n1:launcher-d-r0 grace 0", "n2:launcher-d-r1 grace 0"], "every rank stopped at once, without grace");
  await within(5_000, "the removal is under way on both nodes", async () => (removals.length === 2 ? true : undefined));
  assert.equal(startedAfterRemoval, false);
  for (const go of removals) go();
  await sup.idle();
  assert.equal(startedAfterRemoval, true, "the first container waits for the removal");
  const [rec] = store.restarts("d", 10);
  // The worker died by itself before the head was stopped: it is the one named, with its cause.
  assert.equal(`${rec?.node} ${rec?.rank} ${rec?.outcome}`, "n2 1 ready");
  assert.equal(rec?.cause, "RuntimeError: CUDA error: an illegal memory access was encountered");
  await sup.stop();
  store.close();
});

test("supervisor: a group that failed with every rank running (an unhealthy head) is stopped whole, and the failure named is the one the polls saw, not the first rank stopped", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  served(store);
  const removed: string[] = [];
  const running = (node: string, rank: number, stoppedAt: string): Docker => {
    let info: ContainerInfo = { id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, node), state: "running", running: true, exitCode: 0, startedAt: "t", finishedAt: "0001-01-01T00:00:00Z", image: "img" };
    return Object.assign(Object.create(fakeDocker(node, rank, [], removed)) as Docker, {
      containers: async () => (removed.includes(`${node}:${info.name}`) ? [] : [info]),
      stop: async () => void (info = { ...info, state: "exited", running: false, exitCode: 137, finishedAt: stoppedAt }),
    });
  };
  // The worker happens to be stopped first.
  const session = { cluster: {}, docker: new Map([["n1", running("n1", 0, "2026-01-01T00:00:02Z")], ["n2", running("n2", 1, "2026-01-01T00:00:01Z")]]) } as unknown as ClusterSession;
  const sup = supervisorOf(store, session, new BootRegistry(Date.now), async () => ready);
  // Every rank runs, the head no longer answers /health.
  const unhealthy = status({ status: "degraded", phase: "-" });
  let clock = Date.now();
  sup.observe([status({})], clock);
  sup.observe([unhealthy], (clock += 100));
  sup.observe([unhealthy], (clock += 2500));
  await sup.idle();
  const [rec] = store.restarts("d", 10);
  assert.equal(`${rec?.reason} ${rec?.node} ${rec?.rank}`, "unhealthy n1 0", "the head the polls saw, not the worker this restart happened to stop first");
  await sup.stop();
  store.close();
});
