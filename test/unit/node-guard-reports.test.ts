import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { shellJoin } from "../../src/config/shell-words.js";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import { currentNodeGuardTrips, nodeGuardTripMessage, nodeGuardTripWords, type NodeGuardTripRecord } from "../../src/contract/node-guard-trip.js";
import { outageCauseWords } from "../../src/contract/outage.js";
import { KIB_PER_GIB } from "../../src/memory/memory-watch.js";
import { judgeOutage, OUTAGE_CLOCK_SLACK_MS, NODE_GUARD_HOME, NODE_GUARD_LOOK_SCRIPT, NODE_GUARD_READ_SCRIPT, nodeGuardLookArgv, nodeGuardStartArgv, parseNodeGuardReport, splitLookedGuards } from "../../src/memory/node-guard.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { UnreachableError, type ExecResult, type Transport } from "../../src/remote/transport.js";
import { Store } from "../../src/store/store.js";
import { BEAT_READ_MS, GuardBeats, NodeGuardReader, otherNodes, runningByNode, startsOn, tripOfLaunch, tripRecord, type SeenDeployment } from "../../src/supervise/node-guard-reader.js";
import { supervise, INITIAL } from "../../src/supervise/supervise.js";
import { Supervisor } from "../../src/supervise/supervisor.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import type { Plan } from "../../src/plan/plan.js";
import { encodeSavedPlan } from "../../src/plan/saved.js";
import { newerMemory, outageCause, outageHooksFor } from "../../src/daemon/outages.js";
import { statusLines, outageLines } from "../../src/cli/status.js";
import { guardTripHistoryLines, outageHistoryLines } from "../../src/cli/history.js";
import { FakeNode } from "../support/fake-node.js";
import { until } from "../support/until.js";

const ID_A = "a".repeat(64);
/** A look's nonce, as lookNodeGuards makes one. */
const NONCE = "0123456789abcdef";
const T0 = Date.UTC(2026, 0, 1);

test("the report parser reads the guard's stall lines, strictly", () => {
  assert.deepEqual(parseNodeGuardReport("started 1 floor=2 stall=5000\nstalled 9000 gap=7000\n"), [
    { kind: "started", atMs: 1, floorKiB: 2, stallMs: 5000 },
    { kind: "stalled", atMs: 9000, gapMs: 7000 },
  ]);
  for (const bad of ["stalled 1 gap=-1", "stalled 1 gap=1; reboot", "stalled x gap=1", "stalled 1 gap=1 more", "stalled 1"]) assert.deepEqual(parseNodeGuardReport(bad), [], bad);
});

/** A node in a folder with a `docker` that logs its calls and lists one container. */
function fakeHome(): { home: string; env: NodeJS.ProcessEnv; calls: () => string; done: () => void } {
  const home = mkdtempSync(path.join(tmpdir(), "node-guard-reports-"));
  const bin = path.join(home, "bin");
  mkdirSync(bin);
  const log = path.join(home, "docker.log");
  writeFileSync(path.join(bin, "docker"), `#!/bin/sh\necho "$*" >>${shellJoin([log])}\n[ "$1" = ps ] && echo ${ID_A}\nexit 0\n`);
  chmodSync(path.join(bin, "docker"), 0o755);
  return {
    home,
    env: { ...process.env, HOME: home, PATH: `${bin}:${process.env.PATH ?? ""}` },
    calls: () => (existsSync(log) ? readFileSync(log, "utf8") : ""),
    done: () => rmSync(home, { recursive: true, force: true }),
  };
}

const run = (argv: readonly string[], env: NodeJS.ProcessEnv): { code: number | null; stdout: string } => {
  const r = spawnSync("sh", ["-c", shellJoin(argv)], { env, encoding: "utf8", timeout: 10_000 });
  return { code: r.status, stdout: r.stdout };
};

