import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { launcher, launcherContainers, launcherProcess, practiceSuite, variant, within } from "./practice-cluster.js";

const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-it-explain-");

/** The promise's value, or a failure after `ms` (the timer is cleared either way). */
async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

describe("explain on the log of a real failed boot", { concurrency: false }, () => {
  test("a worker-side failure: explain names the worker, its real cause, the plugin warning and the hint up gave", async () => {
    // The fault on the headless worker (rank 1, n2), after a few slow phases: long enough to follow the
    // boot's logs as a user would (`launcher logs --follow > boot.log`) before up rolls it back.
    const recipe = variant(dir, "explain-worker", "practice-2x", `[env]\nPRACTICE_FAULT = "engine_core_init"\nPRACTICE_FAULT_RANK = "1"\nPRACTICE_FAILED_PLUGIN = "dspark_vision"\nPRACTICE_PHASE_DELAY_MS = "2500"\n`);
    const up = launcherProcess(["up", recipe]);
    let upErr = "";
    up.stderr.on("data", (d: Buffer) => (upErr += d.toString()));
    const upDone = new Promise<number | null>((resolve) => up.on("close", resolve));
    let follow: ReturnType<typeof launcherProcess> | undefined;
    try {
      await within(20_000, "both ranks' containers exist", async () => (launcherContainers(HOSTS).length === 2 ? true : undefined));
      follow = launcherProcess(["logs", "explain-worker", "--follow", "--tail", "1000"]);
      let log = "";
      follow.stdout.on("data", (d: Buffer) => (log += d.toString()));
      const followDone = new Promise<number | null>((resolve) => follow?.on("close", resolve));
      assert.equal(await bounded(upDone, 60_000, "up did not end"), 1, upErr);
      // The rollback removed the containers: `docker logs --follow` ends with them (and if it lingers,
      // what it printed is complete: the boot is over).
      await bounded(followDone, 20_000, "logs --follow did not end after the rollback").catch(() => follow?.kill("SIGKILL"));
      assert.match(log, /^\[n2\] .*ImportError: .*undefined symbol/m, log);
      // The head lost its headless node and says so as today's head does (NCCL's remote error in its
      // own worker's collective): a lost peer, so explain and up name n2, not the head.
      assert.match(log, /^\[n1\] .*torch\.distributed\.DistBackendError: NCCL error in: \S+, remote process exited or there was a network error/m, log);

      const file = path.join(dir, "boot.log");
      writeFileSync(file, log);
      const json = await launcher(["explain", file, "--json"]);
      assert.equal(json.code, 1, json.stderr);
      const e = JSON.parse(json.stdout) as { failed: boolean; cause: string | null; hint: string | null; phases: { phase: string }[] };
      assert.equal(e.failed, true);
      assert.match(e.cause ?? "", /ImportError: .*_C\.abi3\.so: undefined symbol/);
      assert.match(e.hint ?? "", /compiled against another torch/);
      // The plugin that failed to load (vLLM went on without it) goes with the hint.
      assert.match(e.hint ?? "", /; Failed to load plugin dspark_vision \(ModuleNotFoundError: No module named 'dspark_vision'\) \(this likely explains the failure\)$/);
      assert.ok(e.phases.length > 0);
      // up's failure message says the same, in the same words: the hint, then the warning.
      assert.match(upErr, /n2 \(rank 1\): boot of explain-worker failed/);
      const upHint = /^ {2}\| hint: (.*)$/m.exec(upErr)?.[1];
      assert.ok(upHint !== undefined && (e.hint ?? "").startsWith(`${upHint}; `), upErr);
      assert.match(upErr, /^ {2}\| warning: Failed to load plugin dspark_vision \(ModuleNotFoundError: No module named 'dspark_vision'\) \(this likely explains the failure\)$/m);

      const text = await launcher(["explain", file]);
      assert.equal(text.code, 1);
      assert.match(text.stdout, /^the boot failed on n2 in phase /m);
      assert.match(text.stdout, /^cause: .*ImportError: .*undefined symbol/m);
      assert.match(text.stdout, /^\s+\| .*File ".*gpu_worker\.py", line \d+, in init_device/m);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      if (follow !== undefined && follow.exitCode === null) follow.kill("SIGKILL");
      if (up.exitCode === null) up.kill("SIGTERM");
      await upDone;
    }
  });
});
