import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { runLocal } from "../../src/remote/transport.js";
import { launcher, launcherProcess, ok, onHostRun, practiceSuite, RIG_DIR, variant } from "./practice-cluster.js";

// Issue 24 on the practice cluster (test/rig/: hosts in network namespaces, containers on
// --network host, the control machine in the root namespace): during a boot of a recipe with an
// engine key and an env secret, no process's arguments show either, on this machine or on a node;
// once ready, the engine answers on the head's management address only.
const dir = practiceSuite(2, "launcher-exposure-");
const KEY = "sk-exposure-key-7f31c2";
const SECRET = "env-secret-value-44ad90";
const HEAD_MGMT = "10.231.0.11";
const HEAD_FABRIC = "10.232.0.11";

/**
 * Every process's arguments here and on hosts 1 and 2, as `ps -eo args` prints them. Asynchronous:
 * the loop that calls it must let the boot's own events (its exit above all) through.
 */
async function allArgs(): Promise<string> {
  const onHost = (i: number) => runLocal("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), `lnch-n${i}`, "--", "ps -eo args"], { timeoutMs: 10_000 });
  const all = await Promise.all([runLocal("ps", ["-eo", "args"], { timeoutMs: 10_000 }), onHost(1), onHost(2)]);
  return all.map((r) => r.stdout).join("\n");
}

/** Whether a TCP connection to address:port opens, tried from practice host `i` (bash's /dev/tcp). */
function connects(i: number, address: string, port: number): boolean {
  return onHostRun(i, ["bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "bash", address, String(port)], "", 10_000).code === 0;
}

describe("the engine's exposure on the practice cluster", { concurrency: false }, () => {
  test("no key or env secret in any process's arguments during the boot; the engine listens on the management address only", async () => {
    const recipe = variant(dir, "exposed", "practice-2x", `args = ["--api-key", "${KEY}"]\n[env]\nPRACTICE_SECRET = "${SECRET}"\n`);
    const up = launcherProcess(["up", recipe, "--json"]);
    let out = "";
    up.stdout.on("data", (d: Buffer) => (out += d.toString()));
    up.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const ended = new Promise<number | null>((resolve) => up.on("close", resolve));
    let done = false;
    void ended.then(() => (done = true));
    const timer = setTimeout(() => up.kill("SIGKILL"), 180_000);
    // Read the process table over and over while the boot runs (docker run on each node, ssh here).
    let samples = 0;
    try {
      while (!done) {
        const seen = await allArgs();
        samples++;
        assert.ok(!seen.includes(KEY), `the key is in a process's arguments:\n${seen.split("\n").filter((l) => l.includes(KEY)).join("\n")}`);
        assert.ok(!seen.includes(SECRET), `the env secret is in a process's arguments:\n${seen.split("\n").filter((l) => l.includes(SECRET)).join("\n")}`);
      }
    } finally {
      clearTimeout(timer);
    }
    assert.equal(await ended, 0, out);
    assert.ok(samples > 1, `the process table was read ${samples} time(s) during the boot`);
    const running = await allArgs();
    assert.ok(!running.includes(KEY) && !running.includes(SECRET), "nor once it serves");

    // Reached where launcher reaches it (the key guards /v1 only; /health is open by design).
    const health = await fetch(`http://${HEAD_MGMT}:8000/health`, { signal: AbortSignal.timeout(5000) });
    assert.equal(health.status, 200);
    assert.ok(connects(2, HEAD_MGMT, 8000), "host 2 reaches the head's management address");
    // Not on the head's other addresses: the fabric, and the head's own loopback.
    assert.equal(connects(2, HEAD_FABRIC, 8000), false, "the fabric address refuses the API port");
    assert.equal(connects(1, "127.0.0.1", 8000), false, "the head's loopback refuses the API port");
    ok(await launcher(["down", "--all", "--grace", "1"]), "down");
  });
});
