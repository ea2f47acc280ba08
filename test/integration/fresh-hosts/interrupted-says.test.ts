import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, launcherContainers, launcherUntil, onHost, slowLinks, variant, practiceSuite } from "../practice-cluster.js";

// Issue 25: an interrupted command says what it left, on one "launcher: " per line. `images push`
// said nothing when interrupted; Ctrl-C of `up` printed "launcher: launcher: boot of ... failed".
// 3 hosts: the image goes from n1 to n3 on a slowed link.
const HOSTS = 3;
// Fresh hosts, not the shared ones (practiceSuite): the file slows n3's links and removes its practice image.
const dir = practiceSuite(HOSTS, "launcher-interrupted-");

describe("interrupted commands say what they left", { concurrency: false }, () => {
  test("Ctrl-C of images push: exit 130, and each node it sent to is said: no partial image", async () => {
    onHost(3, ["docker", "image", "rm", "--force", "practice-engine:local"]);
    const unshape = slowLinks(3, ["m", "f"], ["tbf", "rate", "16mbit", "burst", "64kb", "latency", "500ms"]);
    try {
      const push = await launcherUntil(["images", "push", "practice-2x", "--nodes", "n3"], /\n +n3 +[\d.]+ MiB/);
      push.child.kill("SIGINT");
      assert.equal(await push.closed, 130, push.stderr());
      assert.match(push.stderr(), /launcher: interrupted \(SIGINT\): the push of practice-engine:local was stopped: n3 has no image under the name \(a load cut short leaves none\)/);
      assert.equal(onHost(3, ["docker", "images", "--quiet", "practice-engine:local"]).trim(), "");
    } finally {
      unshape();
      await launcher(["images", "push", "practice-2x", "--nodes", "n3"], 600_000);
    }
  });

  test("Ctrl-C of up while it watches the boot: one 'launcher: ' on the line, and what was rolled back", async () => {
    const recipe = variant(dir, "stopped", "practice-2x", `[env]\nPRACTICE_FAULT = "hang"\n`);
    try {
      const up = await launcherUntil(["up", recipe, "--nodes", "n1,n2"], /n1 +loading/);
      up.child.kill("SIGINT");
      assert.equal(await up.closed, 130, up.stderr());
      assert.doesNotMatch(up.stderr(), /launcher: launcher:/);
      assert.match(up.stderr(), /^launcher: boot of stopped failed: interrupted \(SIGINT\)$/m);
      assert.match(up.stderr(), /rolled back: removed 2 containers/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await launcher(["down", "--all", "--grace", "1"]);
    }
  });
});
