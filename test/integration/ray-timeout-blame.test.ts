import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, launcherContainers, practiceSuite, variant } from "./practice-cluster.js";

// Issue 25: a Ray worker that never joins, with `--timeout` shorter than the head's join window,
// was reported as "n1 (rank 0) timed out ... the other ranks got further (n2 starting)". The
// worker that never joined is the one named. 2 hosts: one head, one worker.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-ray-blame-");

describe("a boot that times out names the rank that never joined", { concurrency: false }, () => {
  test("Ray: the worker that never registered is named, not the head waiting for it; everything rolled back", async () => {
    const recipe = variant(dir, "ray-late", "practice-2x", `distributed_backend = "ray"\nremove_args = ["--distributed-executor-backend"]\n[env]\nLAUNCHER_RAY_JOIN_SECONDS = "300"\nPRACTICE_RAY_NO_JOIN = "1"\n`);
    try {
      // 15 s: the head must have started Ray (its "Ray runtime started.") on a busy machine too.
      const r = await launcher(["up", recipe, "--name", "ray-late", "--timeout", "15s"], 180_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n2 \(rank 1\): boot of ray-late failed: never joined the other ranks: timed out after 15 s \(phase starting\) while n1 waited at the rendezvous/);
      assert.doesNotMatch(r.stderr, /n1 \(rank 0\): boot of ray-late failed/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await launcher(["down", "deployment/ray-late", "--grace", "1"]);
    }
  });
});
