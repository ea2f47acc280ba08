import assert from "node:assert/strict";
import { test } from "node:test";
import { BootRegistry } from "../../src/supervise/boots.js";
import { encodeLabels } from "../../src/contract/deployment.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { INITIAL, supervise, type Failure } from "../../src/supervise/supervise.js";
import type { Seen } from "../../src/supervise/supervisor.js";
import type { UpOutcome } from "../../src/boot/up-events.js";
import { routeTable } from "../../src/gateway/routes.js";
import type { Plan } from "../../src/plan/plan.js";
import { encodeSavedPlan } from "../../src/plan/saved.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import { Store } from "../../src/store/store.js";
import { within } from "../integration/practice-cluster.js";
import { dockerFrom } from "../support/docker-parts.js";
import { supervisorOf } from "./supervisor-fixture.js";

// The restart's 503 names the rank the restart blamed, the one history records (issue 25: the
// clients were told "after rank 0 on n1 exited (exit 1)" while history said rank 1 on n2, killed).

const policy = { mode: "on-failure", max: 3 } as const;
const labels = (rank: number, node: string) =>
  encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000", restart: policy });

const plan = {
  deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h",
  recipe: { id: "r", engine: "vllm", docker_image: "img" },
  nodes: [
    { rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] },
    { rank: 1, node: "n2", container: "launcher-d-r1", labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] },
  ],
  start_order: ["n1", "n2"],
  start: "head first",
} as unknown as Plan;

const seen: Seen = {
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", restart: "on-failure:3", served_model: "m", endpoint: "http://n1:8000",
  status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "running", started_at: "t" },
  ],
};

/** A node whose rank of `d` has ended (at `finishedAt`, with `exitCode`), its log `log`. */
function ended(node: string, rank: number, exitCode: number, finishedAt: string, log: readonly string[]): Docker {
  let gone = false;
  const info: ContainerInfo = { id: `id${rank}`, name: `launcher-d-r${rank}`, labels: labels(rank, node), state: "exited", running: false, exitCode, startedAt: "t", finishedAt, image: "img" };
  return dockerFrom({
    containers: async () => (gone ? [] : [info]),
    stopAndRemove: async () => void (gone = true),
    logs: async function* () {
      yield* log;
    },
  });
}

/** A served deployment whose two ranks ended as `n1` and `n2` say, in a store, and a supervisor over them whose restart's boot waits for `finish()`. */
function restartRig(n1: Docker, n2: Docker) {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1", "n2"] };
  store.deploymentReady({ ...b, boot_id: store.beginBoot({ ...b, started_at: "2026-01-01T00:00:00Z" }), ready_at: "2026-01-01T00:00:10Z" });
  const session = { cluster: {}, docker: new Map([["n1", n1], ["n2", n2]]) } as unknown as ClusterSession;
  let finish: (() => void) | undefined;
  const ready: UpOutcome = { status: "ready", deployment: "d", endpoint: "http://n1:8000", served_model: "m", seconds: 1 };
  const sup = supervisorOf(store, session, new BootRegistry(Date.now), async () => {
    await new Promise<void>((resolve) => (finish = resolve));
    return ready;
  });
  return { store, sup, booting: () => finish !== undefined, finish: () => finish?.() };
}

