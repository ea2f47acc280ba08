import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import { FakeCluster, RECIPE } from "../support/fake-cluster.js";
import { Store } from "../../src/store/store.js";
import { stopReplacedIn } from "../../src/lanes/lane.js";
import { stopDeployments } from "../../src/nodes/down.js";
import { listNodes } from "../../src/nodes/labels.js";
import { clusterStatus } from "../../src/nodes/status.js";
import type { Plan } from "../../src/plan/plan.js";
import { DEFAULT_LISTEN, DEFAULTS, seconds } from "../../src/contract/defaults.js";
import { parseDuration } from "../../src/config/duration.js";
import { registerDown } from "../../src/cli/down.js";
import { registerUp } from "../../src/cli/up.js";
import { registerServe } from "../../src/cli/serve.js";
import { registerExport } from "../../src/cli/export.js";
import { daemonConfig } from "../../src/daemon/config.js";
import { DEFAULT_TIMING } from "../../src/supervise/supervise.js";
import { DEFAULT_LEASE_MS } from "../../src/claims/claims.js";
import type { Output } from "../../src/app/output.js";

const T0 = "2026-01-01T00:00:00.000Z";

/** A store that notes which containers were still there each time a deployment was marked stopping. */
class NotingStore extends Store {
  readonly stoppingWith: string[][] = [];
  constructor(private readonly fc: FakeCluster) {
    super(":memory:");
  }
  override deploymentStopping(cluster: string, name: string, at: string): void {
    this.stoppingWith.push(this.fc.containers());
    super.deploymentStopping(cluster, name, at);
  }
}

/** `plan` recorded serving in `store`, as `up` records it once ready. */
function served(store: Store, plan: Plan): void {
  const boot = { deployment: plan.deployment, recipe: plan.recipe.id, recipe_hash: plan.recipe_hash, cluster: plan.cluster, served_model: plan.served_model, endpoint: plan.endpoint, nodes: plan.nodes.map((n) => n.node) };
  const id = store.beginBoot({ ...boot, started_at: T0 });
  store.deploymentReady({ ...boot, boot_id: id, ready_at: T0 });
}

test("a lane swap stops what it replaces as down does: marked stopping before any of its containers goes (a supervising daemon must not take that for a failure), then stopped", async () => {
  const fc = await FakeCluster.start({ nodes: 2 });
  try {
    const plan = fc.place(fc.plan(RECIPE, { nodes: ["n1", "n2"] }));
    const store = new NotingStore(fc);
    served(store, plan);
    const before = fc.containers();
    assert.equal(before.length, 2);
    const { deployments } = await clusterStatus(fc.session, new Date());
    const progress = fc.progress();
    await stopReplacedIn(fc.session, deployments, { lane: "l", store, now: () => new Date(), drainMs: 0, signal: new AbortController().signal, progress, cluster: plan.cluster });
    assert.deepEqual(store.stoppingWith, [before]);
    assert.deepEqual(fc.containers(), []);
    assert.equal(store.deploymentServed(plan.cluster, plan.deployment), false);
    assert.equal(store.servedEndpoint(plan.cluster, plan.deployment), undefined);
    assert.ok(progress.notes.includes(`lane l: stopped ${plan.deployment}`));
  } finally {
    await fc.close();
  }
});

test("stopDeployments records stopped only what no silent node may still run", async () => {
  const fc = await FakeCluster.start({ nodes: 3 });
  try {
    const plan = fc.place(fc.plan(RECIPE, { nodes: ["n1", "n2"] }));
    const store = new Store(":memory:");
    served(store, plan);
    const listing = [...(await listNodes(fc.session)).filter((l) => l.node !== "n3"), { node: "n3", reachable: false as const, reason: "timed out" }];
    const record = { store, cluster: plan.cluster, now: () => new Date() };
    const unknown = await stopDeployments(listing, [plan.deployment], record, { graceSeconds: 0 });
    assert.deepEqual(unknown.stopped, [], "n3 did not answer and nothing says where it runs");
    assert.equal(store.servedEndpoint(plan.cluster, plan.deployment), plan.endpoint);
    assert.equal(store.deploymentServed(plan.cluster, plan.deployment), false, "but it is marked stopping");
    const known = await stopDeployments(listing, [plan.deployment], record, { graceSeconds: 0, nodesOf: () => ["n1", "n2"] });
    assert.deepEqual(known.stopped, [plan.deployment]);
    assert.equal(store.servedEndpoint(plan.cluster, plan.deployment), undefined);
  } finally {
    await fc.close();
  }
});

