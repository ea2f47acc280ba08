import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { shellJoin } from "../../src/config/shell-words.js";
import { nodeFloorGiB, KIB_PER_GIB } from "../../src/memory/memory-watch.js";
import {
  floorKiB,
  lastTrip,
  nodeGuardFloorKiB,
  NODE_GUARD_HOME,
  NODE_GUARD_SCRIPT,
  NODE_GUARD_START_SCRIPT,
  nodeGuardStartArgv,
  nodeGuardStopArgv,
  parseNodeGuardHeartbeat,
  parseNodeGuardReport,
  splitStoppedReports,
} from "../../src/memory/node-guard.js";
import { startGuard } from "../../src/memory/guard.js";
import { FakeNode, meminfoText } from "../support/fake-node.js";
import { until } from "../support/until.js";

const ID_A = "a".repeat(64);
const ID_B = "0123456789ab".repeat(4);

test("the start argv carries the scripts and figures as words, after the deployment's name", () => {
  const argv = nodeGuardStartArgv("qwen-3.5_a", 2.5);
  assert.deepEqual(argv.slice(0, 6), ["sh", "-c", NODE_GUARD_START_SCRIPT, "sh", "qwen-3.5_a", NODE_GUARD_SCRIPT]);
  // Its floor: 2.5 GiB less a quarter of it (under 4 GiB, the margin is a quarter).
  assert.deepEqual(argv.slice(6), [String(1.875 * KIB_PER_GIB), "launcher.deployment=qwen-3.5_a", "0.1", "30", "10", "5000", "", "30"]);
  // With its launch's id: the guard's second filter; an id of another shape is left out.
  assert.deepEqual(nodeGuardStartArgv("qwen-3.5_a", 2.5, "0123456789ab").at(-2), "launcher.boot=0123456789ab");
  assert.deepEqual(nodeGuardStartArgv("qwen-3.5_a", 2.5, "a b;$(x)").at(-2), "");
});

test("a name that is no deployment name never reaches a node's path or shell", () => {
  for (const bad of ["../x", "a/b", "", ".hidden", "$(reboot)", "a b", "-rf", "A"]) {
    assert.throws(() => nodeGuardStartArgv(bad, 1), /is no deployment name/, bad);
    assert.equal(nodeGuardStopArgv([bad]), undefined, bad);
  }
  assert.deepEqual(nodeGuardStopArgv(["ok", "../x", "ok"])?.slice(4), ["ok"]);
});

test("the floor per node: the node's own memory_floor, else the cluster's, in whole KiB", () => {
  const cluster = { memory_floor: 6, nodes: [{ name: "n1", memory_floor: 3.5 }, { name: "n2" }] };
  assert.equal(floorKiB(nodeFloorGiB(cluster, "n1")), 3.5 * KIB_PER_GIB);
  assert.equal(floorKiB(nodeFloorGiB(cluster, "n2")), 6 * KIB_PER_GIB);
  assert.equal(floorKiB(nodeFloorGiB({ nodes: [] }, "n3")), floorKiB(nodeFloorGiB({ nodes: [{ name: "n3" }] }, "n3")));
  assert.equal(floorKiB(0.0000001), 0);
  // The node's own guard kills a margin below: 1 GiB, a quarter of a floor under 4 GiB.
  assert.equal(nodeGuardFloorKiB(6), 5 * KIB_PER_GIB);
  assert.equal(nodeGuardFloorKiB(4), 3 * KIB_PER_GIB);
  assert.equal(nodeGuardFloorKiB(2), 1.5 * KIB_PER_GIB);
  assert.equal(nodeGuardFloorKiB(0), 0);
});

test("the report parser keeps the guard's own lines and drops anything else a node may hold", () => {
  const text = [
    "started 1764900000000 floor=4194304",
    `tripped 1764900001234 available=1000 floor=4194304 killed=${ID_A} ${ID_B} `,
    "ended 1764900009999 containers-gone",
    // Hostile or broken lines: none of them is an event.
    "started 1764900000000 floor=4194304; rm -rf /",
    `tripped 1 available=1 floor=1 killed=${ID_A} $(reboot)`,
    "tripped 1 available=-5 floor=1 killed=",
    "ended 1 ../../etc/passwd",
    "started 99999999999999999999 floor=1",
    "constructor 1 floor=1",
    "__proto__ 1",
    `started 1 floor=1${" ".repeat(5000)}`,
    "started 1 floor=1\r",
    "\u001b[2Jstarted 1 floor=1",
  ].join("\n");
  assert.deepEqual(parseNodeGuardReport(text), [
    { kind: "started", atMs: 1764900000000, floorKiB: 4194304 },
    { kind: "tripped", atMs: 1764900001234, availableKiB: 1000, floorKiB: 4194304, killed: [ID_A, ID_B] },
    { kind: "ended", atMs: 1764900009999, why: "containers-gone" },
  ]);
  // Ids that are not container ids are dropped from a line that is otherwise the guard's.
  assert.deepEqual(parseNodeGuardReport(`tripped 1 available=1 floor=2 killed=abc ${ID_B}`), [{ kind: "tripped", atMs: 1, availableKiB: 1, floorKiB: 2, killed: [ID_B] }]);
  // Bounded: a huge report is read by its tail only, and at most 64 events come back.
  const many = Array.from({ length: 100_000 }, (_, i) => `started ${i} floor=1`).join("\n");
  const events = parseNodeGuardReport(many);
  assert.equal(events.length, 64);
  assert.deepEqual(events.at(-1), { kind: "started", atMs: 99_999, floorKiB: 1 });
});

