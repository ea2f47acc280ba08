import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { BOOT_PHASES } from "../../src/contract/deployment.js";
import { GUARD_STOPS_AT_READY } from "../../src/cli/up.js";
import { decodeStatusLine } from "../../src/contract/deployment.js";
import { Store } from "../../src/store/store.js";
import { CLUSTER, launcher, launcherContainers, ok, RIG_DIR, practiceSuite, startGateway, STATE_HOME, variant, within } from "./practice-cluster.js";

// The memory guard on a 2-host practice cluster. The practice hosts share this machine's kernel,
// so their /proc/meminfo is this machine's: the floor is set relative to what is available when
// the test starts, and the engine's loader takes 1 GiB per rank, step by step (2 GiB in all, the
// most this 24 GiB machine lends a test).
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-guard-");

const availableGiB = (): number => {
  const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync("/proc/meminfo", "utf8"));
  assert.ok(m?.[1] !== undefined, "this kernel reports MemAvailable");
  return Number(m[1]) / 1024 / 1024;
};

// Per rank; both ranks take it, step by step over the loading time.
const ALLOC_MIB = 1024;
// Below what is available at the start by this much: crossed once the loaders hold ~1.25 GiB of
// their 2 GiB, so neither a little noise from this machine nor a late sample makes the test flaky.
const FLOOR_BELOW_GIB = 1.25;
const LOADING = BOOT_PHASES[1];
// How long loading lasts: the floor is crossed ~5 s in (1.25 of the 2 GiB), ~3 s before loading
// ends, which is 15 of the guard's samples (0.2 s apart, src/memory/memory-watch.ts); more only
// makes the test wait.
const LOAD_MS = 8000;
// What the other process of the second test holds: over the 1 GiB below the start, at most 2 GiB.
// Half a GiB each way: past the floor of up's own watch, and short of the node guard's, which
// kills at the floor less min(1 GiB, a quarter of it) (test/integration/fresh-hosts/node-guard.test.ts),
// so the second and third tests see the trip of up's watch and of the daemon's, not the node
// guard's. So memory that another process on this machine frees or takes meanwhile (a build
// beside the run) can spoil them: the suite's loaded runs keep a core busy, not memory.
const HOG_MIB = 1536;