test("a guard that was stopped (its node stalled) says so in its report when it runs again; its looks filter on its launch too", { timeout: 30_000 }, async () => {
  const node = fakeHome();
  let pid = 0;
  try {
    // A floor of 0 never trips; a beat every sample, a stall past 600 ms.
    const argv = nodeGuardStartArgv("dep-s", 0, "0123456789ab");
    // [..., beat, stall, launch, look bound]
    argv.splice(-4, 2, "1", "600");
    pid = Number(/^guard (\d+)$/m.exec(run(argv, node.env).stdout)?.[1]);
    const dir = path.join(node.home, NODE_GUARD_HOME, "dep-s");
    await until("the first beat", () => existsSync(path.join(dir, "heartbeat")), 10_000);
    assert.match(node.calls(), /^ps --quiet --no-trunc --filter label=launcher\.deployment=dep-s --filter label=launcher\.boot=0123456789ab$/m);
    // Its whole session stopped for a while, as a frozen node's processes are.
    process.kill(-pid, "SIGSTOP");
    await new Promise((r) => setTimeout(r, 1500));
    process.kill(-pid, "SIGCONT");
    const gaps = (): number[] => parseNodeGuardReport(readFileSync(path.join(dir, "report"), "utf8")).flatMap((e) => (e.kind === "stalled" ? [e.gapMs] : []));
    await until("the stop's stall in the report", () => gaps().some((g) => g >= 1400), 10_000, () => JSON.stringify(gaps()));
    // The look script hands back the heartbeat and the report, for a name asked and none other.
    // The guard rewrites its heartbeat each sample here: a look may meet it emptied, so the test looks until one has it.
    const look = (): ReturnType<typeof splitLookedGuards> => splitLookedGuards(run(nodeGuardLookArgv(NONCE, ["dep-s", "none-here"]) ?? [], node.env).stdout, ["dep-s", "none-here"], NONCE);
    let looked = look();
    await until("a look with the heartbeat", () => (looked = look()).get("dep-s")?.heartbeat !== undefined, 10_000);
    assert.deepEqual(looked.get("dep-s")?.events.map((e) => e.kind).slice(0, 2), ["started", "stalled"]);
    const first = looked.get("dep-s")?.events[0];
    assert.equal(first?.kind === "started" ? first.stallMs : undefined, 600, "the guard says it notes its stalls");
    assert.deepEqual(looked.get("none-here"), { events: [] });
  } finally {
    if (pid > 0) process.kill(-pid, "SIGKILL");
    node.done();
  }
});

test("the look's answer is untrusted: only names asked for, only the guard's lines", () => {
  const out = [`== ${NONCE} a`, "heartbeat 5000 available=7", "", "started 1 floor=2", "rm -rf /", `== ${NONCE} evil`, "started 3 floor=4", `== ${NONCE} b`, "heartbeat $(reboot)", ""].join("\n");
  const looked = splitLookedGuards(out, ["a", "b"], NONCE);
  assert.deepEqual([...looked.keys()], ["a", "b"]);
  assert.deepEqual(looked.get("a"), { heartbeat: { atMs: 5000, availableKiB: 7 }, events: [{ kind: "started", atMs: 1, floorKiB: 2 }, { kind: "started", atMs: 3, floorKiB: 4 }] });
  assert.deepEqual(looked.get("b"), { events: [] });
});

test("an outage judged by the node's guards: stalled through it (frozen), beating through it (its link), or unknown", () => {
  const since = T0 + 60_000;
  const ended = T0 + 120_000;
  const beat = { atMs: ended + 1000, availableKiB: 1 };
  const started = { kind: "started" as const, atMs: T0, floorKiB: 1, stallMs: 5000 };
  // A stall that overlaps it: the node itself stalled.
  assert.deepEqual(judgeOutage([{ heartbeat: beat, events: [started, { kind: "stalled", atMs: ended - 500, gapMs: 59_000 }] }], since, ended), { kind: "stalled", gap_ms: 59_000, at: new Date(ended - 500).toISOString() });
  // A stall long before it says nothing of it; the guard beat through it: its link was down.
  assert.deepEqual(judgeOutage([{ heartbeat: beat, events: [started, { kind: "stalled", atMs: T0 + 1000, gapMs: 900 }] }], since, ended), { kind: "ran", beat_at: new Date(beat.atMs).toISOString() });
  // A guard started after it began, one that ended before it ended, one with no beat now: nothing known.
  assert.equal(judgeOutage([{ heartbeat: beat, events: [{ ...started, atMs: since + 10_000 }] }], since, ended), undefined);
  assert.equal(judgeOutage([{ heartbeat: beat, events: [started, { kind: "ended", atMs: since + 1000, why: "containers-gone" }] }], since, ended), undefined);
  assert.equal(judgeOutage([{ events: [started] }], since, ended), undefined);
  // A guard that does not note its stalls (an older launcher's) never says it kept beating.
  assert.equal(judgeOutage([{ heartbeat: beat, events: [{ kind: "started", atMs: T0, floorKiB: 1 }] }], since, ended), undefined);
  assert.equal(judgeOutage([], since, ended), undefined);
  assert.match(outageCauseWords({ kind: "stalled", gap_ms: 59_000, at: "T" }, "frozen"), /the node itself stalled: its guard did not run for 59 s/);
  assert.match(outageCauseWords({ kind: "ran", beat_at: "T" }, "vanished"), /its guard kept beating .*its link was down/);
});