test("the trip that counts is the one of the guard started last", () => {
  const trip = (at: number): string => `tripped ${at} available=1 floor=2 killed=${ID_A}`;
  assert.equal(lastTrip(parseNodeGuardReport(`started 1 floor=2\n${trip(2)}\nstarted 3 floor=2\n`)), undefined);
  assert.equal(lastTrip(parseNodeGuardReport(`started 1 floor=2\n${trip(2)}\nstarted 3 floor=2\n${trip(4)}\n`))?.atMs, 4);
  assert.equal(lastTrip(parseNodeGuardReport(trip(5)))?.atMs, 5);
});

test("the heartbeat and the stop script's answer are read as strictly", () => {
  assert.deepEqual(parseNodeGuardHeartbeat("1764900000000 available=123\n"), { atMs: 1764900000000, availableKiB: 123 });
  for (const bad of ["", "x available=1", "1 available=1\n2 available=2", "1 available=1; echo"]) assert.equal(parseNodeGuardHeartbeat(bad), undefined, bad);
  const out = "== a\nstarted 1 floor=2\n== evil\nstarted 3 floor=4\n== b\nended 5 containers-gone\n";
  const split = splitStoppedReports(out, ["a", "b"]);
  assert.deepEqual([...split.keys()], ["a", "b"]);
  // A line a report holds that looks like a header of another name stays in the report it came in.
  assert.equal(split.get("a"), "started 1 floor=2\n== evil\nstarted 3 floor=4\n");
});

/** A node in a folder: HOME, and a `docker` that logs its calls and lists what `ps` holds. */
function fakeNode(): { home: string; env: NodeJS.ProcessEnv; calls: () => string[]; setPs: (ids: string) => void; done: () => void } {
  const home = mkdtempSync(path.join(tmpdir(), "node-guard-"));
  const bin = path.join(home, "bin");
  mkdirSync(bin);
  const log = path.join(home, "docker.log");
  const ps = path.join(home, "ps");
  writeFileSync(path.join(bin, "docker"), `#!/bin/sh\necho "$*" >>${shellJoin([log])}\n[ "$1" = ps ] && cat ${shellJoin([ps])} 2>/dev/null\nexit 0\n`);
  chmodSync(path.join(bin, "docker"), 0o755);
  return {
    home,
    env: { ...process.env, HOME: home, PATH: `${bin}:${process.env.PATH ?? ""}` },
    calls: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []),
    setPs: (ids) => writeFileSync(ps, ids),
    done: () => rmSync(home, { recursive: true, force: true }),
  };
}

/** Runs argv as the transport does: one command line made by shellJoin, read by sh. */
const runQuoted = (argv: readonly string[], env: NodeJS.ProcessEnv): { code: number | null; stdout: string } => {
  const r = spawnSync("sh", ["-c", shellJoin(argv)], { env, encoding: "utf8", timeout: 10_000 });
  return { code: r.status, stdout: r.stdout };
};

/** A process that runs: not gone, and no zombie (a killed child of this test stays one until it is reaped). */
const alive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "")[0] !== "Z";
  } catch {
    return false;
  }
};

test("started through the quoting point, the guard runs detached, kills the deployment's containers below its floor and says so", { timeout: 20_000 }, async () => {
  const node = fakeNode();
  try {
    node.setPs(`${ID_A}\n${ID_B}\n`);
    // A floor above any machine's memory: the first sample crosses it.
    const started = runQuoted(nodeGuardStartArgv("dep-1", 1 << 20), node.env);
    assert.equal(started.code, 0);
    const pid = Number(/^guard (\d+)$/m.exec(started.stdout)?.[1]);
    const dir = path.join(node.home, NODE_GUARD_HOME, "dep-1");
    const report = path.join(dir, "report");
    await until("the trip in the report", () => existsSync(report) && readFileSync(report, "utf8").includes("tripped"), 10_000);
    const events = parseNodeGuardReport(readFileSync(report, "utf8"));
    assert.deepEqual(events.map((e) => e.kind), ["started", "tripped"]);
    assert.deepEqual(events[1]?.kind === "tripped" ? events[1].killed : [], [ID_A, ID_B]);
    assert.ok(node.calls().includes(`kill -- ${ID_A} ${ID_B}`), node.calls().join("\n"));
    await until("the tripped guard ends", () => !alive(pid), 5000);
    assert.equal(existsSync(path.join(dir, "pid")), false);
  } finally {
    node.done();
  }
});