test("restart 503: names the rank the restart blamed (as history records it), not the death heard of first", async () => {
  // The worker was killed (137) first; the head then lost it (exit 1), and its death was heard of first.
  const headLog = ["2026-01-01T00:00:01.400000000Z (EngineCore_DP0 pid=1) ERROR 01-01 00:00:01 [multiproc_executor.py:154] Worker proc VllmWorker-1 died unexpectedly, shutting down executor."];
  const rig = restartRig(ended("n1", 0, 1, "2026-01-01T00:00:01.5Z", headLog), ended("n2", 1, 137, "2026-01-01T00:00:01Z", []));
  const { store, sup } = rig;
  try {
    sup.observe([seen], Date.now() - 1000);
    sup.died("c", { deployment: "d", node: "n1", failure: { kind: "rank-exited", rank: 0, node: "n1", container: "launcher-d-r0", message: "rank 0 on n1 exited (exit 1)" } });
    const version = sup.version;
    // The old group is taken down (and the rank to blame named) before the new one boots.
    await within(5_000, "the restart's boot starts", async () => (rig.booting() ? true : undefined));
    const [rec] = store.restarts("d", 10);
    assert.equal(rec?.message, "rank 1 on n2 exited (exit 137)", "history");
    const [r] = sup.restarting();
    assert.equal(r?.reason, rec?.message, "the 503's reason is history's");
    assert.ok(sup.version > version, "the gateway is told to rebuild its routes");
    const answer = routeTable([], [], undefined, [], sup.restarting()).resolve("m");
    assert.equal(answer.kind, "unavailable");
    assert.match(answer.kind === "unavailable" ? answer.message : "", /is restarting \(restart 1 of at most 3\) after rank 1 on n2 exited \(exit 137\)$/);
  } finally {
    rig.finish();
    await sup.stop();
    store.close();
  }
});

test("restart blame: the death that started it, silent, before a head that only lost it, though the head's end was stamped first", async () => {
  // The worker was killed (137) and heard of first; the head lost it in its next collective (NCCL's
  // remote error, a lost peer) and exited. A busy node's containerd stamped the worker's end late.
  const h = "(Worker_TP0 pid=400) ERROR 01-01 00:00:01 [multiproc_executor.py:820] ";
  const headLog = [`${h}WorkerProc hit an exception.`, `${h}torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL version 2.27.3`];
  const rig = restartRig(ended("n1", 0, 1, "2026-01-01T00:00:01.500Z", headLog), ended("n2", 1, 137, "2026-01-01T00:00:01.507Z", []));
  const { store, sup } = rig;
  try {
    sup.observe([seen], Date.now() - 1000);
    sup.died("c", { deployment: "d", node: "n2", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 137)" } });
    await within(5_000, "the restart's boot starts", async () => (rig.booting() ? true : undefined));
    const [rec] = store.restarts("d", 10);
    assert.equal(rec?.message, "rank 1 on n2 exited (exit 137)", "history blames the killed worker");
    assert.equal(rec?.node, "n2");
  } finally {
    rig.finish();
    await sup.stop();
    store.close();
  }
});

test("supervise: a blame during a restart replaces its failure (a later try says it too); at any other time it changes nothing", () => {
  const first: Failure = { kind: "rank-exited", rank: 0, node: "n1", message: "rank 0 on n1 exited (exit 1)" };
  const named: Failure = { kind: "rank-exited", rank: 1, node: "n2", message: "rank 1 on n2 exited (exit 137)" };
  const timing = { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 };
  const readyState = supervise(INITIAL, { kind: "observed", at: 1, status: seen, recordedReady: true }, policy, timing).state;
  assert.equal(readyState?.phase, "ready");
  const restarting = supervise(readyState!, { kind: "died", at: 2, failure: first }, policy, timing).state!;
  assert.equal(restarting.phase, "restarting");
  const blamed = supervise(restarting, { kind: "blamed", at: 3, failure: named }, policy, timing);
  assert.deepEqual(blamed.actions, []);
  assert.equal(blamed.state?.phase === "restarting" ? blamed.state.failure.message : undefined, named.message);
  // The boot failed: the backoff before the next try says the blamed rank.
  const backoff = supervise(blamed.state!, { kind: "restart-ended", at: 4, ok: false }, policy, timing).state;
  assert.equal(backoff?.phase === "backoff" ? backoff.failure.message : undefined, named.message);
  // Not restarting: nothing to rename.
  assert.deepEqual(supervise(readyState!, { kind: "blamed", at: 5, failure: named }, policy, timing).state, readyState);
});