describe("the memory guard", { concurrency: false }, () => {
  test("a node below its floor during loading: every container of the deployment is killed on every node, and up names node and phase", { timeout: 240_000 }, async (t) => {
    const recipe = variant(dir, "guard-2x", "practice-2x", `[env]\nPRACTICE_LOAD_ALLOC_MIB = "${ALLOC_MIB}"\nPRACTICE_LOAD_ALLOC_STEP_MIB = "64"\nPRACTICE_LOAD_DELAY_MS = "${LOAD_MS}"\n`);
    const floor = Math.max(0.5, availableGiB() - FLOOR_BELOW_GIB);
    // The rig's cluster file with a floor for all nodes (top-level keys come before the tables).
    const cluster = path.join(RIG_DIR, "cluster-guard.toml");
    writeFileSync(cluster, `memory_floor = ${floor.toFixed(3)}\n${readFileSync(CLUSTER, "utf8")}`);
    try {
      const r = await launcher(["up", recipe], 180_000, { LAUNCHER_CLUSTER: cluster });
      assert.equal(r.code, 1, `up fails: ${r.stdout}\n${r.stderr}`);
      t.diagnostic(r.stderr);
      // The phase captured from the contract's list, so a new phase name cannot make it unreadable.
      const said = new RegExp(`memory guard: (n\\d) fell below its floor of [\\d.]+ GiB available during (${BOOT_PHASES.join("|")}) \\(`).exec(r.stderr);
      assert.ok(said !== null, r.stderr);
      assert.ok(["n1", "n2"].includes(said[1] as string), said[1]);
      assert.equal(said[2], LOADING, r.stderr);
      assert.match(r.stderr, /killed \(docker kill\) the deployment's containers on n1, n2/);
      assert.match(r.stderr, /peak: [\d.]+ GiB in use on n\d \(everything on it\) during loading/);
      assert.match(r.stderr, /--gpu-memory-utilization/);
      // The rollback removed what the kill stopped: nothing of the deployment on any node.
      assert.deepEqual(launcherContainers(HOSTS).filter((c) => c.includes("guard-2x")), []);
      await within(10_000, "the loaders' memory is back", async () => (availableGiB() > floor + 0.5 ? true : undefined));
    } finally {
      await launcher(["down", "guard-2x", "--grace", "1"], 60_000, { LAUNCHER_CLUSTER: cluster });
    }
  });

  test("a floor crossed by memory outside the deployment: killed all the same, and reported as held outside it", { timeout: 240_000 }, async (t) => {
    const floor = Math.max(0.5, availableGiB() - 1);
    const cluster = path.join(RIG_DIR, "cluster-guard.toml");
    writeFileSync(cluster, `memory_floor = ${floor.toFixed(3)}\n${readFileSync(CLUSTER, "utf8")}`);
    // Another process on the nodes' kernel takes 1.5 GiB and keeps it (written, so really in use).
    const hog = spawn(process.execPath, ["-e", `const b = Buffer.allocUnsafe(${HOG_MIB} * 1048576).fill(1); console.log("held"); setInterval(() => b[0]++, 1000)`], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      await new Promise<void>((resolve, reject) => {
        hog.stdout.once("data", () => resolve());
        hog.once("exit", (code) => reject(new Error(`the memory hog exited (${code})`)));
      });
      const r = await launcher(["up", "practice-2x"], 180_000, { LAUNCHER_CLUSTER: cluster });
      assert.equal(r.code, 1, `up fails: ${r.stdout}\n${r.stderr}`);
      t.diagnostic(r.stderr);
      assert.match(r.stderr, /memory guard: n\d fell below its floor .*; the memory is held outside the deployment/);
      assert.match(r.stderr, /killed \(docker kill\) the deployment's containers on n1, n2/);
      assert.match(r.stderr, /drop_caches/);
      assert.deepEqual(launcherContainers(HOSTS).filter((c) => c.includes("practice")), []);
    } finally {
      hog.kill("SIGKILL");
      await launcher(["down", "practice-2x", "--grace", "1"], 60_000, { LAUNCHER_CLUSTER: cluster });
    }
  });

  test("after ready, under launcher serve: status shows each node's memory; a node below its floor kills the group on every node, the trip is recorded, and --restart on-failure recreates it", { timeout: 240_000 }, async (t) => {
    const floor = Math.max(0.5, availableGiB() - 1);
    const cluster = path.join(RIG_DIR, "cluster-guard.toml");
    writeFileSync(cluster, `memory_floor = ${floor.toFixed(3)}\n${readFileSync(CLUSTER, "utf8")}`);
    const env = { LAUNCHER_CLUSTER: cluster, LAUNCHER_DAEMON: "none" };
    // The restart waits 5 s: the hog below is killed once the trip shows in the daemon's log (a poll
    // later), and a restart that started before it was gone would meet the floor again.
    const daemon = await startGateway(["--poll", "500ms", "--restart-backoff", "5s"], env);
    let hog: ReturnType<typeof spawn> | undefined;
    try {
      const up = ok(await launcher(["up", "practice-2x", "--restart", "on-failure:1"], 180_000, env), "up --restart");
      assert.ok(up.stderr.includes(GUARD_STOPS_AT_READY("practice-2x")), up.stderr);
      // The daemon watches it from its first poll that shows it serving: status shows each node's memory.
      const shown = await within(20_000, "status shows both nodes' memory", async () => {
        const r = await launcher(["status"], 30_000, env);
        return [1, 0].every((rank) => new RegExp(`rank ${rank} .* running .* mem \\d+\\.\\d/\\d+\\.\\d GiB`).test(r.stdout)) ? r.stdout : undefined;
      });
      t.diagnostic(shown.value);
      // Another process on the nodes' kernel takes 1.5 GiB: below the floor on every node.
      hog = spawn(process.execPath, ["-e", `const b = Buffer.allocUnsafe(${HOG_MIB} * 1048576).fill(1); console.log("held"); setInterval(() => b[0]++, 1000)`], { stdio: ["ignore", "pipe", "inherit"] });
      // The report whole, to its hint line: the daemon writes it a line at a time, and on a busy
      // machine the test can read the first line before the rest is written.
      const tripped = await within(30_000, "the daemon's guard trips and reports it whole", async () => {
        const log = daemon.log();
        const m = /memory guard: practice-2x: memory guard: (n\d) fell below its floor/.exec(log);
        return m !== null && log.slice(m.index).includes("  | hint: ") ? m : undefined;
      });
      // Given back at once, so that the restart can boot.
      hog.kill("SIGKILL");
      t.diagnostic(daemon.log());
      assert.match(daemon.log(), /killed \(docker kill\) the deployment's containers on n1, n2/);
      assert.match(daemon.log(), /the fit check before the boot \(GiB\):/);
      const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
      try {
        const trips = store.memoryTrips("practice", "practice-2x", 5);
        assert.deepEqual(trips.map((x) => [x.node, x.phase]), [[tripped.value[1], "serving"]]);
      } finally {
        store.close();
      }
      // A failure to the supervisor: the group is recreated and serves again (restart 1).
      await within(90_000, "practice-2x serves again after its restart", async () => {
        const r = await launcher(["status", "--json"], 30_000, env);
        const d = decodeStatusLine(r.stdout).deployments.find((x) => x.deployment === "practice-2x");
        return d?.status === "serving" && d.restarts === 1 ? true : undefined;
      });
      const store2 = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
      try {
        const row = store2.restarts("practice-2x", 5)[0];
        assert.equal(row?.reason, "memory-guard");
        assert.match(row?.message ?? "", /^memory guard: n\d fell below its floor/);
      } finally {
        store2.close();
      }
    } finally {
      hog?.kill("SIGKILL");
      // The daemon's whole log, the restart's part included: what a failure here has to go on.
      t.diagnostic(`the daemon's log at the end:\n${daemon.log()}`);
      await launcher(["down", "practice-2x", "--grace", "1"], 60_000, env);
      await daemon.stop();
    }
  });
});
