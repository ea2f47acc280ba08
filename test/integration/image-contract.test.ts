import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { CLUSTER, launcher, launcherContainers, ok, onHost, practiceSuite, RIG_DIR, variant } from "./practice-cluster.js";

// The image contract on the practice cluster: preflight reads the image's ENTRYPOINT and the
// version its `vllm --version` prints (the practice engine answers as vLLM's CLI does) and records
// the version in boot history. Which images are refused is test/unit/up-decisions.test.ts's.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-imgc-");

/** An image built on n1 from the practice engine, and a one-node recipe that runs it there. */
function derived(tag: string, dockerfileTail: string, recipeExtra = ""): string {
  onHost(1, ["sh", "-c", 'printf "%s\\n" "$1" | docker build --quiet --tag "$2" - >/dev/null', "sh", `FROM practice-engine:local\n${dockerfileTail}`, tag]);
  return variant(dir, tag.replace(/[^a-z0-9]+/g, "-"), "practice-2x", `docker_image = "${tag}"\nrequired_nodes = 1\ntensor_parallel_size = 1\n${recipeExtra}`);
}

describe("the engine image contract", { concurrency: false }, () => {
  test("a recipe entrypoint of vllm serve makes such an image fit; the boot's history holds the vLLM version", async () => {
    const fixed = derived("practice-oldentry:local", 'ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]', 'entrypoint = ["vllm", "serve"]\n');
    try {
      const r = ok(await launcher(["up", fixed, "--nodes", "n1", "--name", "imgc", "--timeout", "3m"], 240_000), "up with the recipe's entrypoint");
      assert.match(r.stderr, /image practice-oldentry:local: vllm 0\.12\.0/);
      const history = JSON.parse(ok(await launcher(["history", "--json", "--limit", "1"]), "history").stdout) as { boots: { deployment: string; outcome: string; engine_version?: string }[] };
      assert.deepEqual(history.boots.map((b) => [b.deployment, b.outcome, b.engine_version]), [["imgc", "ready", "0.12.0"]]);
      assert.match(ok(await launcher(["history", "--limit", "1"]), "history text").stdout, /engine 0\.12\.0/);
    } finally {
      await launcher(["down", "deployment/imgc", "--grace", "1"]);
    }
  });

  test("a node with no fabric IP or interface (not in the cluster file, not detectable): plan warns, up refuses before anything starts", async () => {
    // n2's fabric lines gone; a practice host has no RoCE HCA, so detection cannot find its fabric
    // IP either. Its own cluster name: no fabric values stored by the other tests apply.
    const file = path.join(RIG_DIR, "cluster-nofabric.toml");
    const text = readFileSync(CLUSTER, "utf8").replace(/^name = .*$/m, 'name = "practice-nofabric"');
    const cut = text.lastIndexOf("[[nodes]]");
    writeFileSync(file, text.slice(0, cut) + text.slice(cut).replace(/^fabric_(ip|iface) = .*$/gm, ""));
    const plan = ok(await launcher(["plan", "practice-2x", "--cluster", file]), "plan");
    assert.match(plan.stderr, /warning: node n2 has no fabric IP or fabric interface \(neither in \S+cluster-nofabric\.toml nor detected\)/);
    assert.match(plan.stderr, /run `launcher doctor --cluster \S+cluster-nofabric\.toml` to detect it/);
    assert.doesNotMatch(plan.stderr, /node n1/);

    try {
      const up = await launcher(["up", "practice-2x", "--cluster", file, "--timeout", "1m"], 120_000);
      assert.equal(up.code, 1, up.stderr);
      assert.match(up.stderr, /cannot start practice-2x: node n2 has no fabric IP or fabric interface/);
      assert.match(up.stderr, /launcher doctor/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await launcher(["down", "deployment/practice-2x", "--grace", "1"]);
    }
  });
});
