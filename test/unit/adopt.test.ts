import assert from "node:assert/strict";
import { RemoteError } from "../../src/config/errors.js";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { adoptBoots, foundOf, orphansOf, timeLeft } from "../../src/daemon/adopt.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { thisMachine } from "../../src/claims/claims.js";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import type { NodeListing } from "../../src/nodes/labels.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { Supervisor } from "../../src/supervise/supervisor.js";
import type { UpEvent } from "../../src/boot/up-events.js";
import { decodeError } from "../../src/boot/up-events.js";
import type { Plan } from "../../src/plan/plan.js";
import { encodeSavedPlan } from "../../src/plan/saved.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import { Store, type BootInProgress } from "../../src/store/store.js";
import { Detached } from "../../src/config/abort.js";
import { within } from "../integration/practice-cluster.js";
import { fakeNode, readyEngine } from "../support/docker-parts.js";
import { FakeNode } from "../support/fake-node.js";
import { SETTLE_MS, watchAdoptedBoot } from "../../src/boot/up.js";

// Adoption of boots a dead daemon left: which are adopted, what the nodes must show, and the
// adopted boot watched to its end (ready, failed, cancelled, left again) against fake nodes.

const BOOT = "0123456789ab";
/** A pid no process has (above any pid_max): the daemon that kept the boot is dead. */
const DEAD_PID = 0x7ffffffe;

const kept = (over: Partial<BootInProgress>): BootInProgress => ({
  boot: BOOT,
  cluster: "c",
  deployment: "d",
  plan: "{}",
  started_at: "2026-01-01T00:00:00.000Z",
  deadline_at: "2099-01-01T00:00:00.000Z",
  pid: DEAD_PID,
  host: hostname(),
  ...over,
});

test("adopt: only boots whose daemon is dead on this host, of a watched cluster, are adopted; the others are left, said why", () => {
  const here = { pid: 100, host: "h" };
  const runs = (pid: number): boolean => pid === 200;
  const rows = [
    kept({ boot: "mine", pid: 100, host: "h" }),
    kept({ boot: "live", pid: 200, host: "h" }),
    kept({ boot: "dead", pid: 300, host: "h" }),
    kept({ boot: "elsewhere", pid: 300, host: "other" }),
    kept({ boot: "unwatched", pid: 300, host: "h", cluster: "x" }),
  ];
  const o = orphansOf(rows, here, runs, new Set(["c"]));
  assert.deepEqual(o.adopt.map((k) => k.boot), ["dead"]);
  assert.deepEqual(
    o.left.map((l) => [l.kept.boot, l.why]),
    [
      ["elsewhere", "it was started by a launcher serve on other, whose process cannot be checked from here"],
      ["unwatched", "its cluster x is not one this daemon watches (--cluster)"],
    ],
  );
});

const labelsOf = (rank: number, node: string, boot = BOOT): Record<string, string> => ({
  ...encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000", lane: "chat" }),
  [LABELS.boot]: boot,
});

const info = (rank: number, node: string, running: boolean, boot = BOOT): ContainerInfo => ({
  id: `id${rank}`,
  name: `launcher-d-r${rank}`,
  labels: labelsOf(rank, node, boot),
  state: running ? "running" : "exited",
  running,
  exitCode: running ? 0 : 1,
  startedAt: "2026-01-01T00:00:01Z",
  finishedAt: running ? "0001-01-01T00:00:00Z" : "2026-01-01T00:00:05Z",
  image: "img",
});

