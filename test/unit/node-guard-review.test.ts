import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { shellJoin } from "../../src/config/shell-words.js";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import { outageCauseWords } from "../../src/contract/outage.js";
import { newerMemory, OUTAGE_LOOKS, outageCause, outageHooksFor } from "../../src/daemon/outages.js";
import { judgeOutage, NODE_GUARD_HOME, NODE_GUARD_LOOK_MAX_SECONDS, NODE_GUARD_LOOK_SCRIPT, NODE_GUARD_READ_SCRIPT, nodeGuardLookArgv, nodeGuardStartArgv, nodeGuardStopArgv, OUTAGE_CLOCK_SLACK_MS, parseNodeGuardHeartbeat, parseNodeGuardReport, splitLookedGuards, splitStoppedReports } from "../../src/memory/node-guard.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { ExecResult, Transport } from "../../src/remote/transport.js";
import { Store } from "../../src/store/store.js";
import { NodeGuardReader, startsOn, tripOfLaunch } from "../../src/supervise/node-guard-reader.js";
import { startNodeGuard } from "../../src/memory/node-guard-shell.js";
import { FakeNode } from "../support/fake-node.js";
import { until } from "../support/until.js";

// The defects a review found in the daemon's reading of the node guards (commit 3fefc42), each
// with the proof that it is gone.

const ID_A = "a".repeat(64);
const T0 = Date.UTC(2026, 0, 1);
const NONCE = "00112233445566778899aabb";

/** A node in a folder: HOME, and a bin/ first on PATH holding the fakes given (name -> sh body). */
function fakeNode(fakes: Record<string, string>): { home: string; env: NodeJS.ProcessEnv; file: (name: string) => string; done: () => void } {
  const home = mkdtempSync(path.join(tmpdir(), "node-guard-review-"));
  const bin = path.join(home, "bin");
  mkdirSync(bin);
  for (const [name, body] of Object.entries(fakes)) {
    writeFileSync(path.join(bin, name), `#!/bin/sh\n${body.replaceAll("$HOME_Q", shellJoin([home]))}\n`);
    chmodSync(path.join(bin, name), 0o755);
  }
  return {
    home,
    env: { ...process.env, HOME: home, PATH: `${bin}:${process.env.PATH ?? ""}` },
    file: (name) => (existsSync(path.join(home, name)) ? readFileSync(path.join(home, name), "utf8") : ""),
    done: () => rmSync(home, { recursive: true, force: true }),
  };
}

/** Runs argv as the transport does (shellJoin, read by sh: dash here, as on Ubuntu and DGX OS). */
const run = (argv: readonly string[], env: NodeJS.ProcessEnv): { code: number | null; stdout: string } => {
  const r = spawnSync("sh", ["-c", shellJoin(argv)], { env, encoding: "utf8", timeout: 10_000 });
  return { code: r.status, stdout: r.stdout };
};

const alive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "")[0] !== "Z";
  } catch {
    return false;
  }
};

/** Starts a guard of `dep` that never trips (floor 0): a look every `every` samples, a beat every sample, a stall past `stallMs`, a look given up after `lookSeconds`. */
function startGuard(node: ReturnType<typeof fakeNode>, dep: string, every: number, stallMs: number, lookSeconds = NODE_GUARD_LOOK_MAX_SECONDS): number {
  const argv = nodeGuardStartArgv(dep, 0);
  // [..., interval, every, beat, stall, launch, look bound]
  argv.splice(-5, 3, String(every), "1", String(stallMs));
  argv.splice(-1, 1, String(lookSeconds));
  const pid = Number(/^guard (\d+)$/m.exec(run(argv, node.env).stdout)?.[1]);
  assert.ok(pid > 0);
  return pid;
}

/** A fake node whose dockerd answers a ps only while its gate file is gone (a node short of memory, or stopped); each ps logs its pid. */
function gatedNode(): ReturnType<typeof fakeNode> & { gate: (closed: boolean) => void; pending: () => boolean; psPids: () => number[] } {
  const node = fakeNode({ docker: `[ "$1" = ps ] || exit 0\necho "start $$" >>$HOME_Q/ps.log\nwhile [ -e $HOME_Q/gate ]; do sleep 0.05; done\necho ${ID_A}` });
  const psPids = (): number[] => [...node.file("ps.log").matchAll(/^start (\d+)$/gm)].map((m) => Number(m[1]));
  return {
    ...node,
    gate: (closed) => (closed ? writeFileSync(path.join(node.home, "gate"), "") : rmSync(path.join(node.home, "gate"), { force: true })),
    // A look under way: a ps of it still runs (one killed with its guard never logs its end).
    pending: () => psPids().some(alive),
    psPids,
  };
}

