import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import type { DeploymentStatus } from "../../src/contract/deployment.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { runningLaunch, strangerReason, vouchFrom } from "../../src/claims/ownership.js";
import { Supervisor, type Seen } from "../../src/supervise/supervisor.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { Discovery } from "../../src/daemon/discovery.js";
import { engineKeyRefusal } from "../../src/daemon/engine-key.js";
import { routeTable } from "../../src/gateway/routes.js";
import { MIGRATIONS } from "../../src/store/migrations.js";
import { Store } from "../../src/store/store.js";
import { UserError } from "../../src/config/errors.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-ownership-"));
after(() => rmSync(dir, { recursive: true, force: true }));

// ---------------------------------------------------------------- the rule (pure)

test("ownership: a group is a stranger only when it conflicts with the launch this store holds running; one it holds none of is anyone's", () => {
  assert.equal(strangerReason({ deployment: "d", boot: "b1" }, "b1"), undefined);
  assert.match(strangerReason({ deployment: "d", boot: "evil" }, "b1") ?? "", /carry launch id "evil", but launcher launched d as b1, which it holds as running: if it is yours, launcher down d/);
  assert.match(strangerReason({ deployment: "d" }, "b1") ?? "", /carry no launch id/);
  // Launched from another machine, another store, or by hand: routed and supervised (README, "The gateway").
  assert.equal(strangerReason({ deployment: "d", boot: "b1" }, undefined), undefined);
  assert.equal(strangerReason({ deployment: "d" }, undefined), undefined);
});

test("ownership: the store holds a launch running while it serves, is being taken down with its key, or is a kept boot in progress; not once it is down", () => {
  const store = new Store(":memory:");
  const at = "2026-01-01T00:00:00Z";
  try {
    assert.equal(runningLaunch(store, "c", "d"), undefined, "never recorded");
    store.recordLaunch("c", "d", "b1", at);
    assert.equal(runningLaunch(store, "c", "d"), undefined, "recorded, but neither serving nor a kept boot (an up that failed, or one in another process before ready)");
    store.beginBootInProgress({ boot: "b1", cluster: "c", deployment: "d", plan: "{}", started_at: at, deadline_at: at, pid: 1, host: "h" });
    assert.equal(runningLaunch(store, "c", "d"), "b1", "a kept boot in progress");
    assert.equal(runningLaunch(store, "c2", "d"), undefined, "per cluster");
    store.endBootInProgress("b1");
    const boot = store.beginBoot({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "e", nodes: ["n1"], started_at: at });
    store.deploymentReady({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "e", nodes: ["n1"], boot_id: boot, ready_at: at }, "engine-key");
    assert.equal(runningLaunch(store, "c", "d"), "b1", "serving");
    store.deploymentStopping("c", "d", at);
    assert.equal(runningLaunch(store, "c", "d"), "b1", "being taken down, its key still given out");
    store.deploymentStopped("c", "d", at);
    assert.equal(runningLaunch(store, "c", "d"), undefined, "down: the name is free for another machine's launch");
    assert.equal(vouchFrom(store, () => new Date())({ cluster: "c", deployment: "d", boot: "from-elsewhere" }), undefined);
  } finally {
    store.close();
  }
});