const twoRanks = {
  deployment: "d",
  cluster: "c",
  endpoint: "http://n1:8000",
  served_model: "m",
  recipe_hash: "h",
  lane: "chat",
  recipe: { id: "r", engine: "vllm", docker_image: "img" },
  nodes: [
    { rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run"] },
    { rank: 1, node: "n2", container: "launcher-d-r1", labels: {}, argv: ["docker", "run"] },
  ],
  start_order: ["n2", "n1"],
  start: "workers first",
} as unknown as Plan;

const listed = (node: string, containers: readonly ContainerInfo[]): NodeListing => ({
  node,
  reachable: true,
  docker: new FakeNode(node),
  containers: containers.map((c) => ({ node, c, labels: { deployment: "d" } as never })),
  strays: [],
  undecodable: [],
});

test("adopt: what the nodes show of a kept boot: every rank, none, or some (a node that cannot be read is not a missing rank)", () => {
  assert.deepEqual(foundOf(twoRanks, BOOT, [listed("n1", [info(0, "n1", true)]), listed("n2", [info(1, "n2", false)])]), { kind: "complete" });
  assert.deepEqual(foundOf(twoRanks, BOOT, [listed("n1", []), listed("n2", [info(1, "n2", true, "another0boot")])]), { kind: "gone" });
  assert.deepEqual(foundOf(twoRanks, BOOT, [listed("n1", []), listed("n2", [info(1, "n2", true)])]), { kind: "partial", missing: ["rank 0 on n1"] });
  assert.deepEqual(foundOf(twoRanks, BOOT, [{ node: "n1", reachable: false, reason: "SSH unreachable" }, listed("n2", [info(1, "n2", true)])]), { kind: "complete" });
});

test("adopt: an adopted boot keeps what is left of its --timeout; past its deadline it times out at once; a far one is not a timer that fires at once", () => {
  const now = new Date("2026-01-01T00:10:00.000Z");
  assert.equal(timeLeft("2026-01-01T00:30:00.000Z", now), 20 * 60_000);
  assert.equal(timeLeft("2026-01-01T00:00:00.000Z", now), 0);
  assert.equal(timeLeft("2099-01-01T00:00:00.000Z", now), 2 ** 31 - 1);
});

const oneRank = (endpoint: string, lane?: string): Plan =>
  ({
    ...twoRanks,
    endpoint,
    ...(lane === undefined ? { lane: undefined } : { lane }),
    nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run", "--label", `${LABELS.boot}=${BOOT}`, "--", "img"] }],
    start_order: ["n1"],
    start: "head first",
  }) as unknown as Plan;

/** The store as a daemon killed mid-boot leaves it: the boot kept, its history row, an open restart. */
function leftBehind(plan: Plan, withRestart: boolean): { store: Store; history: number } {
  const store = new Store(":memory:");
  const history = store.beginBoot({ deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: plan.endpoint, nodes: ["n1"], started_at: "2026-01-01T00:00:00.000Z" });
  store.beginBootInProgress({ boot: BOOT, cluster: "c", deployment: "d", ...(plan.lane === undefined ? {} : { lane: plan.lane }), plan: encodeSavedPlan(plan), started_at: "2026-01-01T00:00:00.000Z", deadline_at: "2099-01-01T00:00:00.000Z", pid: DEAD_PID, host: hostname() });
  store.bootInProgressRecorded(BOOT, history);
  if (withRestart) store.beginRestart({ cluster: "c", deployment: "d", attempt: 1, reason: "rank-exited", message: "rank 0 exited", started_at: "2026-01-01T00:00:00.000Z" });
  return { store, history };
}

const session = (docker: Docker): ClusterSession => ({ cluster: { nodes: [] }, docker: new Map([["n1", docker]]) }) as unknown as ClusterSession;
const deps = (store: Store, registry: BootRegistry, s: ClusterSession, logs: string[] = []) => ({ store, registry, clusters: ["c"], session: async (c: string) => (c === "c" ? s : undefined), log: (l: string) => logs.push(l), now: () => new Date() });
const SERVING_LOG = ["2026-01-01T00:00:02.000000000Z (APIServer pid=1) INFO 01-01 00:00:02 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"];

test("adopt: a boot left by a dead daemon is watched again (nothing started) and becomes ready: recorded as up records it, its restart row closed, its lane serving, attach follows it", async () => {
  const engine = await readyEngine();
  try {
    const plan = oneRank(engine.url, "chat");
    const { store, history } = leftBehind(plan, true);
    store.setLane({ name: "chat", cluster: "c", state: "empty", since: "t" });
    const removed: string[] = [];
    const run: string[] = [];
    const docker = fakeNode("n1", [info(0, "n1", true)], SERVING_LOG, false, removed);
    docker.run = async (a) => (run.push(a.join(" ")), "cid");
    const registry = new BootRegistry(Date.now);
    const logs: string[] = [];
    const adopted = adoptBoots(deps(store, registry, session(docker), logs));
    assert.equal(adopted.length, 1);
    assert.match(logs.join("\n"), new RegExp(`adopted the boot of d \\(${BOOT}\\) left by launcher serve pid ${DEAD_PID}`));
    // attach: the registry holds it under its name.
    const seen: UpEvent[] = [];
    registry.find("d")?.follow((e) => seen.push(e));
    const end = await (adopted[0]?.ended as Promise<UpEvent>);
    assert.equal(end.type, "result", JSON.stringify(end));
    assert.ok(seen.some((e) => e.type === "node" && e.state.phase === "serving"));
    assert.deepEqual([run, removed], [[], []], "nothing started, nothing removed");
    assert.equal(store.history(undefined, 5).find((b) => b.id === history)?.outcome, "ready");
    assert.equal(store.history(undefined, 5).length, 1, "the same history row, not a second boot");
    assert.ok(store.deploymentServed("c", "d"));
    assert.ok(store.savedPlan("c", "d")?.includes(BOOT));
    assert.deepEqual(store.bootsInProgress(), []);
    assert.deepEqual(store.restarts("d", 5).map((r) => r.outcome), ["ready"]);
    assert.equal(store.lane("chat")?.deployment, "d");
    assert.equal(store.lane("chat")?.state, "serving");
  } finally {
    engine.server.close();
  }
});

test("adopt: an adopted boot of a lane swap beside the old deployment finishes the swap once ready: the lane serves it, the old one is drained and stopped", async () => {
  const engine = await readyEngine();
  try {
    const plan = oneRank(engine.url, "chat");
    const { store } = leftBehind(plan, false);
    store.setLane({ name: "chat", cluster: "c", deployment: "old", recipe: "r0", served_model: "m", state: "serving", since: "t" });
    const swap = store.beginSwap({ lane: "chat", mode: "disjoint", from_deployment: "old", from_recipe: "r0", to_deployment: "d", to_recipe: "r", started_at: "t" });
    const old: ContainerInfo = {
      ...info(0, "n1", true),
      name: "launcher-old-r0",
      labels: encodeLabels({ deployment: "old", recipe: "r0", recipe_hash: "h0", engine: "vllm", served_model: "m", rank: 0, role: "head", node: "n1", nnodes: 1, nodes: ["n1"], cluster: "c", endpoint: "http://127.0.0.1:9", lane: "chat" }),
    };
    const removed: string[] = [];
    const registry = new BootRegistry(Date.now);
    const [entry] = adoptBoots(deps(store, registry, session(fakeNode("n1", [info(0, "n1", true), old], SERVING_LOG, false, removed))));
    const end = await (entry?.ended as Promise<UpEvent>);
    assert.equal(end.type, "result", JSON.stringify(end));
    assert.deepEqual(removed, ["n1:launcher-old-r0"]);
    assert.equal(store.lane("chat")?.deployment, "d");
    assert.deepEqual(store.swaps("chat", 5).map((x) => [x.id, x.outcome]), [[swap, "ok"]]);
  } finally {
    engine.server.close();
  }
});

test("adopt: an adopted boot whose container exited is rolled back (this boot's containers only), its rows closed failed, a lane switching to it left empty", async () => {
  const plan = oneRank("http://127.0.0.1:9", "chat");
  const { store, history } = leftBehind(plan, true);
  store.setLane({ name: "chat", cluster: "c", state: "switching", switching_to: "d", since: "t" });
  const removed: string[] = [];
  const log = ["2026-01-01T00:00:02.000000000Z (EngineCore_DP0 pid=1) ERROR 01-01 00:00:02 [core.py:1] RuntimeError: CUDA error: an illegal memory access was encountered"];
  const docker = fakeNode("n1", [info(0, "n1", false), info(1, "n1", true, "other0boot00")], log, true, removed);
  const registry = new BootRegistry(Date.now);
  const [entry] = adoptBoots(deps(store, registry, session(docker)));
  const end = await (entry?.ended as Promise<UpEvent>);
  assert.equal(end.type, "error");
  const error = decodeError((end as Extract<UpEvent, { type: "error" }>).error);
  assert.match(error.message, /boot of d failed/);
  assert.deepEqual(removed, ["n1:launcher-d-r0"], "only this boot's container");
  assert.equal(store.history(undefined, 5).find((b) => b.id === history)?.outcome, "failed");
  assert.deepEqual(store.bootsInProgress(), []);
  assert.deepEqual(store.restarts("d", 5).map((r) => r.outcome), ["failed"]);
  assert.equal(store.lane("chat")?.state, "empty");
});

test("adopt: a boot whose daemon died between its ranks' starts can never serve: what started is removed at once, nothing is watched", async () => {
  const store = new Store(":memory:");
  store.beginBootInProgress({ boot: BOOT, cluster: "c", deployment: "d", plan: encodeSavedPlan(twoRanks), started_at: "2026-01-01T00:00:00.000Z", deadline_at: "2099-01-01T00:00:00.000Z", pid: DEAD_PID, host: hostname() });
  const removed: string[] = [];
  const s = { cluster: { nodes: [] }, docker: new Map([["n1", fakeNode("n1", [], [], false, removed)], ["n2", fakeNode("n2", [info(1, "n2", true)], [], false, removed)]]) } as unknown as ClusterSession;
  const [entry] = adoptBoots(deps(store, new BootRegistry(Date.now), s));
  const end = await (entry?.ended as Promise<UpEvent>);
  const error = decodeError((end as Extract<UpEvent, { type: "error" }>).error);
  assert.match(error.message, /boot of d failed: its daemon stopped before it started rank 0 on n1, so it can never serve/);
  assert.deepEqual(removed, ["n2:launcher-d-r1"]);
  assert.deepEqual(store.bootsInProgress(), []);
});

test("adopt: down NAME cancels an adopted boot with the usual rollback; a daemon that stops leaves it again, kept for the next", async () => {
  for (const how of ["cancel", "detach"] as const) {
    const plan = oneRank("http://127.0.0.1:9");
    const { store, history } = leftBehind(plan, false);
    const removed: string[] = [];
    const registry = new BootRegistry(Date.now);
    // Booting: the log goes on, the engine does not answer yet.
    adoptBoots(deps(store, registry, session(fakeNode("n1", [info(0, "n1", true)], ["2026-01-01T00:00:02.000000000Z INFO loading"], false, removed))));
    const entry = registry.find("d");
    assert.ok(entry?.running);
    // The watch is under way (it has reported the node) before the boot is cancelled or left.
    await within(5_000, "the adopted boot's watch reports its node", async () => (entry.events.some((e) => e.type === "node") ? true : undefined));
    const end = how === "cancel" ? await entry.cancel("launcher down") : (await registry.detachAll("launcher serve stopping", 5000), await entry.ended);
    const error = decodeError((end as Extract<UpEvent, { type: "error" }>).error);
    const row = store.history(undefined, 5).find((b) => b.id === history);
    if (how === "cancel") {
      assert.match(error.message, /interrupted \(launcher down\)/);
      assert.deepEqual(removed, ["n1:launcher-d-r0"]);
      assert.equal(row?.outcome, "interrupted");
      assert.deepEqual(store.bootsInProgress(), []);
    } else {
      assert.match(error.message, /launcher serve stopped while d was booting/);
      assert.deepEqual(removed, [], "nothing rolled back");
      assert.equal(row?.outcome, "booting");
      assert.deepEqual(store.bootsInProgress().map((b) => [b.boot, b.pid]), [[BOOT, process.pid]], "kept, now as this daemon's, for the next one");
    }
  }
});

test("supervisor: a restart whose boot the stopping daemon left keeps its restart row open for the daemon that adopts the boot", async () => {
  const store = new Store(":memory:");
  const plan = oneRank("http://127.0.0.1:9");
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1"] };
  store.deploymentReady({ ...b, boot_id: store.beginBoot({ ...b, started_at: "t" }), ready_at: "t" });
  const removed: string[] = [];
  const s = session(fakeNode("n1", [info(0, "n1", false)], [], true, removed));
  let clock = 1000;
  let booting = false;
  const sup = new Supervisor({
    store,
    session: async () => s,
    boot: async (_p, _s, _signal, _emit, detach) => {
      booting = true;
      await new Promise<void>((resolve) => detach.addEventListener("abort", () => resolve(), { once: true }));
      throw new Detached("d");
    },
    boots: new BootRegistry(() => 0),
    refresh: () => undefined,
    log: () => undefined,
    now: () => clock,
    timing: { confirmMs: 0, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
  });
  const ranks = (state: "running" | "exited") => [{ rank: 0, node: "n1", container: "launcher-d-r0", state, started_at: "t", ...(state === "exited" ? { exit_code: 1, finished_at: "f" } : {}) }];
  const seen = (state: "running" | "exited") => ({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", restart: "on-failure", served_model: "m", endpoint: "http://n1:8000", status: state === "running" ? ("serving" as const) : ("degraded" as const), phase: state === "running" ? ("serving" as const) : ("-" as const), missing: state === "running" ? [] : ["rank 0 on n1 (exited, exit 1)"], unreachable: [], ranks: ranks(state) });
  sup.observe([seen("running")], clock);
  clock += 100;
  sup.observe([seen("exited")], clock);
  clock += 100;
  sup.observe([seen("exited")], clock);
  // The restart's own settle passes before its boot starts.
  await within(10_000, "the restart's boot runs", async () => (booting ? true : undefined));
  assert.deepEqual(store.restarts("d", 5).map((r) => r.outcome), ["restarting"]);
  await sup.stop();
  assert.deepEqual(store.restarts("d", 5).map((r) => r.outcome), ["restarting"], "left open: the adopting daemon ends it");
});

test("watch: the rank whose container ended first is blamed even when its end is heard after the settle (its container looked up slowly), not the head that saw it die", async () => {
  const removed: string[] = [];
  const head = fakeNode("n1", [info(0, "n1", true)], ["2026-01-01T00:00:06.000000000Z (EngineCore_DP0 pid=1) ERROR 01-01 00:00:06 [multiproc_executor.py:154] Worker proc VllmWorker-1 died unexpectedly, shutting down executor."], false, removed);
  const worker = fakeNode("n2", [info(1, "n2", false)], ["2026-01-01T00:00:05.000000000Z (Worker_TP1 pid=1) INFO 01-01 00:00:05 [multiproc_executor.py:702] Worker exiting"], true, removed);
  // On a busy machine the worker's container state is one slow SSH round trip away: longer than the settle.
  const slowWorker: Docker = Object.assign(Object.create(worker) as Docker, { containers: async (...a: Parameters<Docker["containers"]>) => (await new Promise((r) => setTimeout(r, SETTLE_MS + 900)), worker.containers(...a)) });
  const s = { cluster: { nodes: [] }, docker: new Map([["n1", head], ["n2", slowWorker]]) } as unknown as ClusterSession;
  const progress = { node: () => undefined, note: () => undefined, done: () => undefined };
  const error = await watchAdoptedBoot(twoRanks, BOOT, s, { timeoutMs: 60_000, signal: new AbortController().signal, progress }, Date.now()).then(
    () => assert.fail("the boot failed"),
    (e: Error) => e,
  );
  assert.equal(error.message, "boot of d failed: container exited with status 1");
  assert.equal((error as Error & { node?: string }).node, "n2 (rank 1)");
  // The same blame as values, for a reader (the page) that must not parse the words.
  assert.deepEqual((error as RemoteError).blamed, { node: "n2", rank: 1 });
});

test("adopt: an adopted boot takes its nodes' claims again (the dead daemon's own is taken over at once) and gives them back when it ends", async () => {
  // The node's claim script runs for real, here, in a home of its own.
  const home = mkdtempSync(path.join(tmpdir(), "launcher-adopt-claims-"));
  const claimFile = path.join(home, ".cache", "launcher", "claims", "node");
  const registry = new BootRegistry(Date.now);
  try {
    const plan = oneRank("http://127.0.0.1:9");
    const { store } = leftBehind(plan, false);
    const docker = fakeNode("n1", [info(0, "n1", true)], ["2026-01-01T00:00:02.000000000Z INFO loading"], false, []);
    (docker as unknown as { transport: unknown }).transport = {
      node: "n1",
      exec: async (argv: readonly string[]) => {
        const r = spawnSync(argv[0] as string, argv.slice(1), { encoding: "utf8", env: { ...process.env, HOME: home } });
        return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
      },
    };
    // The daemon that died held the claim: same machine, a pid that no longer runs.
    const dead = JSON.stringify({ id: "deadclaim", ...thisMachine(), pid: DEAD_PID, command: "launcher serve", deployment: "d", since: "2026-01-01T00:00:00Z", lease_seconds: 60 });
    spawnSync("sh", ["-c", 'mkdir -p "$1" && printf "%s\n%s\n" deadclaim "$2" > "$1/node"', "sh", path.dirname(claimFile), dead]);
    adoptBoots(deps(store, registry, session(docker)));
    const entry = registry.find("d");
    assert.ok(entry?.running);
    await within(5_000, "the adopted boot's watch reports its node", async () => (entry.events.some((e) => e.type === "node") ? true : undefined));
    const held = readFileSync(claimFile, "utf8");
    assert.match(held, /adopted boot of d/, "the node is claimed by this daemon's adoption");
    assert.doesNotMatch(held, /deadclaim/);
    await entry.cancel("launcher down");
    assert.equal(existsSync(claimFile), false, "given back when the boot ended");
  } finally {
    // Ended even when an assertion failed: its watch would go on for ever.
    if (registry.find("d")?.running === true) await registry.find("d")?.cancel("test over");
    rmSync(home, { recursive: true, force: true });
  }
});

test("adopt: a restart's boot adopted from a daemon that died and then failed is handed to the supervisor's backoff, and tried again after it, though no poll ever saw it", async () => {
  const plan = { ...(oneRank("http://127.0.0.1:9", "chat") as object), restart: { mode: "on-failure", max: 3 } } as unknown as Plan;
  const { store } = leftBehind(plan, true);
  const removed: string[] = [];
  const log = ["2026-01-01T00:00:02.000000000Z (EngineCore_DP0 pid=1) ERROR 01-01 00:00:02 [core.py:1] RuntimeError: CUDA error: an illegal memory access was encountered"];
  const s = session(fakeNode("n1", [info(0, "n1", false)], log, true, removed));
  const registry = new BootRegistry(Date.now);
  let clock = 1_000_000;
  const sup = new Supervisor({
    store,
    session: async () => s,
    boot: async () => assert.fail("no plan is kept here: the second try fails before it boots"),
    boots: registry,
    refresh: () => undefined,
    log: () => undefined,
    now: () => clock,
    timing: { confirmMs: 2000, backoffMs: 10_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
  });
  try {
    const [entry] = adoptBoots({ ...deps(store, registry, s), restartAdopted: (p, attempt, failure, ended) => sup.adoptedRestart(p, attempt, failure, ended) });
    assert.deepEqual(sup.describe(), { "c/d": "restarting (1 restart)" }, "the supervisor takes it as its restart under way");
    assert.equal(sup.restarting()[0]?.lane, "chat", "the gateway says restarting meanwhile");
    assert.equal((await entry?.ended)?.type, "error");
    await sup.idle();
    assert.deepEqual(sup.describe(), { "c/d": "backoff (1 restart)" }, "failed: its backoff, not forgotten");
    assert.equal(sup.restarting()[0]?.attempt, 2);
    clock += 10_000;
    sup.tick();
    await sup.idle();
    const rows = store.restarts("d", 5);
    assert.deepEqual(rows.map((r) => `${r.attempt} ${r.outcome}`), ["2 failed", "1 failed"], "tried again after the backoff");
  } finally {
    await sup.stop();
  }
});