test("a look that waits on dockerd is no stall and no pause of the guard: it samples and beats meanwhile, and a node stopped meanwhile is said stalled", { timeout: 40_000 }, async () => {
  const node = gatedNode();
  const report = (): string => node.file(path.join(NODE_GUARD_HOME, "dep-slow", "report"));
  const beat = (): number | undefined => parseNodeGuardHeartbeat(node.file(path.join(NODE_GUARD_HOME, "dep-slow", "heartbeat")))?.atMs;
  let pid = 0;
  try {
    // A look every 2 samples, a beat every sample, a stall past 2 s.
    pid = startGuard(node, "dep-slow", 2, 2000);
    await until("the first beat", () => beat() !== undefined, 10_000);
    node.gate(true);
    await until("a look waiting on dockerd", node.pending, 10_000);
    const before = beat() ?? 0;
    await until("beats while the look waits", () => (beat() ?? 0) > before + 1500, 10_000, report);
    assert.ok(node.pending(), "the look still waits");
    // The node stopped whole while its look waits: the guard's next sample says how long.
    process.kill(-pid, "SIGSTOP");
    await new Promise((r) => setTimeout(r, 3000));
    process.kill(-pid, "SIGCONT");
    const stopped = (): boolean => parseNodeGuardReport(report()).some((e) => e.kind === "stalled" && e.gapMs >= 2900);
    await until("the stop's stall in the report", stopped, 10_000, report);
    node.gate(false);
    await until("the look answered", () => !node.pending(), 10_000);
    assert.deepEqual([...new Set(parseNodeGuardReport(report()).map((e) => e.kind))], ["started", "stalled"], report());
    assert.ok(alive(pid), "the guard runs on");
  } finally {
    if (pid > 0 && alive(pid)) process.kill(-pid, "SIGKILL");
    node.done();
  }
});

test("a look that dockerd never answers is given up at its bound: the guard looks again and runs on", { timeout: 40_000 }, async () => {
  const node = gatedNode();
  let pid = 0;
  try {
    pid = startGuard(node, "dep-wedged", 2, 60_000, 1);
    await until("the guard's first two looks", () => node.psPids().length >= 2, 10_000);
    node.gate(true);
    await until("a look waiting on dockerd", node.pending, 10_000);
    const wedged = node.psPids().length;
    // Given up after 1 s (killed by timeout), and another started; none answered meanwhile.
    await until("a later look", () => node.psPids().length >= wedged + 2, 20_000);
    assert.ok(alive(pid), "the guard runs on");
    assert.deepEqual(parseNodeGuardReport(node.file(path.join(NODE_GUARD_HOME, "dep-wedged", "report"))).map((e) => e.kind), ["started"]);
  } finally {
    if (pid > 0 && alive(pid)) process.kill(-pid, "SIGKILL");
    node.done();
  }
});

test("a guard ended while its look waits on dockerd ends with that look: the stop script, and a new guard of the name", { timeout: 40_000 }, async () => {
  const node = gatedNode();
  let pid = 0;
  try {
    for (const end of ["start", "stop"] as const) {
      node.gate(false);
      const looks = node.psPids().length;
      pid = startGuard(node, "dep-ended", 2, 2000);
      // Its first look, waited for, and the first in the background.
      await until("the guard's first two looks", () => node.psPids().length >= looks + 2, 10_000);
      node.gate(true);
      await until("a look waiting on dockerd", node.pending, 10_000);
      const waiting = node.psPids().filter(alive).at(-1) ?? 0;
      // A new guard of the name ends the old one first; the stop script ends it for good.
      const next = end === "start" ? startGuard(node, "dep-ended", 2, 2000) : 0;
      if (end === "stop") run(nodeGuardStopArgv(["dep-ended"]) ?? [], node.env);
      await until("the old guard and its look gone", () => !alive(pid) && !alive(waiting), 10_000);
      if (next > 0) {
        // Its own first look: it runs, its process group made (setsid).
        await until("the new guard's first look", () => node.psPids().filter(alive).some((p) => p !== waiting), 10_000);
        assert.ok(alive(next), "the new guard runs");
        process.kill(-next, "SIGKILL");
      }
      node.gate(false);
      await until("no look left", () => !node.pending(), 10_000);
    }
  } finally {
    if (pid > 0 && alive(pid)) process.kill(-pid, "SIGKILL");
    node.done();
  }
});