test("a node that came back is read with the look script, and what its guard says judged", async () => {
  const asked: string[][] = [];
  const report = (nonce: string | undefined): string => `== ${nonce ?? ""} d\nheartbeat ${T0 + 200_000} available=5\nstarted ${T0} floor=1\nstalled ${T0 + 119_000} gap=58000\n`;
  const transport: Transport = {
    node: "n2",
    exec: async (argv): Promise<ExecResult> => {
      asked.push([...argv]);
      return argv[2] === NODE_GUARD_LOOK_SCRIPT ? { code: 0, stdout: report(argv[4]), stderr: "" } : { code: 127, stdout: "", stderr: "" };
    },
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("no");
    },
  };
  const session = { cluster: {}, docker: new Map([["n2", { transport }]]) } as unknown as ClusterSession;
  const o = { cluster: "c", node: "n2", kind: "frozen" as const, since: new Date(T0 + 60_000).toISOString(), deployments: [{ deployment: "d", ranks: [1] }, { deployment: "../x", ranks: [0] }] };
  const cause = await outageCause({ session: async () => session, log: () => undefined }, o, new Date(T0 + 120_000).toISOString());
  assert.deepEqual(cause, { kind: "stalled", gap_ms: 58_000, at: new Date(T0 + 119_000).toISOString() });
  // A name that is no deployment name is never passed to the node.
  assert.deepEqual(asked.map((a) => a.slice(5)), [["d"]]);
});

const seenOf = (over: Partial<SeenDeployment> = {}): SeenDeployment => ({
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", endpoint: "http://n1:8000", boot: "b1",
  status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: new Date(T0).toISOString() },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "running", started_at: new Date(T0).toISOString() },
  ],
  ...over,
});

test("a trip is its launch's when stamped after its ranks there started; the other nodes are where it ran", () => {
  assert.equal(tripOfLaunch({ atMs: T0 + 5000 }, startsOn(seenOf().ranks, "n2")), true);
  assert.equal(tripOfLaunch({ atMs: T0 - 60_000 }, startsOn(seenOf().ranks, "n2")), false);
  assert.deepEqual(otherNodes(seenOf(), ["n1", "n2", "n3"], "n2"), ["n1"]);
  assert.deepEqual(otherNodes(undefined, ["n1", "n2", "n3"], "n2"), ["n1", "n3"]);
  const r = tripRecord("c", "d", "b1", "n2", { kind: "tripped", atMs: T0, availableKiB: KIB_PER_GIB / 2, floorKiB: 3 * KIB_PER_GIB, killed: [ID_A] }, T0 + 1000);
  assert.equal(r.message, "node guard on n2 killed d at 2026-01-01T00:00:00.000Z: MemAvailable 0.5 GiB below its floor 3.0 GiB");
  assert.equal(r.message, nodeGuardTripMessage("n2", "d", T0, KIB_PER_GIB / 2, 3 * KIB_PER_GIB));
  // A node not reached is never said to be stopped.
  assert.equal(nodeGuardTripWords({ ...r, stopped: ["n1"], unreached: ["n3"] }), `${r.message}; killed on n1 too; n3 could not be reached (what ran there is not known to be stopped)`);
});

