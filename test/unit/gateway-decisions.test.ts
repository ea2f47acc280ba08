import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { holdOrBusy, laneKey } from "../../src/claims/locks.js";
import { BOOT_PHASES, LABELS } from "../../src/contract/deployment.js";
import { upInLane, type LaneUpOptions } from "../../src/lanes/lane.js";
import { listNodes } from "../../src/nodes/labels.js";
import { stopDeployments } from "../../src/nodes/down.js";
import type { Plan } from "../../src/plan/plan.js";
import { Store } from "../../src/store/store.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { FakeCluster, RECIPE, UP_TO_MAX_LEN } from "../support/fake-cluster.js";
import { FakeGateway, type Answer } from "../support/fake-gateway.js";
import type { FakeNode } from "../support/fake-node.js";

// What a client of the gateway sees while launcher's real code boots, swaps and loses deployments
// on fake nodes (test/support): the route table is the daemon's own, made from each poll of the
// nodes' labels and the store's lanes (test/support/fake-gateway.ts says how). The rig keeps the
// end-to-end test of discovery across processes and of a killed container
// (test/integration/gateway.test.ts); what the client is answered at each step is decided here.

/** A recipe of BASE served as `served`. */
const recipe = (served: string): string => RECIPE.replace('"--served-model-name", "served"', `"--served-model-name", "${served}"`);

/** A head whose boot stops at loading until `open()`; `started` resolves once it said so. */
function gatedHead(fc: FakeCluster, deployment: string): { started: Promise<void>; open: () => void } {
  let open!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const reached = new Promise<void>((r) => (started = r));
  const serve = fc.script;
  fc.script = async (c: ContainerInfo, n: FakeNode) => {
    if (c.labels[LABELS.deployment] !== deployment || c.labels[LABELS.rank] !== "0") return serve(c, n);
    n.say(c.name, ...UP_TO_MAX_LEN);
    started();
    await gate;
    return serve(c, n);
  };
  return { started: reached, open };
}

const described = (a: Answer): string => (a.status === 200 ? (a.model ?? "?") : `${a.status} ${a.code ?? ""}`);