test("on a node whose HOME is a symbolic link, a new guard of the name still ends the one before it", { timeout: 30_000 }, async () => {
  const node = fakeNode({ docker: `[ "$1" = ps ] && echo ${ID_A}\nexit 0` });
  const linked = `${node.home}-link`;
  const guards: number[] = [];
  try {
    symlinkSync(node.home, linked);
    const at = { ...node, env: { ...node.env, HOME: linked } };
    for (let i = 0; i < 2; i++) guards.push(startGuard(at, "dep-link", 30, 60_000));
    const [first = 0, second = 0] = guards;
    await until("the first guard ended", () => !alive(first), 10_000);
    assert.ok(alive(second), "the second guard runs");
  } finally {
    for (const pid of guards) if (alive(pid)) process.kill(pid, "SIGKILL");
    rmSync(linked, { force: true });
    node.done();
  }
});

test("a node without setsid(1): the guard's start fails before anything, and its error says why", async () => {
  const node = fakeNode({});
  try {
    // Its PATH holds sh alone: no setsid (nor anything else the start would run after the check).
    symlinkSync("/bin/sh", path.join(node.home, "bin", "sh"));
    const transport: Transport = {
      node: "n2",
      exec: async (argv): Promise<ExecResult> => {
        const r = spawnSync("/bin/sh", ["-c", shellJoin(argv)], { env: { ...node.env, PATH: path.join(node.home, "bin") }, encoding: "utf8", timeout: 10_000 });
        return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
      },
      stream: () => (async function* () {})(),
      spawn: () => {
        throw new Error("no");
      },
    };
    await assert.rejects(startNodeGuard(transport, "dep-nosetsid", 0), (e: Error) => e.message === "starting the node guard failed (exit 1): setsid(1) is not installed on this node (util-linux)");
    assert.equal(existsSync(path.join(node.home, NODE_GUARD_HOME)), false, "nothing made");
  } finally {
    node.done();
  }
});

test("a date(1) without %3N (busybox) does not end the guard: its stamps are its seconds in ms, its arithmetic never sees a word", { timeout: 30_000 }, async () => {
  const node = fakeNode({ docker: `[ "$1" = ps ] && echo ${ID_A}\nexit 0`, date: `echo x >>$HOME_Q/date.log\necho 1796459154%3N` });
  let pid = 0;
  try {
    // A stall only past a minute: this test is about the stamps, not stalls.
    pid = startGuard(node, "dep-busybox", 30, 60_000);
    await until("many beats", () => node.file("date.log").split("\n").length > 8, 20_000);
    assert.ok(alive(pid), "the guard still runs");
    const dir = path.join(node.home, NODE_GUARD_HOME, "dep-busybox");
    // The guard rewrites its heartbeat each beat here: a read may meet it emptied, so the test waits for a whole one.
    const beat = (): ReturnType<typeof parseNodeGuardHeartbeat> => parseNodeGuardHeartbeat(node.file(path.join(NODE_GUARD_HOME, "dep-busybox", "heartbeat")));
    let stamped: number | undefined;
    await until("a whole heartbeat", () => (stamped = beat()?.atMs) !== undefined, 10_000);
    assert.equal(stamped, 1796459154000);
    const events = parseNodeGuardReport(readFileSync(path.join(dir, "report"), "utf8"));
    assert.deepEqual(events.map((e) => [e.kind, e.atMs]), [["started", 1796459154000]]);
  } finally {
    if (pid > 0 && alive(pid)) process.kill(-pid, "SIGKILL");
    node.done();
  }
});

