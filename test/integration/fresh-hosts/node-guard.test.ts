import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { readAnswer } from "../../../src/daemon/read-client.js";
import { NODE_GUARD_HOME, nodeGuardFloorKiB, parseNodeGuardReport } from "../../../src/memory/node-guard.js";
import { CLUSTER, launcher, ok, onHost, onHostRun, practiceSuite, QUICK_SILENCE_SSH, RIG_DIR, startGateway, variant, within, type Daemon } from "../practice-cluster.js";

// The memory guard on the node itself (src/memory/node-guard.ts) on 2 practice hosts. The hosts
// share this machine's kernel, so their /proc/meminfo is this machine's: the floor is set below
// what is available when the test starts, and a process here takes the memory that crosses it.
const HOSTS = 2;
// Fresh hosts, not the shared ones: the file cuts a management link; ssh gives up on a silent host
// in seconds (QUICK_SILENCE_SSH).
const dir = practiceSuite(HOSTS, "launcher-node-guard-", { sshOptions: QUICK_SILENCE_SSH });
// No daemon: the node guard alone.
const HERE = { LAUNCHER_DAEMON: "none" };
// The floor is this far below what is available, and the process here takes HOG_MIB: it ends
// ~1.5 GiB below the floor, ~0.5 GiB below the node guard's (1 GiB under the floor).
const HOG_MIB = 2048;
// The daemon's inference key, which reads its read API over TCP.
const READ_KEY = "node-guard-read-key-5e1";
const FLOOR_BELOW_GIB = 0.5;

const availableKiB = (): number => {
  const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync("/proc/meminfo", "utf8"));
  assert.ok(m?.[1] !== undefined, "this kernel reports MemAvailable");
  return Number(m[1]);
};

/** The rig's cluster file with a floor for all nodes `belowGiB` under what is available now. */
function clusterWithFloor(belowGiB: number): string {
  const floor = Math.max(0.5, availableKiB() / 1024 / 1024 - belowGiB);
  const file = path.join(RIG_DIR, "cluster-node-guard.toml");
  writeFileSync(file, `memory_floor = ${floor.toFixed(3)}\n${readFileSync(CLUSTER, "utf8")}`);
  return file;
}

/**
 * The rig's cluster file where only n2 has a floor, `belowGiB` under what is available now; the
 * others' is far below anything this test takes (the hosts share this machine's memory, so the
 * daemon's guard of n1 would otherwise cross first, while it still reaches n1).
 */
function clusterWithFloorOnN2(belowGiB: number): { file: string; floorGiB: number } {
  const floorGiB = Math.max(0.5, availableKiB() / 1024 / 1024 - belowGiB);
  const file = path.join(RIG_DIR, "cluster-node-guard-n2.toml");
  const text = readFileSync(CLUSTER, "utf8").replace(/^name = "n2"$/m, `name = "n2"\nmemory_floor = ${floorGiB.toFixed(3)}`);
  assert.match(text, /memory_floor/, "the rig's cluster file names n2");
  writeFileSync(file, `memory_floor = 0.5\n${text}`);
  return { file, floorGiB: Number(floorGiB.toFixed(3)) };
}

/** The guard's folder of `deployment` on host i: its files' text by name (none: the folder is gone). */
function guardFiles(i: number, deployment: string): Map<string, string> {
  const r = onHostRun(i, ["sh", "-c", `cd "$HOME/${NODE_GUARD_HOME}/$1" 2>/dev/null || exit 0; for f in pid report; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 0`, "sh", deployment]);
  assert.equal(r.code, 0, r.stderr);
  const files = new Map<string, string>();
  let name: string | undefined;
  for (const line of r.stdout.split("\n")) {
    const m = /^== (\w+)$/.exec(line);
    if (m !== null) name = m[1] as string;
    else if (name !== undefined) files.set(name, `${files.get(name) ?? ""}${line}\n`);
  }
  return files;
}

/** Whether a process runs (the practice hosts share this machine's process table). */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
};

const link = (i: number, state: "up" | "down"): void => {
  assert.equal(spawnSync("ip", ["link", "set", `lnchm${i}`, state], { encoding: "utf8" }).status, 0, `link n${i} ${state}`);
};

/**
 * A process here that takes `mib` MiB in 64 MiB steps, each written, and prints `crossed MS` the
 * first time MemAvailable is below `floorKiB` after a step: the moment of the crossing.
 */