test("the guard ends by itself once its containers are gone, and the stop script ends a running one and removes its folder", { timeout: 30_000 }, async () => {
  const node = fakeNode();
  try {
    node.setPs(`${ID_A}\n`);
    // A floor of 0 never trips; looks every 3 samples rather than 30, so that the test is short.
    const argv = nodeGuardStartArgv("dep-2", 0);
    argv.splice(-5, 1, "3");
    const pid = Number(/^guard (\d+)$/m.exec(runQuoted(argv, node.env).stdout)?.[1]);
    const dir = path.join(node.home, NODE_GUARD_HOME, "dep-2");
    // Written whole once a beat: a read may meet it just emptied, so the test waits for a whole one.
    await until("the heartbeat", () => existsSync(path.join(dir, "heartbeat")) && parseNodeGuardHeartbeat(readFileSync(path.join(dir, "heartbeat"), "utf8")) !== undefined, 10_000);
    assert.ok(alive(pid));
    node.setPs("");
    await until("the guard ends with its containers", () => !alive(pid), 10_000);
    assert.match(readFileSync(path.join(dir, "report"), "utf8"), /^ended \d+ containers-gone$/m);

    // Started again and removed while it runs: process and folder gone, the report handed back.
    node.setPs(`${ID_A}\n`);
    const again = Number(/^guard (\d+)$/m.exec(runQuoted(nodeGuardStartArgv("dep-2", 0), node.env).stdout)?.[1]);
    assert.ok(alive(again));
    const stop = runQuoted(nodeGuardStopArgv(["dep-2", "never-started"]) ?? [], node.env);
    assert.equal(stop.code, 0);
    const reports = splitStoppedReports(stop.stdout, ["dep-2", "never-started"]);
    assert.deepEqual(parseNodeGuardReport(reports.get("dep-2") ?? "").map((e) => e.kind), ["started", "ended", "started"]);
    await until("the removed guard is gone", () => !alive(again), 5000);
    assert.equal(existsSync(dir), false);
  } finally {
    node.done();
  }
});

test("a pid file that names another process is never killed, by a start or a removal", { timeout: 20_000 }, async () => {
  const node = fakeNode();
  const other = spawn("sleep", ["30"], { stdio: "ignore" });
  let guard = 0;
  try {
    const dir = path.join(node.home, NODE_GUARD_HOME, "dep-3");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "pid"), `${other.pid}\n`);
    // A container to guard: the guard runs on (and keeps the pid file as the test writes it) until its folder goes.
    node.setPs(`${ID_A}\n`);
    guard = Number(/^guard (\d+)$/m.exec(runQuoted(nodeGuardStartArgv("dep-3", 0), node.env).stdout)?.[1]);
    // The guard writes its own pid first thing: past its first beat, the test's pid file stays.
    await until("the guard's first beat", () => existsSync(path.join(dir, "heartbeat")), 10_000);
    writeFileSync(path.join(dir, "pid"), `${other.pid}\n`);
    runQuoted(nodeGuardStopArgv(["dep-3"]) ?? [], node.env);
    assert.ok(alive(other.pid as number), "the unrelated process lives");
    // Its folder removed: the guard this test started ends by itself.
    await until("the guard without containers ends", () => !alive(guard), 10_000);
  } finally {
    if (alive(guard)) process.kill(guard, "SIGKILL");
    other.kill("SIGKILL");
    node.done();
  }
});

test("a node guard's trip heard by the boot's guard trips it with its whole report, and its kill on every node", { timeout: 20_000 }, async () => {
  const nodes = ["n1", "n2"].map((n) => new FakeNode(n, { meminfo: meminfoText(100, 50) }));
  const stop = new AbortController();
  const samples: string[] = [];
  const guard = startGuard({
    nodes: nodes.map((d) => ({ node: d.node, docker: d, floorGiB: 10, containers: [`launcher-x-r${d.node}`] })),
    phaseOf: () => "loading",
    signal: stop.signal,
    onSample: (n) => samples.push(n),
    onTrip: () => undefined,
  });
  try {
    await until("a sample of each node", () => samples.includes("n1") && samples.includes("n2"), 5000);
    assert.equal(guard.tripped(), undefined);
    // What n2's own guard reported: 5 GiB left, below this guard's floor of 10.
    guard.heard("n2", { totalKiB: 100 * KIB_PER_GIB, availableKiB: 5 * KIB_PER_GIB });
    const trip = await guard.tripped();
    assert.equal(trip?.node, "n2");
    assert.match(trip?.message ?? "", /^memory guard: n2 fell below its floor of 10\.0 GiB available during loading \(5\.0 GiB left\)/);
    assert.ok(trip?.detail.includes("killed (docker kill) the deployment's containers on n1, n2"), trip?.detail.join("\n"));
    // A sample above the floor heard from a node guard is just a sample.
    guard.heard("n1", { totalKiB: 100 * KIB_PER_GIB, availableKiB: 50 * KIB_PER_GIB });
  } finally {
    stop.abort();
  }
});