test("an outage is the node's own stall only when the guard's gap covers it; a shorter pause is said as one", () => {
  const since = T0 + 60_000;
  const ended = T0 + 180_000;
  const started = { kind: "started" as const, atMs: T0, floorKiB: 1, stallMs: 5000 };
  const beat = { atMs: ended + 1000, availableKiB: 1 };
  // 7 s of a 120 s outage: the guard paused, the node did not stall throughout.
  assert.deepEqual(judgeOutage([{ heartbeat: beat, events: [started, { kind: "stalled", atMs: since + 20_000, gapMs: 7000 }] }], since, ended), { kind: "paused", gap_ms: 7000, at: new Date(since + 20_000).toISOString() });
  // All of it but the clocks' slack at each end: the node itself stalled.
  const whole = 120_000 - 2 * OUTAGE_CLOCK_SLACK_MS;
  assert.equal(judgeOutage([{ heartbeat: beat, events: [started, { kind: "stalled", atMs: ended, gapMs: whole }] }], since, ended)?.kind, "stalled");
  assert.equal(judgeOutage([{ heartbeat: beat, events: [started, { kind: "stalled", atMs: ended, gapMs: whole - 1 }] }], since, ended)?.kind, "paused");
  assert.match(outageCauseWords({ kind: "paused", gap_ms: 7000, at: "T" }, "vanished"), /^its guard paused 7 s during it \(until T\)/);
  // A guard that waited on a slow look during it saw nothing meanwhile: it does not say the node ran.
  assert.equal(judgeOutage([{ heartbeat: beat, events: [started, { kind: "waited", atMs: since + 30_000, lookMs: 20_000 }] }], since, ended), undefined);
  assert.equal(judgeOutage([{ heartbeat: beat, events: [started, { kind: "waited", atMs: T0 + 1000, lookMs: 6000 }] }], since, ended)?.kind, "ran");
  assert.deepEqual(parseNodeGuardReport("waited 9000 look=6000\nwaited 1 look=x\n"), [{ kind: "waited", atMs: 9000, lookMs: 6000 }]);
});

test("a guard that kept beating through a frozen outage (its SSH port answered) says SSH did not answer, not that its link was down", () => {
  const ran = { kind: "ran" as const, beat_at: "B" };
  assert.equal(outageCauseWords(ran, "frozen"), "its guard kept beating (last at B): the node ran; SSH did not answer");
  assert.equal(outageCauseWords(ran, "vanished"), "its guard kept beating (last at B): the node ran, its link was down");
});

test("the look's name lines carry its nonce and start a line: a report cannot hand its lines to another name, nor swallow the next name line", () => {
  const node = fakeNode({});
  try {
    const dir = (name: string): string => {
      const d = path.join(node.home, NODE_GUARD_HOME, name);
      mkdirSync(d, { recursive: true });
      return d;
    };
    writeFileSync(path.join(dir("other"), "heartbeat"), "5000 available=7\n");
    // a's report forges a name line and a heartbeat for `other`, and lacks its last newline.
    writeFileSync(path.join(dir("a"), "report"), "started 1 floor=2\n== other\n== 0011 other\nheartbeat 99 available=1\nstarted 3 floor=4");
    writeFileSync(path.join(dir("b"), "heartbeat"), "6000 available=8\n");
    const argv = nodeGuardLookArgv(NONCE, ["other", "a", "b", "../x"]) ?? [];
    assert.deepEqual(argv.slice(4), [NONCE, "other", "a", "b"], "a name that is no deployment name is never asked for");
    const looked = splitLookedGuards(run(argv, node.env).stdout, ["other", "a", "b"], NONCE);
    assert.deepEqual(looked.get("other"), { heartbeat: { atMs: 5000, availableKiB: 7 }, events: [] });
    assert.deepEqual(looked.get("a")?.events, [{ kind: "started", atMs: 1, floorKiB: 2 }, { kind: "started", atMs: 3, floorKiB: 4 }]);
    assert.deepEqual(looked.get("b"), { heartbeat: { atMs: 6000, availableKiB: 8 }, events: [] });
    assert.throws(() => nodeGuardLookArgv("x; reboot", ["a"]));
  } finally {
    node.done();
  }
});

test("the stop script's name lines start a line: a report without its last newline does not swallow the next one's", () => {
  const node = fakeNode({});
  try {
    for (const [name, report] of [["a", "started 1 floor=2"], ["b", "started 3 floor=4\n"]]) {
      const d = path.join(node.home, NODE_GUARD_HOME, name as string);
      mkdirSync(d, { recursive: true });
      writeFileSync(path.join(d, "report"), report as string);
    }
    const reports = splitStoppedReports(run(nodeGuardStopArgv(["a", "b"]) ?? [], node.env).stdout, ["a", "b"]);
    assert.deepEqual(parseNodeGuardReport(reports.get("a") ?? ""), [{ kind: "started", atMs: 1, floorKiB: 2 }]);
    assert.deepEqual(parseNodeGuardReport(reports.get("b") ?? ""), [{ kind: "started", atMs: 3, floorKiB: 4 }]);
  } finally {
    node.done();
  }
});