function hog(mib: number, floorKiB: number): { crossed: Promise<number>; stop: () => void } {
  const code = `const fs = require("node:fs"); const held = []; let said = false;
    const avail = () => Number(/^MemAvailable:\\s+(\\d+)/m.exec(fs.readFileSync("/proc/meminfo", "utf8"))[1]);
    for (let i = 0; i < ${mib / 64}; i++) { held.push(Buffer.alloc(64 * 1048576, 1)); if (!said && avail() < ${floorKiB}) { said = true; console.log("crossed " + Date.now()); } }
    if (!said) console.log("never");
    setInterval(() => held[0][0]++, 1000);`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const crossed = new Promise<number>((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      const m = /crossed (\d+)/.exec(d);
      if (m !== null) resolve(Number(m[1]));
      else if (d.includes("never")) reject(new Error("the hog never crossed the floor"));
    });
    child.once("exit", (c) => reject(new Error(`the hog exited (${c})`)));
  });
  return { crossed, stop: () => child.kill("SIGKILL") };
}

/** The container's state as n2's dockerd says it through its socket on this machine (no SSH). */
function workerState(id: string): string {
  const sock = [path.join(RIG_DIR, "hosts/n2/docker.sock"), path.join("/run/lnch/n2/docker.sock")].find((p) => existsSync(p));
  if (sock === undefined) throw new Error("n2's docker socket is not on this machine");
  return spawnSync("docker", ["-H", `unix://${sock}`, "inspect", "--format", "{{.State.Status}}", "--", id], { encoding: "utf8", timeout: 10_000 }).stdout.trim();
}