const trip = (over: Partial<NodeGuardTripRecord> = {}): NodeGuardTripRecord => ({
  cluster: "c", deployment: "d", boot: "b1", node: "n2", at: new Date(T0).toISOString(), available_kib: 1, floor_kib: 2, killed: 1, stopped: ["n1"], unreached: [], message: "node guard on n2 killed d at T: MemAvailable 0.0 GiB below its floor 0.0 GiB", read_at: "R",
  ...over,
});

test("status and history say a trip of the launch that runs; an older launch's is history's only", () => {
  const ranks = seenOf({ status: "degraded", ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "exited", exit_code: 137 }, { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 137 }] });
  assert.deepEqual([...currentNodeGuardTrips([ranks], [trip({ boot: "b0", at: "Z" }), trip()]).keys()], ["d"]);
  assert.equal(currentNodeGuardTrips([ranks], [trip({ boot: "b0" })]).size, 0);
  const lines = statusLines([ranks], undefined, new Map(), new Date(), new Map(), [trip()]);
  assert.ok(lines.includes(`  killed: ${trip().message}; killed on n1 too (read by the daemon at R)`), lines.join("\n"));
  assert.ok(!statusLines([ranks], undefined, new Map(), new Date(), new Map(), [trip({ boot: "b0" })]).some((l) => l.includes("node guard")));
  assert.deepEqual(guardTripHistoryLines([trip()]), ["node guard trips (read by launcher serve):", `${trip().at}  c/d: ${trip().message}; killed on n1 too`]);
  const back = { cluster: "c", node: "n2", kind: "frozen" as const, since: new Date(T0).toISOString(), ended_at: new Date(T0 + 30_000).toISOString(), deployments: [{ deployment: "d", ranks: [1] }], cause: { kind: "stalled" as const, gap_ms: 29_000, at: "S" } };
  assert.match(outageLines([back], [], new Date(T0 + 60_000))[0] ?? "", /what runs there was read again; the node itself stalled: its guard did not run for 29 s/);
  assert.match(outageHistoryLines([back])[1] ?? "", /the node itself stalled/);
});

test("store: a trip is recorded once, its kills after; an outage keeps its guard's word", () => {
  const store = new Store(":memory:");
  assert.equal(store.saveNodeGuardTrip(trip({ stopped: [] })), true);
  assert.equal(store.saveNodeGuardTrip(trip({ stopped: [] })), false);
  store.saveNodeGuardKills({ ...trip(), stopped: ["n1"], unreached: ["n3"] });
  assert.deepEqual(store.nodeGuardTrips("c", "d", 10), [{ ...trip(), stopped: ["n1"], unreached: ["n3"] }]);
  assert.deepEqual(store.nodeGuardTrips("other", undefined, 10), []);
  store.saveOutage({ cluster: "c", node: "n2", kind: "frozen", since: "S", deployments: [] });
  store.endOutage("c", "n2", "frozen", "E");
  store.saveOutageCause("c", "n2", "S", { kind: "ran", beat_at: "B" });
  assert.deepEqual(store.outages("c", 10)[0]?.cause, { kind: "ran", beat_at: "B" });
  store.close();
});

test("supervise: a cause learnt while the group waits its backoff becomes what it says", () => {
  const policy = { mode: "on-failure" as const, max: 3 };
  const timing = { confirmMs: 1, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 };
  const ready = supervise(INITIAL, { kind: "observed", at: 1, status: seenOf(), recordedReady: true }, policy, timing).state;
  assert.equal(ready?.phase, "ready");
  const died = supervise(ready ?? INITIAL, { kind: "died", at: 10_000, failure: { kind: "rank-exited", rank: 1, node: "n2", message: "rank 1 on n2 exited (exit 137)" } }, policy, timing).state;
  assert.equal(died?.phase, "restarting");
  // Its first restart failed: the next waits its backoff.
  const waiting = supervise(died ?? INITIAL, { kind: "restart-ended", at: 11_000, ok: false }, policy, timing).state;
  assert.equal(waiting?.phase, "backoff");
  const blamed = supervise(waiting ?? INITIAL, { kind: "blamed", at: 10_001, failure: { kind: "node-guard", node: "n2", message: "node guard on n2 killed d" } }, policy, timing).state;
  assert.ok(blamed?.phase === "backoff" && blamed.failure.kind === "node-guard", JSON.stringify(blamed));
});

