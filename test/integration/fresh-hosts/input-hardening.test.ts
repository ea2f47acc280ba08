import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { launcher, RIG_DIR, rigDown, seedModel, variant } from "../practice-cluster.js";

// `launcher models` on 2 practice hosts: exit 1 only when the model is missing where the recipe
// runs. Only the hosts and the model are needed (no image), so the rig is made bare.
const HOSTS = 2;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-input-"));

before(() => {
  const r = spawnSync("bash", [path.resolve("test/rig/rig.sh"), "up", String(HOSTS)], { env: { ...process.env, RIG_DIR }, encoding: "utf8", timeout: 240_000 });
  if (r.status !== 0) throw new Error(`rig up failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  // The model on the head only.
  seedModel(1, 1 << 20);
}, { timeout: 300_000 });
after(() => {
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}, { timeout: 300_000 });

interface ModelsJson {
  ok: boolean;
  nodes: { node: string; present: boolean; needed: boolean }[];
}

describe("models: exit status from the nodes the recipe needs", { concurrency: false }, () => {
  test("missing on a node the recipe runs on: exit 1, naming it", async () => {
    const r = await launcher(["models", "practice-2x"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /n2 +MISSING: no folder/);
    assert.match(r.stdout, /missing on n2, where the recipe runs; fix: launcher models sync practice-2x/);
    const json = await launcher(["models", "practice-2x", "--json"]);
    assert.equal(json.code, 1);
    const report = JSON.parse(json.stdout) as ModelsJson;
    assert.equal(report.ok, false);
    assert.deepEqual(report.nodes.map((n) => [n.node, n.present, n.needed]), [["n1", true, true], ["n2", false, true]]);
    // --nodes names the nodes it would run on.
    assert.equal((await launcher(["models", "practice-2x", "--nodes", "n2"])).code, 1);
  });

  test("missing only where the recipe does not run: exit 0, and the output says so", async () => {
    const one = variant(dir, "practice-1x", "practice-2x", "required_nodes = 1\ntensor_parallel_size = 1\n");
    const r = await launcher(["models", one]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /n2 +MISSING: no folder .* \(not needed\)/);
    assert.match(r.stdout, /present on every node the recipe runs on \(n1\); the others lack it/);
    const report = JSON.parse((await launcher(["models", one, "--json"])).stdout) as ModelsJson;
    assert.equal(report.ok, true);
    assert.deepEqual(report.nodes.map((n) => [n.node, n.present, n.needed]), [["n1", true, true], ["n2", false, false]]);
  });
});