describe("the memory guard on the node itself", { concurrency: false }, () => {
  test("up starts a guard on each node beside its containers; down ends and removes every one; a boot that fails leaves none", { timeout: 300_000 }, async () => {
    ok(await launcher(["up", "practice-2x"], 180_000, HERE), "up");
    const pids = [1, 2].map((i) => {
      const files = guardFiles(i, "practice-2x");
      const pid = Number(files.get("pid")?.trim());
      assert.ok(Number.isInteger(pid) && alive(pid), `n${i}: a guard runs (${JSON.stringify([...files])})`);
      assert.deepEqual(parseNodeGuardReport(files.get("report") ?? "").map((e) => e.kind), ["started"]);
      return pid;
    });
    ok(await launcher(["down", "practice-2x", "--grace", "1"], 60_000, HERE), "down");
    for (const i of [1, 2]) assert.deepEqual([...guardFiles(i, "practice-2x")], [], `n${i}: no guard folder left`);
    await within(5000, "both guards ended", async () => (pids.every((p) => !alive(p)) ? true : undefined));

    // A boot whose worker fails after its container started: the rollback removes the guards too.
    const failing = variant(dir, "guard-fails", "practice-2x", `[env]\nPRACTICE_FAULT = "engine_core_init"\nPRACTICE_FAULT_RANK = "1"\n`);
    const r = await launcher(["up", failing], 180_000, HERE);
    assert.equal(r.code, 1, r.stderr);
    for (const i of [1, 2]) assert.deepEqual([...guardFiles(i, "guard-fails")], [], `n${i}: no guard folder left after the rollback`);
    assert.equal(onHost(1, ["sh", "-c", `ls -A "$HOME/${NODE_GUARD_HOME}" 2>/dev/null; exit 0`]).trim(), "");
  });

  test("with the control machine's link to a node cut and no daemon, the node's guard kills the deployment there once it crosses its floor, and says so", { timeout: 300_000 }, async (t) => {
    const cluster = clusterWithFloor(FLOOR_BELOW_GIB);
    const env = { ...HERE, LAUNCHER_CLUSTER: cluster };
    const floorKiB = nodeGuardFloorKiB(Number(/^memory_floor = ([\d.]+)$/m.exec(readFileSync(cluster, "utf8"))?.[1]));
    let cut = false;
    let pressure: ReturnType<typeof hog> | undefined;
    try {
      ok(await launcher(["up", "practice-2x"], 180_000, env), "up");
      const worker = onHost(2, ["docker", "inspect", "--format", "{{.Id}}", "launcher-practice-2x-r1"]).trim();
      link(2, "down");
      cut = true;
      pressure = hog(HOG_MIB, floorKiB);
      const crossedAt = await pressure.crossed;
      // SSH cannot ask n2 now; its dockerd's socket, on this machine, can (the rig's own way in,
      // not the control machine's): the worker ends while the link is cut, or the test gives up.
      await within(30_000, "the worker on the cut node ended", async () => (workerState(worker) === "exited" ? true : undefined));
      pressure.stop();
      pressure = undefined;
      const restoredAt = Date.now();
      link(2, "up");
      cut = false;
      await within(60_000, "n2 answers again", async () => (onHost(2, ["true"]) === "" ? true : undefined));
      const events = parseNodeGuardReport(guardFiles(2, "practice-2x").get("report") ?? "");
      const trip = events.find((e) => e.kind === "tripped");
      assert.ok(trip?.kind === "tripped", JSON.stringify(events));
      assert.deepEqual(trip.killed, [worker]);
      // The report line's time is taken once `docker kill` returns, which may be after the worker
      // is seen exited and the link is back: the worker's own end time, below, proves the kill's.
      assert.ok(trip.atMs >= crossedAt - 1000, "tripped after the crossing");
      const [state, finished] = onHost(2, ["docker", "inspect", "--format", "{{.State.Status}} {{.State.FinishedAt}}", worker]).trim().split(" ");
      assert.equal(state, "exited");
      const killedAt = Date.parse(finished ?? "");
      assert.ok(killedAt < restoredAt, `the worker ended while the link was cut (${finished})`);
      t.diagnostic(`crossing -> the worker's end on n2: ${killedAt - crossedAt} ms; -> the guard's report line: ${trip.atMs - crossedAt} ms`);
    } finally {
      pressure?.stop();
      if (cut) link(2, "up");
      await launcher(["down", "practice-2x", "--grace", "1"], 120_000, env);
    }
    for (const i of [1, 2]) assert.deepEqual([...guardFiles(i, "practice-2x")], [], `n${i}: no guard folder left`);
  });

  test("with a daemon running, a trip of n2's own guard is read back: status, the read API and history give its reason, and the head on n1 ends too (killed by the daemon when it still ran)", { timeout: 300_000 }, async () => {
    const { file, floorGiB } = clusterWithFloorOnN2(FLOOR_BELOW_GIB);
    const env = { ...HERE, LAUNCHER_CLUSTER: file };
    const floorKiB = nodeGuardFloorKiB(floorGiB);
    let cut = false;
    let pressure: ReturnType<typeof hog> | undefined;
    let daemon: Daemon | undefined;
    let passed = false;
    try {
      daemon = await startGateway(["--cluster", file], { LAUNCHER_CLUSTER: file, LAUNCHER_API_KEY: READ_KEY });
      ok(await launcher(["up", "practice-2x"], 180_000, env), "up");
      const worker = onHost(2, ["docker", "inspect", "--format", "{{.Id}}", "launcher-practice-2x-r1"]).trim();
      // The daemon's own guard watches n2 at its floor, above its node guard's: it must not see
      // this crossing (its link is cut first, and it says it lost n2) for n2's own guard to act alone.
      await within(60_000, "the daemon's guard samples n2", async () => ((JSON.parse((await launcher(["status", "--json"], 60_000, env)).stdout) as { memory: Record<string, unknown> }).memory.n2 === undefined ? undefined : true));
      link(2, "down");
      cut = true;
      await within(60_000, "the daemon's guard lost n2", async () => (/memory guard: practice-2x: n2 is not watched/.test(daemon?.log() ?? "") ? true : undefined));
      pressure = hog(HOG_MIB, floorKiB);
      await pressure.crossed;
      await within(30_000, "the worker on the cut node ended", async () => (workerState(worker) === "exited" ? true : undefined));
      pressure.stop();
      pressure = undefined;
      link(2, "up");
      cut = false;

      // Once n2 answers, the daemon's poll shows its rank ended, reads n2's report, records the
      // trip and kills the head on n1 if it still runs: one that lost its peer first (exit 1) has
      // ended already, and n1 is then not said to be stopped by it. Its second line: the kills done.
      const trip = /node guard on n2 killed practice-2x at \S+: MemAvailable [\d.]+ GiB below its floor [\d.]+ GiB/;
      const said = new RegExp(`${trip.source}(?:; killed on n1 too)?`);
      await within(90_000, "the daemon read the trip and dealt with n1", async () => ((daemon?.log().match(new RegExp(`node guard: ${trip.source}`, "g")) ?? []).length >= 2 ? true : undefined));
      const text = await launcher(["status"], 120_000, env);
      assert.match(text.stdout, new RegExp(`  killed: ${said.source} \\(read by the daemon at \\S+\\)`), text.stdout);
      assert.match(text.stdout, /rank 0 {2}n1\s+exited/, "the head on n1 ended too");
      const json = JSON.parse((await launcher(["status", "--json"], 120_000, env)).stdout) as { node_guard: Record<string, { node: string; stopped: string[]; unreached: string[]; floor_kib: number; message: string }> };
      const rec = json.node_guard["practice-2x"];
      assert.deepEqual([rec?.node, rec?.unreached, rec?.floor_kib], ["n2", [], floorKiB]);
      assert.ok(rec?.stopped.length === 0 || rec?.stopped.join() === "n1", JSON.stringify(rec));
      // The read API says it on the deployment.
      const views = await readAnswer({ url: daemon.url, key: READ_KEY }, "deployments");
      assert.match(views.deployments.find((d) => d.deployment === "practice-2x")?.node_guard ?? "", said);
      const history = ok(await launcher(["history"], 60_000, env), "history").stdout;
      assert.match(history, new RegExp(`node guard trips \\(read by launcher serve\\):\\n\\S+  \\S+/practice-2x: ${said.source}`));
      passed = true;
    } finally {
      if (!passed) console.error(daemon?.log());
      pressure?.stop();
      if (cut) link(2, "up");
      await daemon?.stop();
      await launcher(["down", "practice-2x", "--grace", "1"], 120_000, env);
    }
  });
});
