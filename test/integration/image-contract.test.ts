import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { CLUSTER, launcher, launcherContainers, ok, onHost, practiceSuite, RIG_DIR, variant } from "./practice-cluster.js";

// The image contract on the practice cluster: preflight reads the image's ENTRYPOINT and the
// version its `vllm --version` prints (the practice engine answers as vLLM's CLI does) and records
// the version in boot history. Which images are refused is test/unit/up-decisions.test.ts's.
// The image's own parser judges the args: the practice engine's `python3` stand-in prints its
// parser as vLLM's would (docker-images/practice-engine/lib/parser.js), and a derived image's
// PRACTICE_PARSER_DROP / PRACTICE_PARSER_ADD make one whose parser lacks a flag, or a fork's.
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

  test("an image whose parser lacks a flag the recipe passes: up refuses before any container starts, at the flag's recipe line", async () => {
    const lacking = derived("practice-lacking:local", "ENV PRACTICE_PARSER_DROP=--enable-prefix-caching");
    const up = await launcher(["up", lacking, "--nodes", "n1", "--name", "imgc-lacking", "--timeout", "3m"], 240_000);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /preflight failed for imgc-lacking; no container was started/);
    const line = readFileSync("recipes/practice-2x/recipe.toml", "utf8").split("\n").findIndex((l) => l.includes('"--enable-prefix-caching"')) + 1;
    assert.ok(line > 0);
    assert.match(up.stderr, new RegExp(`the args of practice-lacking-local, judged by vLLM 0\\.12\\.0's own parser in image practice-lacking:local \\(read on n1\\):\\n +\\S*recipes/practice-2x/recipe\\.toml:${line}:\\d+: error: --enable-prefix-caching is not a flag of vLLM 0\\.12\\.0 in image practice-lacking:local`));
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a fork-only flag: a warning by the table, passes against the fork's image (up and validate --image), refused by an image without it", async () => {
    const flag = '{"option_strings":["--b12x-autotune"],"dest":"b12x_autotune","action":"BooleanOptionalAction","nargs":0,"const":null,"default":false,"type":null,"choices":null}';
    // The option strings of a BooleanOptionalAction include its --no- twin, as argparse's own do.
    const fork = derived("practice-fork:local", `ENV PRACTICE_PARSER_ADD='[${flag.replace('["--b12x-autotune"]', '["--b12x-autotune","--no-b12x-autotune"]')}]'`, 'args = ["--b12x-autotune"]\n');
    const table = await launcher(["validate", fork]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stderr, /warning: --b12x-autotune is not a flag of launcher's table of vLLM 0\.25\.1; the image's own parser judges it when up runs/);
    assert.match(table.stderr, /launcher: args judged by launcher's table of vLLM 0\.25\.1/);
    // This machine's docker, as validate --image uses it: the head's dockerd, by its socket.
    const sock = [path.join(RIG_DIR, "hosts/n1/docker.sock")].find((p) => existsSync(p));
    assert.ok(sock, "n1's docker socket");
    const byImage = ok(await launcher(["validate", fork, "--image", "practice-fork:local", "--json"], 120_000, { DOCKER_HOST: `unix://${sock}` }), "validate --image");
    const json = JSON.parse(byImage.stdout) as { ok: boolean; recipes: { diagnostics: unknown[]; args_judged_by: { by: string; version: string; image: string; image_id: string } }[] };
    assert.equal(json.ok, true);
    assert.deepEqual(json.recipes[0]?.diagnostics, []);
    assert.deepEqual({ ...json.recipes[0]?.args_judged_by, image_id: typeof json.recipes[0]?.args_judged_by.image_id }, { by: "image", engine: "vLLM", version: "0.12.0", image: "practice-fork:local", image_id: "string" });
    const base = await launcher(["validate", fork, "--image", "practice-engine:local"], 120_000, { DOCKER_HOST: `unix://${sock}` });
    assert.equal(base.code, 1, base.stderr);
    assert.match(base.stderr, /error: --b12x-autotune is not a flag of vLLM 0\.12\.0 in image practice-engine:local: its parser stops with "unrecognized arguments"/);
    try {
      const up = ok(await launcher(["up", fork, "--nodes", "n1", "--name", "imgc-fork", "--timeout", "3m"], 240_000), "up of the fork's recipe on the fork's image");
      assert.match(up.stderr, /image practice-fork:local: args judged by its own parser \(vLLM 0\.12\.0\)/);
    } finally {
      await launcher(["down", "deployment/imgc-fork", "--grace", "1"]);
    }
  });
});