test("a trip is this launch's only when a start of it there is known: none known, or Docker's zero time, is not this launch's", () => {
  assert.equal(tripOfLaunch({ atMs: T0 }, []), false);
  assert.deepEqual(startsOn([{ node: "n2", started_at: "0001-01-01T00:00:00Z" }, { node: "n2" }, { node: "n1", started_at: new Date(T0).toISOString() }], "n2"), []);
  assert.deepEqual(startsOn([{ node: "n2", started_at: new Date(T0).toISOString() }], "n2"), [T0]);
});

/** Nodes n1..n3 of `d`: n1 runs launch b1's rank 0, n2's rank 1 (ended) has the report given, n3 runs only another launch's. */
function threeNodes(report: string): { session: ClusterSession; n1: FakeNode; n3: FakeNode } {
  const [n1, n2, n3] = ["n1", "n2", "n3"].map((n) => new FakeNode(n)) as [FakeNode, FakeNode, FakeNode];
  const labels = (rank: number, node: string, boot: string) => ({ ...encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000" }), [LABELS.boot]: boot });
  n1.add("launcher-d-r0", labels(0, "n1", "b1"));
  n2.add("launcher-d-r1", labels(1, "n2", "b1"), { state: "exited" });
  n3.add("launcher-d-r0", labels(0, "n3", "b0"));
  const withReport = (node: FakeNode, text: string): FakeNode => {
    const transport: Transport = { ...node.transport, exec: async (argv, o) => (argv[2] === NODE_GUARD_READ_SCRIPT ? { code: 0, stdout: text, stderr: "" } : node.transport.exec(argv, o)) };
    return Object.assign(Object.create(node) as FakeNode, { transport });
  };
  const session = { cluster: { name: "c", nodes: [] }, docker: new Map([["n1", withReport(n1, "")], ["n2", withReport(n2, report)], ["n3", withReport(n3, "")]]) } as unknown as ClusterSession;
  return { session, n1, n3 };
}

test("a death heard before the first snapshot: the launch is the dead container's, its start asked of its node; only a node where the launch's containers were listed and killed is said stopped", async () => {
  // The fake node's containers started now: the trip is stamped after.
  const at = Date.now() + 1000;
  const { session, n1, n3 } = threeNodes(`started ${at - 5000} floor=2\ntripped ${at} available=1 floor=2 killed=${ID_A}\n`);
  const store = new Store(":memory:");
  const told: string[] = [];
  const reader = new NodeGuardReader({ session: async () => session, store, log: () => undefined, now: () => at + 1000, onTrip: (_c, d) => told.push(d) });
  reader.died("c", { deployment: "d", node: "n2", boot: "b1", failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 137)" } });
  await until("the trip recorded with its kills", () => told.length === 1, 5000);
  const [rec] = store.nodeGuardTrips("c", "d", 5);
  assert.deepEqual([rec?.boot, rec?.stopped, rec?.unreached], ["b1", ["n1"], []]);
  // By id, the one listed: every launch's container has the same name.
  assert.deepEqual(n1.asked("kill").map((c) => c.args[0]), [["n1-1"]]);
  assert.deepEqual(n3.asked("kill"), [], "another launch's container is not killed");
  store.close();
});

/** A transport whose look answers `out(nonce)` (ssh's 255 for the first `unanswered`), counting the looks. */
function lookingTransport(out: (nonce: string) => string, gate?: Promise<void>, unanswered = 0): { transport: Transport; looks: () => number } {
  let looks = 0;
  const transport: Transport = {
    node: "n2",
    exec: async (argv): Promise<ExecResult> => {
      if (argv[2] !== NODE_GUARD_LOOK_SCRIPT) return { code: 127, stdout: "", stderr: "" };
      looks += 1;
      await gate;
      if (looks <= unanswered) return { code: 255, stdout: "", stderr: "Connection timed out during banner exchange" };
      return { code: 0, stdout: out(argv[4] ?? ""), stderr: "" };
    },
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("no");
    },
  };
  return { transport, looks: () => looks };
}

const sessionOf = (transport: Transport): ClusterSession => ({ cluster: {}, docker: new Map([["n2", { transport }]]) }) as unknown as ClusterSession;

test("a node back is read again while the guard started last has not beaten since: an earlier guard's end in the same report does not stop it", async () => {
  const since = T0 + 60_000;
  const ended = T0 + 120_000;
  // An older guard of the name ended long ago; the one started after it beat last before the outage.
  const { transport, looks } = lookingTransport((n) => `== ${n} d\nheartbeat ${since - 1000} available=5\nstarted ${T0 - 90_000} floor=1 stall=5000\nended ${T0 - 60_000} containers-gone\nstarted ${T0} floor=1 stall=5000\n`);
  const o = { cluster: "c", node: "n2", kind: "frozen" as const, since: new Date(since).toISOString(), deployments: [{ deployment: "d", ranks: [1] }] };
  assert.equal(await outageCause({ session: async () => sessionOf(transport), log: () => undefined }, o, new Date(ended).toISOString(), 1), undefined);
  assert.equal(looks(), OUTAGE_LOOKS);
});

test("a node back that does not answer the read of its guards at first (it runs again slowly) is read again, and its stall said", async () => {
  const since = T0 + 60_000;
  const ended = T0 + 120_000;
  const { transport, looks } = lookingTransport((n) => `== ${n} d\nheartbeat ${ended + 1000} available=5\nstarted ${T0} floor=1 stall=5000\nstalled ${ended + 500} gap=61000\n`, undefined, 2);
  const o = { cluster: "c", node: "n2", kind: "frozen" as const, since: new Date(since).toISOString(), deployments: [{ deployment: "d", ranks: [1] }] };
  assert.deepEqual(await outageCause({ session: async () => sessionOf(transport), log: () => undefined }, o, new Date(ended).toISOString(), 1), { kind: "stalled", gap_ms: 61_000, at: new Date(ended + 500).toISOString() });
  assert.equal(looks(), 3);
  // One that never answers is given up after OUTAGE_LOOKS reads: nothing is said of it.
  const silent = lookingTransport(() => "", undefined, Infinity);
  assert.equal(await outageCause({ session: async () => sessionOf(silent.transport), log: () => undefined }, o, new Date(ended).toISOString(), 1), undefined);
  assert.equal(silent.looks(), OUTAGE_LOOKS);
});

test("a node back whose look ends after the daemon stopped keeps nothing and throws nowhere (its store is closed)", async () => {
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const { transport, looks } = lookingTransport((n) => `== ${n} d\nheartbeat ${T0 + 200_000} available=5\nstarted ${T0} floor=1 stall=5000\nstalled ${T0 + 119_000} gap=58000\n`, gate);
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown): void => void unhandled.push(e);
  process.on("unhandledRejection", onUnhandled);
  try {
    const store = new Store(":memory:");
    const stop = new AbortController();
    const logged: string[] = [];
    const hooks = outageHooksFor(store, { session: () => Promise.resolve(sessionOf(transport)), log: (l) => logged.push(l), signal: stop.signal });
    const o = { cluster: "c", node: "n2", kind: "vanished" as const, since: new Date(T0 + 60_000).toISOString(), deployments: [{ deployment: "d", ranks: [1] }] };
    hooks.started(o);
    hooks.ended(o, new Date(T0 + 120_000).toISOString());
    await until("the look under way", () => looks() === 1, 5000);
    // The daemon stops: its looks are told, then its store closes; the node answers after.
    stop.abort();
    store.close();
    release();
    // Two turns of the event loop: an unhandled rejection is reported after the microtasks.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
    assert.deepEqual(logged, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("a guard's heartbeat is the node's clock: it says the node lived after an outage began only past the clocks' slack", () => {
  const store = new Store(":memory:");
  const hooks = outageHooksFor(store, undefined, { of: () => ({ atMs: T0, availableKiB: 1 }) });
  assert.deepEqual(hooks.facts.heartbeat("c", "n2"), new Date(T0 - OUTAGE_CLOCK_SLACK_MS));
  assert.equal(newerMemory(undefined, { atMs: T0, availableKiB: 1 }), undefined);
  store.close();
});