const dir = mkdtempSync(path.join(tmpdir(), "launcher-gateway-decisions-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let stores = 0;

/**
 * Four fake nodes, the store `up` writes, and the gateway reading that store through its own
 * connection (an `up` in a process of its own); `inDaemon`: through the very connection `up`
 * writes with (an `up` run by the daemon, through its control API).
 */
async function withGateway(body: (fc: FakeCluster, store: Store, gw: FakeGateway) => Promise<void>, inDaemon = false): Promise<void> {
  const fc = await FakeCluster.start({ nodes: 4 });
  const file = path.join(dir, `launcher-${++stores}.db`);
  const store = new Store(file);
  const gw = await FakeGateway.start(fc, inDaemon ? store : file);
  try {
    await body(fc, store, gw);
  } finally {
    await gw.close();
    await fc.close();
    store.close();
  }
}

test("a booting model: 503 with its phase and Retry-After; ready: 200; a rank gone: 503 naming it; stopped: 404", () =>
  withGateway(async (fc, store, gw) => {
    const plan = fc.plan(recipe("practice-slow"), { nodes: ["n3", "n4"], deployment: "slow" }, "slow");
    const head = gatedHead(fc, "slow");
    const boot = fc.up(plan);
    try {
      await head.started;
      await gw.poll();
      const booting = await gw.chat("practice-slow");
      assert.deepEqual([booting.status, booting.code, booting.retryAfter], [503, "model_booting", "10"]);
      const phase = /^model practice-slow \(deployment slow\) is booting: phase (\S+)/.exec(booting.message ?? "")?.[1];
      assert.ok(BOOT_PHASES.some((p) => p === phase && p !== "serving"), booting.message);
    } finally {
      head.open();
    }
    assert.equal((await boot).status, "ready");
    await gw.poll();
    assert.equal(described(await gw.chat("practice-slow")), "practice-slow");

    fc.node("n4").exit("launcher-slow-r1", 137);
    await gw.poll();
    const gone = await gw.chat("practice-slow");
    assert.deepEqual([gone.status, gone.code], [503, "deployment_degraded"]);
    assert.match(gone.message ?? "", /^model practice-slow \(deployment slow\) is not serving: missing rank 1 on n4 \(exited, exit 137\)/);

    // `launcher down slow`: its containers removed, the gateway forgets it.
    await stopDeployments(await listNodes(fc.session), ["slow"], { store, cluster: fc.cluster.name, now: () => new Date() }, { graceSeconds: 1 });
    assert.deepEqual(fc.containers(), []);
    await gw.poll();
    const forgotten = await gw.chat("practice-slow");
    assert.deepEqual([forgotten.status, forgotten.code], [404, "model_not_found"]);
  }));

/** Lane main serves practice-b on n3, n4; practice-c is put in it on the same nodes while a client asks for the lane. */
async function swapOntoOwnNodes(fc: FakeCluster, store: Store, gw: FakeGateway): Promise<void> {
  const options: LaneUpOptions = {
    lane: "main",
    store,
    now: () => new Date(),
    drainMs: 0,
    what: "launcher up (this test)",
    claim: async () => ({ release: async () => undefined }),
    findings: [],
    timeoutMs: 20_000,
    signal: new AbortController().signal,
    push: false,
    progress: fc.progress(),
  };
  const planOf = (id: string) => (nodes?: readonly string[]): Plan => fc.plan(recipe(id), { nodes: nodes ?? ["n3", "n4"], lane: "main", deployment: id }, id);
  /** `launcher up ID --lane main --nodes n3,n4`: the lane's lock held throughout, as the use case holds it (src/app/up-use-case.ts). */
  const upInMain = async (id: string) => {
    const release = holdOrBusy(store, [laneKey("main")], options.what, options.now);
    try {
      return await upInLane(planOf(id), true, fc.session, options);
    } finally {
      release();
    }
  };
  assert.equal((await upInMain("practice-b")).mode, "first");
  await gw.poll();
  assert.equal(described(await gw.chat("main")), "practice-b");

  const head = gatedHead(fc, "practice-c");
  const swap = upInMain("practice-c");
  // A client asks for the lane all along the swap, each request after a poll of the nodes.
  const seen: string[] = [];
  let switching: Answer | undefined;
  const client = (async () => {
    const deadline = Date.now() + 60_000;
    for (let i = 0; i < 10_000 && Date.now() < deadline && seen.at(-1) !== "practice-c"; i++) {
      await gw.poll();
      const a = await gw.chat("main");
      if (a.code === "lane_switching") switching = a;
      seen.push(described(a));
      // The new head waits for the gate until the lane was seen switching: then it may serve.
      if (switching !== undefined) head.open();
    }
  })();
  try {
    await head.started;
    await client;
  } finally {
    head.open();
  }
  assert.equal((await swap).mode, "overlap");
  const runs = seen.filter((x, i) => x !== seen[i - 1]);
  assert.match(runs.join(", "), /^(practice-b, )?503 lane_switching, practice-c$/, "only the old model, 503 switching, then the new model");
  assert.equal(switching?.retryAfter, "10");
  assert.match(switching?.message ?? "", /^lane main is switching from practice-b to practice-c/);
  assert.deepEqual(fc.containers(), ["n3:launcher-practice-c-r0:running", "n4:launcher-practice-c-r1:running"]);
}

test("lane swap onto its own nodes: the old model, then 503 switching while the new one boots, then the new model; nothing else", () => withGateway(swapOntoOwnNodes));

// The same swap run by the daemon (`up` goes through a running daemon by default, src/cli/up.ts):
// its lane writes go through the daemon's own store connection, which PRAGMA data_version does not
// count ("unchanged for changes committed on the same database connection",
// https://www.sqlite.org/pragma.html#pragma_data_version). A route cache blind to them never sees
// the lane switching: clients would get 503 model_booting (or 404 for a lane made since the daemon
// started) instead of 503 lane_switching.
test("lane swap onto its own nodes run by the daemon itself: the same answers", () => withGateway(swapOntoOwnNodes, true));