test("ownership: a group with the right launch id but another endpoint than the one recorded serving is a stranger (a launch id is readable by docker inspect)", () => {
  const store = new Store(":memory:");
  const at = "2026-01-01T00:00:00Z";
  try {
    store.recordLaunch("c", "d", "b1", at);
    const vouch = vouchFrom(store, () => new Date());
    // Still booting: nothing recorded serving yet, so the launch id alone decides.
    store.beginBootInProgress({ boot: "b1", cluster: "c", deployment: "d", plan: "{}", started_at: at, deadline_at: at, pid: 1, host: "h" });
    assert.equal(vouch({ cluster: "c", deployment: "d", boot: "b1", endpoint: "http://10.0.0.11:8000" }), undefined);
    store.endBootInProgress("b1");
    const boot = store.beginBoot({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://10.0.0.11:8000", nodes: ["n1"], started_at: at });
    store.deploymentReady({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://10.0.0.11:8000", nodes: ["n1"], boot_id: boot, ready_at: at }, "engine-key");
    assert.equal(vouch({ cluster: "c", deployment: "d", boot: "b1", endpoint: "http://10.0.0.11:8000" }), undefined, "its own");
    assert.match(vouch({ cluster: "c", deployment: "d", boot: "b1", endpoint: "http://10.0.0.99:8000" }) ?? "", /say it serves at http:\/\/10\.0\.0\.99:8000, but launcher recorded d serving at http:\/\/10\.0\.0\.11:8000/);
    // Another store's deployment of that name, never recorded here: routed wherever it serves.
    assert.equal(vouch({ cluster: "c", deployment: "other", boot: "x", endpoint: "http://10.0.0.99:8000" }), undefined);
  } finally {
    store.close();
  }
});

// ---------------------------------------------------------------- the store

test("store: the launch id is recorded per deployment, a new launch replaces it; the migration keeps those of boots in progress", () => {
  const store = new Store(":memory:");
  assert.equal(store.launchedBoot("c", "d"), undefined);
  store.recordLaunch("c", "d", "b1", "t1");
  store.recordLaunch("c", "d", "b2", "t2");
  store.recordLaunch("c2", "d", "x", "t2");
  assert.equal(store.launchedBoot("c", "d"), "b2");
  assert.equal(store.launchedBoot("c2", "d"), "x");
  store.close();

  // A store of the version before: a boot a daemon left in progress is still adopted as launcher's.
  const file = path.join(dir, "old.db");
  const db = new Database(file);
  for (const m of MIGRATIONS.slice(0, 10)) db.exec(m);
  db.pragma("user_version = 10");
  db.prepare(`INSERT INTO boots_in_progress (boot, cluster, deployment, plan, started_at, deadline_at, pid, host) VALUES ('kept1', 'c', 'd', '{}', 't', 't', 1, 'h')`).run();
  db.prepare(`INSERT INTO deployments (cluster, name, recipe, recipe_hash, served_model, endpoint, nodes, ready_at) VALUES ('c', 'old', 'r', 'h', 'm', 'e', '[]', 't')`).run();
  db.close();
  const upgraded = new Store(file);
  assert.equal(upgraded.launchedBoot("c", "d"), "kept1");
  // One that served before the upgrade: its first launch seen is taken, once; another never.
  const vouch = vouchFrom(upgraded, () => new Date());
  assert.equal(vouch({ cluster: "c", deployment: "old", boot: "first" }), undefined);
  assert.equal(upgraded.launchedBoot("c", "old"), "first");
  assert.match(vouch({ cluster: "c", deployment: "old", boot: "second" }) ?? "", /launched old as first/);
  assert.equal(vouch({ cluster: "c", deployment: "never", boot: "x" }), undefined, "never recorded here: another store's launch, routed");
  upgraded.close();
});

// ---------------------------------------------------------------- discovery and routing

const group = (boot: string | undefined, over: Partial<DeploymentStatus> = {}): DeploymentStatus => ({
  deployment: "practice-2x", recipe: "practice-2x", recipe_hash: "h", lane: "main", served_model: "practice", endpoint: "http://10.0.0.9:8000",
  status: "serving", phase: "serving", uptime_seconds: 5, missing: [], unreachable: [],
  ranks: [{ rank: 0, node: "n1", container: "launcher-practice-2x-r0", state: "running", started_at: "t" }],
  ...(boot === undefined ? {} : { boot }),
  ...over,
});

/** A Discovery of one watcher that prints `groups` once; its first snapshot and its log. */
async function discovered(groups: readonly DeploymentStatus[], recorded: string | undefined) {
  const line = JSON.stringify({ deployments: groups, unreachable: [], at: new Date().toISOString() });
  const log: string[] = [];
  const discovery = new Discovery([{ cluster: "c", argv: [process.execPath, "-e", `process.stdout.write(${JSON.stringify(`${line}\n`)});setInterval(()=>{},1e9)`] }], (l) => log.push(l), 60_000, (d) => strangerReason(d, recorded));
  discovery.start();
  try {
    await discovery.ready(10_000);
    return { snapshot: discovery.snapshot(), log };
  } finally {
    await discovery.stop();
  }
}

test("discovery: containers with copied labels but a foreign launch id are reported and logged, never routed, and cannot take the lane", async () => {
  const mine = group("good", { endpoint: "http://10.0.0.1:8000", status: "booting", phase: "loading" });
  const evil = group("evil");
  const both = await discovered([mine, evil], "good");
  assert.deepEqual(both.snapshot.deployments.map((d) => d.boot), ["good"]);
  assert.deepEqual(both.snapshot.strangers.map((s) => `${s.cluster}/${s.deployment} ${s.boot ?? ""}`), ["c/practice-2x evil"]);
  assert.ok(both.log.some((l) => /^! c\/practice-2x: containers not launched by launcher are ignored \(not routed, not supervised\): .*"evil"/.test(l)), both.log.join("\n"));
  const lanes = [{ name: "main", cluster: "c", state: "serving" as const, since: "t", deployment: "practice-2x" }];
  const routes = routeTable(both.snapshot.deployments, lanes, undefined);
  for (const name of ["main", "practice"]) {
    const r = routes.resolve(name);
    assert.equal(r.kind, "unavailable", `${name}: the stranger serves, launcher's own boots`);
    assert.equal(r.kind === "unavailable" && r.code, "model_booting");
  }

  const alone = await discovered([evil], "good");
  assert.equal(alone.snapshot.deployments.length, 0);
  const r = routeTable(alone.snapshot.deployments, lanes).resolve("main");
  assert.equal(r.kind === "unavailable" && r.code, "lane_empty", "a stranger never takes the lane");
  // Launched by another machine's launcher (another store): no record here, routed as before.
  for (const boot of [undefined, "theirs"]) {
    const elsewhere = await discovered([group(boot)], undefined);
    assert.deepEqual(elsewhere.snapshot.strangers, [], `launch id ${boot ?? "(none)"}`);
    assert.equal(routeTable(elsewhere.snapshot.deployments, lanes).resolve("main").kind, "route", "a deployment this store never recorded routes");
  }
  const own = await discovered([group("good")], "good");
  assert.equal(routeTable(own.snapshot.deployments, lanes).resolve("main").kind, "route", "launcher's own launch routes");
});

// ---------------------------------------------------------------- supervision

const seen = (boot: string): Seen => ({ ...group(boot, { restart: "on-failure:3", ranks: [
  { rank: 0, node: "n1", container: "launcher-practice-2x-r0", state: "running", started_at: "t" },
  { rank: 1, node: "n2", container: "launcher-practice-2x-r1", state: "running", started_at: "t" },
], endpoint: "http://n1:8000" }), cluster: "c" });

test("supervisor: the death of a container with copied labels but a foreign launch id restarts nothing; its own launch's death does", async () => {
  const store = new Store(":memory:");
  const logs: string[] = [];
  const sup = new Supervisor({
    store,
    session: async () => undefined as ClusterSession | undefined,
    boot: async () => {
      throw new Error("no boot in this test");
    },
    boots: new BootRegistry(Date.now),
    refresh: () => undefined,
    log: (l) => logs.push(l),
    now: Date.now,
    timing: { confirmMs: 2000, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
  });
  try {
    sup.observe([seen("good")], Date.now() - 1000);
    const before = sup.describe()["c/practice-2x"];
    const death = (boot: string | undefined) => ({ deployment: "practice-2x", node: "n2", ...(boot === undefined ? {} : { boot }), failure: { kind: "rank-exited" as const, rank: 1, node: "n2", container: "launcher-practice-2x-r1", message: "rank 1 on n2 exited (exit 1)" } });
    sup.died("c", death("evil"));
    sup.died("c", death(undefined));
    assert.equal(sup.describe()["c/practice-2x"], before, "nothing changed");
    assert.equal(sup.restarting().length, 0);
    assert.equal(logs.filter((l) => /ignoring docker on n2: a container of launch "(evil|\(none\))" died, not of good/.test(l)).length, 2, logs.join("\n"));
    sup.died("c", death("good"));
    assert.notEqual(sup.describe()["c/practice-2x"], before, "its own launch's death is acted on");
  } finally {
    await sup.stop();
    store.close();
  }
});

// ---------------------------------------------------------------- boots refused up front

test("engine key: with gateway keys, a plan whose engine demands no key is refused naming the recipe file and what to add", () => {
  const plan = { deployment: "d", recipe: { id: "r", file: "/recipes/r/recipe.toml", engine: "vllm" as const } };
  const e = engineKeyRefusal(plan);
  assert.ok(e instanceof UserError);
  assert.match(e.message, /^\/recipes\/r\/recipe\.toml: recipe r sets no API key for its engine, and this daemon's gateway has API keys/);
  assert.match(e.hint ?? "", /add --api-key KEY to its args \(or VLLM_API_KEY to its \[env\]\) in \/recipes\/r\/recipe\.toml/);
  assert.equal(engineKeyRefusal({ ...plan, api_key: "k" }), undefined);
});
