import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

// The suite's shared practice cluster (practiceSuite under LAUNCHER_RIG_REUSE=1, as
// `npm run test:rig` runs it): a reset leaves nothing of the file before it and names the first N
// hosts; a rig with a cut link is made again, not reused. Run alone, this file turns reuse on for
// itself and removes the rig and the image archive after, as test/rig-suite.ts does for a run.
const alone = process.env.LAUNCHER_RIG_REUSE !== "1";
process.env.LAUNCHER_RIG_REUSE = "1";
const { CLUSTER, IMAGE_ARCHIVE, RIG_DIR, STATE_HOME, onHost, onHostRun, practiceSuite, rigDown, suiteDown, suiteUp } = await import("./practice-cluster.js");

before(() => suiteUp(2), { timeout: 300_000 });
after(async () => {
  spawnSync("ip", ["link", "set", "lnchm2", "up"]);
  await suiteDown();
  if (!alone) return;
  rigDown();
  rmSync(IMAGE_ARCHIVE, { force: true });
}, { timeout: 300_000 });

/** Host n1's SSH host key: `rig.sh up` makes a new one, so the same key means the same rig. */
const hostKey = (): string => readFileSync(path.join(RIG_DIR, "hosts", "n1", "ssh_host_ed25519_key.pub"), "utf8");
const nodesNamed = (): number => (readFileSync(CLUSTER, "utf8").match(/^\[\[nodes\]\]$/gm) ?? []).length;

describe("the shared practice cluster", { concurrency: false }, () => {
  test("a file outside fresh-hosts/ that asks for ssh options is refused, since its connections would meet the shared hosts", async () => {
    const refused = /a file with sshOptions gets hosts of its own; put it in test\/integration\/fresh-hosts\//;
    assert.throws(() => practiceSuite(1, "launcher-refused-", { sshOptions: ["ConnectTimeout=3"] }), refused);
    await assert.rejects(suiteUp(1, { sshOptions: ["ConnectTimeout=3"] }), refused);
    assert.equal(nodesNamed(), 2, "the rig was left as it was");
  });

  test("a reset removes the containers, images, home files and state a file left, on hosts past its own too, and names the first N hosts", async () => {
    const key = hostKey();
    for (const i of [1, 3]) {
      onHost(i, ["docker", "create", "--name", "leftover", "practice-engine:local"]);
      onHost(i, ["docker", "tag", "practice-engine:local", "leftover:local"]);
      onHost(i, ["sh", "-c", 'mkdir -p "$HOME/.cache/launcher/claims" && touch "$HOME/leftover" "$HOME/.cache/launcher/claims/leftover"']);
    }
    mkdirSync(path.join(STATE_HOME, "launcher"), { recursive: true });
    await suiteUp(3);
    assert.equal(hostKey(), key, "the same rig, reset");
    assert.equal(nodesNamed(), 3);
    for (const i of [1, 2, 3, 4]) {
      assert.equal(onHost(i, ["docker", "ps", "-aq"]).trim(), "", `n${i}: no container`);
      assert.notEqual(onHostRun(i, ["docker", "image", "inspect", "leftover:local"]).code, 0, `n${i}: no leftover image`);
      assert.equal(onHost(i, ["sh", "-c", 'ls -d "$HOME/leftover" "$HOME/.cache/launcher/claims/leftover" 2>/dev/null || true']).trim(), "", `n${i}: no leftover file`);
      assert.match(onHost(i, ["docker", "image", "inspect", "-f", "{{.Id}}", "practice-engine:local"]), /^sha256:/, `n${i}: the practice image stays`);
    }
    assert.equal(existsSync(STATE_HOME), false, "a fresh state folder");
    await suiteUp(1);
    assert.equal(nodesNamed(), 1);
  });

  test("a rig whose link was cut is made again, and the new one serves", { timeout: 300_000 }, async () => {
    const key = hostKey();
    assert.equal(spawnSync("ip", ["link", "set", "lnchm2", "down"]).status, 0);
    await suiteUp(2);
    assert.notEqual(hostKey(), key, "a new rig");
    assert.equal(nodesNamed(), 2);
    assert.match(onHost(2, ["docker", "image", "inspect", "-f", "{{.Id}}", "practice-engine:local"]), /^sha256:/);
  });
});