test("each default is said once: the flags' defaults (and so their help) are DEFAULTS', in the same units", () => {
  const io = {} as Output;
  const program = new Command();
  registerUp(program, io);
  registerDown(program, io);
  const option = (command: string, flag: string): unknown => program.commands.find((c) => c.name() === command)?.options.find((o) => o.long === flag)?.defaultValue;
  assert.equal(option("up", "--timeout"), DEFAULTS.upTimeout.text);
  assert.equal(option("up", "--drain"), DEFAULTS.drain.text);
  assert.equal(option("down", "--grace"), DEFAULTS.stopGrace.text);
  for (const d of Object.values(DEFAULTS)) assert.equal(parseDuration(d.text, "x"), d.ms);
  assert.equal(seconds(DEFAULTS.stopGrace), 10);
  assert.equal(seconds(DEFAULTS.rollbackGrace), 3);
});

test("each of serve's defaults is said once: its flags' defaults (and help), the config without them, the supervisor's timing and the claim lease are DEFAULTS'", () => {
  const program = new Command();
  registerServe(program, {} as Output);
  registerExport(program, {} as Output);
  const serve = program.commands.find((c) => c.name() === "serve");
  const systemd = program.commands.find((c) => c.name() === "export")?.commands.find((c) => c.name() === "systemd");
  const option = (command: Command | undefined, flag: string): unknown => command?.options.find((o) => o.long === flag)?.defaultValue;
  assert.equal(option(serve, "--listen"), DEFAULT_LISTEN);
  assert.equal(option(systemd, "--listen"), DEFAULT_LISTEN);
  assert.equal(option(serve, "--poll"), DEFAULTS.poll.text);
  assert.equal(option(serve, "--restart-backoff"), DEFAULTS.restartBackoff.text);
  assert.equal(option(serve, "--upstream-timeout"), DEFAULTS.upstreamTimeout.text);
  assert.equal(option(serve, "--idle-timeout"), DEFAULTS.idleTimeout.text);
  // Without commander (a daemon started from code): the same values, from the same place.
  const config = daemonConfig({}, {}, { readFile: () => "", clusterPath: () => "/c.toml" });
  assert.equal(config.listenText, DEFAULT_LISTEN);
  assert.deepEqual(
    [config.pollMs, config.restartBackoffMs, config.upstreamTimeoutMs, config.idleTimeoutMs],
    [DEFAULTS.poll.ms, DEFAULTS.restartBackoff.ms, DEFAULTS.upstreamTimeout.ms, DEFAULTS.idleTimeout.ms],
  );
  assert.deepEqual(DEFAULT_TIMING, { confirmMs: DEFAULTS.restartConfirm.ms, backoffMs: DEFAULTS.restartBackoff.ms, maxBackoffMs: DEFAULTS.restartBackoffMax.ms, resetAfterMs: DEFAULTS.restartResetAfter.ms });
  assert.equal(DEFAULT_LEASE_MS, DEFAULTS.claimLease.ms);
  // As the README says them: serve's 60m, 10m and 2s, a restart confirmed over 2 s, backed off up to 5 minutes, anew after 10, a lease of 60 s.
  const { upstreamTimeout, idleTimeout, poll, restartConfirm, restartBackoffMax, restartResetAfter, claimLease } = DEFAULTS;
  assert.deepEqual([upstreamTimeout, idleTimeout, poll, restartConfirm, restartBackoffMax, restartResetAfter, claimLease].map((d) => d.ms), [3_600_000, 600_000, 2_000, 2_000, 300_000, 600_000, 60_000]);
});
