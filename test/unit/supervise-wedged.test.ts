import assert from "node:assert/strict";
import { test } from "node:test";
import { encodeLabels, type DeploymentStatus } from "../../src/contract/deployment.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { Supervisor, type Seen } from "../../src/supervise/supervisor.js";
import { supervise, INITIAL, type Supervised } from "../../src/supervise/supervise.js";
import type { Plan } from "../../src/plan/plan.js";
import { encodeSavedPlan } from "../../src/plan/saved.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import { Store } from "../../src/store/store.js";
import { within } from "../integration/practice-cluster.js";
import { dockerFrom } from "../support/docker-parts.js";

// A wedge handed to the supervisor: under --restart on-failure its group is recreated with the
// reason `wedged` (the history's), and the gateway's 503 says so while it restarts.

const MESSAGE = "deployment d is wedged since 2026-01-01T00:00:10.000Z: /health answers but no generation completed since then (its probe of one token got no answer within 30 s)";

const labels = () => encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank: 0, role: "head", node: "n1", nnodes: 1, nodes: ["n1"], cluster: "c", endpoint: "http://n1:8000", restart: { mode: "on-failure", max: 3 } });

/** The head runs (a wedged engine's container does): stopped and removed by the restart. */
function runningDocker(removed: string[]): Docker {
  let gone = false;
  let info: ContainerInfo = { id: "id0", name: "launcher-d-r0", labels: labels(), state: "running", running: true, exitCode: 0, startedAt: "t", finishedAt: "0001-01-01T00:00:00Z", image: "img" };
  return dockerFrom({
    containers: async () => (gone ? [] : [info]),
    stop: async () => {
      info = { ...info, state: "exited", running: false, exitCode: 137, finishedAt: "2026-01-01T00:00:20Z" };
    },
    stopAndRemove: async (names) => {
      removed.push(...names);
      gone = true;
    },
    logs: async function* () {
      yield* [];
    },
  });
}

const plan = {
  deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h",
  recipe: { id: "r", engine: "vllm", docker_image: "img" },
  nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] }],
  start_order: ["n1"],
  start: "head first",
} as unknown as Plan;

const serving = (over: Partial<DeploymentStatus> = {}): Seen => ({
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", restart: "on-failure:3", served_model: "m", endpoint: "http://n1:8000",
  status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" }],
  ...over,
});

test("policy: a wedge of a ready deployment restarts it at once (its bound was its confirmation), with the reason wedged", () => {
  const ready: Supervised = { phase: "ready", attempts: 0, streak: 0, since: 1000 };
  const d = supervise(ready, { kind: "died", at: 5000, failure: { kind: "wedged", message: MESSAGE } }, { mode: "on-failure", max: 3 });
  assert.deepEqual(d.actions, [{ kind: "restart", attempt: 1, failure: { kind: "wedged", message: MESSAGE } }]);
  // Not yet seen serving: not the supervisor's to restart.
  assert.deepEqual(supervise(INITIAL, { kind: "died", at: 5000, failure: { kind: "wedged", message: MESSAGE } }, { mode: "on-failure" }).actions, []);
});

test("supervisor: a wedged deployment under --restart on-failure is recreated, its restart recorded with the reason wedged; the gateway hears why meanwhile", async () => {
  const store = new Store(":memory:");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1"] };
  store.deploymentReady({ ...b, boot_id: store.beginBoot({ ...b, started_at: "2026-01-01T00:00:00Z" }), ready_at: "2026-01-01T00:00:10Z" });
  const removed: string[] = [];
  const session = { cluster: {}, docker: new Map([["n1", runningDocker(removed)]]) } as unknown as ClusterSession;
  let clock = 1000;
  const booted: string[] = [];
  let finish: (() => void) | undefined;
  const logs: string[] = [];
  const sup = new Supervisor({
    store,
    session: async (c) => (c === "c" ? session : undefined),
    boot: async (p, _s, _signal, _emit, _detach, recreating) => {
      await recreating;
      booted.push(p.deployment);
      await new Promise<void>((resolve) => (finish = resolve));
      return { status: "ready", deployment: "d", endpoint: "http://n1:8000", served_model: "m", seconds: 1 };
    },
    boots: new BootRegistry(() => clock),
    refresh: () => undefined,
    log: (l) => logs.push(l),
    now: () => clock,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  try {
    sup.observe([serving()], clock);
    clock += 100;
    sup.wedged("c", "d", MESSAGE);
    const r = sup.restarting();
    assert.equal(r.length, 1);
    assert.equal(r[0]?.reason, MESSAGE);
    await within(5000, "the restart's boot starts", async () => (finish !== undefined ? true : undefined)).catch((e: Error) => assert.fail(`${e.message}\n${logs.join("\n")}`));
    assert.deepEqual(removed, ["launcher-d-r0"], "the wedged group is taken down");
    assert.deepEqual(booted, ["d"]);
    const row = store.restarts("d", 5)[0];
    assert.equal(row?.reason, "wedged");
    assert.equal(row?.message, MESSAGE);
    assert.equal(row?.outcome, "restarting");
    finish?.();
    await sup.idle();
    assert.equal(store.restarts("d", 5)[0]?.outcome, "ready");
  } finally {
    await sup.stop();
    store.close();
  }
});

test("supervisor: a wedge of a deployment without --restart is no restart (the gateway only stops routing to it)", () => {
  const store = new Store(":memory:");
  const sup = new Supervisor({
    store,
    session: async () => undefined,
    boot: async () => assert.fail("no boot"),
    boots: new BootRegistry(() => 0),
    refresh: () => undefined,
    log: () => undefined,
    now: () => 0,
    timing: { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  const { restart: _r, ...unsupervised } = serving();
  sup.observe([unsupervised as Seen], 0);
  sup.wedged("c", "d", MESSAGE);
  assert.deepEqual(sup.restarting(), []);
  assert.deepEqual(sup.describe(), {});
  store.close();
});