/** Two fake nodes of `d` (launch b1), n2's guard report as given; each node's read script answers it. */
function twoNodes(report: string): { session: ClusterSession; n1: FakeNode; n2: FakeNode } {
  const n1 = new FakeNode("n1");
  const n2 = new FakeNode("n2");
  // The launch's id is stamped at launch (src/boot/boot.ts), beside the plan's labels.
  const labels = (rank: number, node: string, boot = "b1") => ({ ...encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000" }), [LABELS.boot]: boot });
  n1.add("launcher-d-r0", labels(0, "n1"));
  n1.add("launcher-other", labels(0, "n1", "b0"));
  n2.add("launcher-d-r1", labels(1, "n2"), { state: "exited" });
  const withReport = (node: FakeNode, text: string): FakeNode => {
    const transport: Transport = { ...node.transport, exec: async (argv, o) => (argv[2] === NODE_GUARD_READ_SCRIPT ? { code: 0, stdout: text, stderr: "" } : node.transport.exec(argv, o)) };
    return Object.assign(Object.create(node) as FakeNode, { transport });
  };
  const session = { cluster: { name: "c", nodes: [] }, docker: new Map([["n1", withReport(n1, "")], ["n2", withReport(n2, report)]]) } as unknown as ClusterSession;
  return { session, n1, n2 };
}

test("the daemon's reader: a rank's death reads its node's report; a trip is recorded once, the launch killed on the other nodes, the supervisor told", async () => {
  const at = T0 + 10_000;
  const { session, n1 } = twoNodes(`started ${T0} floor=${3 * KIB_PER_GIB}\ntripped ${at} available=${KIB_PER_GIB} floor=${3 * KIB_PER_GIB} killed=${ID_A}\n`);
  const store = new Store(":memory:");
  const told: string[] = [];
  const logged: string[] = [];
  const reader = new NodeGuardReader({ session: async () => session, store, log: (l) => logged.push(l), now: () => T0 + 20_000, onTrip: (c, d, f) => told.push(`${c}/${d} ${f.kind} ${f.node ?? ""}`) });
  reader.observe([seenOf()]);
  reader.died("c", { deployment: "d", node: "n2", boot: "b1", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 137)" } });
  // The same trip read again, by a poll that shows the ended rank: nothing more is done.
  reader.observe([seenOf({ status: "degraded", ranks: [seenOf().ranks[0] as SeenDeployment["ranks"][number], { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 137, started_at: new Date(T0).toISOString() }] })]);
  await until("the trip recorded with its kills", () => store.nodeGuardTrips("c", "d", 5)[0]?.stopped.length === 1, 5000);
  const [rec] = store.nodeGuardTrips("c", "d", 5);
  assert.equal(rec?.message, nodeGuardTripMessage("n2", "d", at, KIB_PER_GIB, 3 * KIB_PER_GIB));
  assert.deepEqual([rec?.stopped, rec?.unreached, rec?.boot], [["n1"], [], "b1"]);
  // Only this launch's running container on n1 was killed; another launch's of the same name was not.
  assert.deepEqual(n1.asked("kill").map((c) => c.args[0]), [["n1-1"]]);
  assert.deepEqual(told, ["c/d node-guard n2"]);
  assert.equal((await reader.trips("c", "d", ["n1", "n2"])).length, 1);
  assert.deepEqual(told, ["c/d node-guard n2"], "a trip known is not told again");
  assert.ok(logged.some((l) => l.includes("killed on n1 too")), logged.join("\n"));
  store.close();
});

test("the daemon's reader: a node it cannot reach is said unreached, never stopped; an earlier launch's trip is not this one's", async () => {
  const { session } = twoNodes(`started ${T0} floor=2\ntripped ${T0 + 5000} available=1 floor=2 killed=${ID_A}\n`);
  const unreachable = { ...session, docker: new Map([...session.docker].map(([n, d]) => [n, n === "n1" ? Object.assign(Object.create(d) as FakeNode, { containers: async () => Promise.reject(new UnreachableError("n1", "ssh: connect to host n1 port 22: Connection timed out")) }) : d])) } as ClusterSession;
  const store = new Store(":memory:");
  const reader = new NodeGuardReader({ session: async () => unreachable, store, log: () => undefined, now: () => T0 + 20_000, onTrip: () => undefined });
  reader.observe([seenOf()]);
  const [rec] = await reader.trips("c", "d", ["n2"]);
  assert.deepEqual([rec?.stopped, rec?.unreached], [[], ["n1"]]);
  // A launch whose ranks started after the trip on n2: it is an older launch's.
  const told: string[] = [];
  const later = new NodeGuardReader({ session: async () => session, store: new Store(":memory:"), log: () => undefined, now: () => T0, onTrip: (_c, d) => told.push(d) });
  later.observe([seenOf({ ranks: seenOf().ranks.map((r) => ({ ...r, started_at: new Date(T0 + 60_000).toISOString() })) })]);
  assert.deepEqual(await later.trips("c", "d", ["n2"]), []);
  assert.deepEqual(told, [], "no trip of this launch");
  store.close();
});

test("supervisor: a group its node's guard killed is restarted with that reason, not the exit 137 of its ranks", async () => {
  const store = new Store(":memory:");
  const plan = {
    deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h", lane: "chat",
    recipe: { id: "r", engine: "vllm", docker_image: "img" },
    nodes: [0, 1].map((rank) => ({ rank, node: `n${rank + 1}`, container: `launcher-d-r${rank}`, labels: {}, argv: ["docker", "run", "--label", "launcher.deployment=d", "--", "img"] })),
    start_order: ["n1", "n2"],
    start: "head first",
  } as unknown as Plan;
  store.savePlan("c", "d", encodeSavedPlan(plan), "t");
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", lane: "chat", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1", "n2"] };
  store.deploymentReady({ ...b, boot_id: store.beginBoot({ ...b, started_at: "2026-01-01T00:00:00Z" }), ready_at: "2026-01-01T00:00:10Z" });
  const { session } = twoNodes("");
  const read: string[] = [];
  const sup = new Supervisor({
    store,
    session: async () => session,
    boot: async (_plan, _session, _signal, _emit, _detach, recreating) => {
      await recreating;
      return { status: "ready", deployment: "d", endpoint: "http://n1:8000", served_model: "m", seconds: 1 };
    },
    boots: new BootRegistry(Date.now),
    refresh: () => undefined,
    log: () => undefined,
    now: Date.now,
    timing: { confirmMs: 2000, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
    nodeGuard: { trips: async (_c, _d, nodes) => (read.push(nodes.join(",")), [trip()]), observe: () => undefined, died: () => undefined, stop: () => undefined },
  });
  sup.observe([seenOf({ restart: "on-failure:3" })], Date.now() - 1000);
  // Docker's word comes first: a rank that exited 137.
  sup.died("c", { deployment: "d", node: "n2", boot: "b1", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 137)" } });
  await sup.idle();
  const [rec] = store.restarts("d", 10);
  assert.deepEqual([rec?.reason, rec?.message, rec?.node], ["node-guard", trip().message, "n2"]);
  assert.ok(read[0]?.includes("n2"), read.join(";"));
  await sup.stop();
  store.close();
});

test("the guards' heartbeats: read at most every BEAT_READ_MS per node that runs ranks; the newest is the node's last memory when newer than the daemon's", async () => {
  const beats = new GuardBeats();
  beats.note("c", "n2", { atMs: 5, availableKiB: 7 });
  beats.note("c", "n2", { atMs: 3, availableKiB: 9 });
  assert.deepEqual(beats.of("c", "n2"), { atMs: 5, availableKiB: 7 });
  assert.deepEqual([...runningByNode([seenOf(), seenOf({ deployment: "e" })]).values()], [
    { cluster: "c", node: "n1", deployments: ["d", "e"] },
    { cluster: "c", node: "n2", deployments: ["d", "e"] },
  ]);
  const last = { totalKiB: 100, availableKiB: 50, at: new Date(T0).toISOString() };
  assert.deepEqual(newerMemory(last, { atMs: T0 + 1000, availableKiB: 20 }), { totalKiB: 100, availableKiB: 20, at: new Date(T0 + 1000).toISOString() });
  assert.deepEqual(newerMemory(last, { atMs: T0 - 1000, availableKiB: 20 }), last);
  assert.equal(newerMemory(undefined, { atMs: T0, availableKiB: 20 }), undefined);

  // The reader asks each node once per BEAT_READ_MS, with the deployments running there.
  let now = T0;
  const asked: string[] = [];
  const transport = (node: string): Transport => ({
    node,
    exec: async (argv): Promise<ExecResult> => {
      if (argv[2] !== NODE_GUARD_LOOK_SCRIPT) return { code: 127, stdout: "", stderr: "" };
      asked.push(`${node} ${argv.slice(5).join(",")}`);
      return { code: 0, stdout: `== ${argv[4] ?? ""} d\nheartbeat ${now} available=${node === "n1" ? 11 : 22}\n`, stderr: "" };
    },
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("no");
    },
  });
  const session = { cluster: {}, docker: new Map(["n1", "n2"].map((n) => [n, { transport: transport(n) }])) } as unknown as ClusterSession;
  const heard = new GuardBeats();
  const reader = new NodeGuardReader({ session: async () => session, store: new Store(":memory:"), log: () => undefined, now: () => now, onTrip: () => undefined, beats: heard });
  reader.observe([seenOf()]);
  await until("both nodes' beats", () => heard.of("c", "n2") !== undefined && heard.of("c", "n1") !== undefined, 5000);
  reader.observe([seenOf()]);
  now += BEAT_READ_MS;
  reader.observe([seenOf()]);
  await until("read again", () => asked.length === 4, 5000);
  assert.deepEqual(asked.sort(), ["n1 d", "n1 d", "n2 d", "n2 d"]);
  assert.deepEqual(heard.of("c", "n2"), { atMs: now, availableKiB: 22 });
  // Told to the outages: the heartbeat, and the memory when newer.
  const store = new Store(":memory:");
  store.saveWatchedMemory("c", "n2", "d", { totalKiB: 100, availableKiB: 50 }, new Date(T0).toISOString());
  const hooks = outageHooksFor(store, undefined, heard);
  // The node's clock against the daemon's: a beat counts as after an outage began only past the slack.
  assert.deepEqual(hooks.facts.heartbeat("c", "n2"), new Date(now - OUTAGE_CLOCK_SLACK_MS));
  assert.deepEqual(hooks.facts.memory("c", "n2"), { totalKiB: 100, availableKiB: 22, at: new Date(now).toISOString() });
  store.close();
});

test("a node back: the outage's end is kept at once, its guard's word said and kept once read", async () => {
  const transport: Transport = {
    node: "n2",
    exec: async (argv): Promise<ExecResult> => ({ code: 0, stdout: argv[2] === NODE_GUARD_LOOK_SCRIPT ? `== ${argv[4] ?? ""} d\nheartbeat ${T0 + 130_000} available=5\nstarted ${T0} floor=1 stall=5000\n` : "", stderr: "" }),
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("no");
    },
  };
  const session = { cluster: {}, docker: new Map([["n2", { transport }]]) } as unknown as ClusterSession;
  const store = new Store(":memory:");
  const logged: string[] = [];
  const hooks = outageHooksFor(store, { session: () => Promise.resolve(session), log: (l) => logged.push(l) });
  const o = { cluster: "c", node: "n2", kind: "vanished" as const, since: new Date(T0 + 60_000).toISOString(), deployments: [{ deployment: "d", ranks: [1] }] };
  hooks.started(o);
  hooks.ended(o, new Date(T0 + 120_000).toISOString());
  assert.equal(store.outages("c", 5)[0]?.ended_at, new Date(T0 + 120_000).toISOString());
  await until("its guard's word", () => logged.length > 0, 5000);
  assert.deepEqual(logged, [`+ node c/n2 (vanished since ${o.since}): its guard kept beating (last at ${new Date(T0 + 130_000).toISOString()}): the node ran, its link was down`]);
  assert.deepEqual(store.outages("c", 5)[0]?.cause, { kind: "ran", beat_at: new Date(T0 + 130_000).toISOString() });
  store.close();
});
