import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { LABELS } from "../../src/contract/deployment.js";
import { DEFAULT_ENGINE } from "../../src/engine/registry.js";
import { launcher, launcherContainers, listed, ok, onHost, practiceSuite, variant, within, type ListedDeployment } from "./practice-cluster.js";

// One host is enough: the engine label and how status reads it do not depend on the rank count.
const HOSTS = 1;
const dir = practiceSuite(HOSTS, "launcher-seam-it-");
const solo = (name: string): string => variant(dir, name, "practice-2x", "required_nodes = 1\ntensor_parallel_size = 1\n");

describe("the engine seam on the practice cluster", { concurrency: false }, () => {
  test("up labels every container with the recipe's engine, and status names it", async () => {
    const recipe = solo("seam-solo");
    try {
      ok(await launcher(["up", recipe]), "up");
      const label = onHost(1, ["docker", "inspect", "--format", `{{index .Config.Labels "${LABELS.engine}"}}`, "--", "launcher-seam-solo-r0"]).trim();
      assert.equal(label, DEFAULT_ENGINE);
      const d = await listed("seam-solo");
      assert.equal(d?.engine, DEFAULT_ENGINE);
      assert.equal(d?.status, "serving");
      ok(await launcher(["down", "deployment/seam-solo", "--grace", "1"]), "down");
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      // The only host: seam-solo left running would refuse the next test's up ("n1 held by seam-solo").
      await launcher(["down", "deployment/seam-solo", "--grace", "1"]);
    }
  });

  test("a container an older launcher started (no engine label) is read through the default engine's adapter: serving, and down removes it", async () => {
    const recipe = solo("seam-old");
    // The endpoint `up` writes (it reaches the head as the SSH session resolves it; `plan` alone
    // has only the cluster file's host name): booted once and stopped, to label the copy alike.
    ok(await launcher(["up", recipe]), "up");
    const endpoint = (await listed("seam-old"))?.endpoint;
    assert.ok(endpoint);
    ok(await launcher(["down", "deployment/seam-old", "--grace", "1"]), "down");
    const plan = JSON.parse(ok(await launcher(["plan", recipe, "--json"]), "plan").stdout) as { nodes: { argv: string[] }[] };
    const argv = (plan.nodes[0]?.argv ?? []).map((a) => (a.startsWith(`${LABELS.endpoint}=`) ? `${LABELS.endpoint}=${endpoint}` : a));
    const at = argv.indexOf(`${LABELS.engine}=${DEFAULT_ENGINE}`);
    assert.ok(at > 0 && argv[at - 1] === "--label", "the plan carries the engine label");
    let last: ListedDeployment | undefined;
    try {
      // The same container as an older launcher made it: every label but the engine's.
      onHost(1, [...argv.slice(0, at - 1), ...argv.slice(at + 1)]);
      // Its log is read through the default engine's adapter while it boots, its /health once it serves.
      await within(60_000, "the hand-started container serving", async () => ((last = await listed("seam-old"))?.status === "serving" ? true : undefined)).catch((e: unknown) => {
        const logs = onHost(1, ["sh", "-c", "docker ps -a --filter label=launcher.deployment; docker logs --tail 20 launcher-seam-old-r0 2>&1"]);
        throw new Error(`${String(e)}; last status ${JSON.stringify(last)}\n${logs}`);
      });
      const d = await listed("seam-old");
      assert.equal(d?.engine, undefined, "no label, no engine field");
      assert.equal(d?.phase, "serving");
    } finally {
      ok(await launcher(["down", "deployment/seam-old", "--grace", "1"]), "down");
    }
    assert.deepEqual(launcherContainers(HOSTS), []);
  });
});
