import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { planDeployment } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { assertGolden } from "./golden.js";

/** Every folder of examples/recipes/: a new example is checked and golden-planned without a line here. */
const EXAMPLES = readdirSync("examples/recipes", { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
/** The smallest example cluster that has the nodes a recipe needs. */
const CLUSTERS = ["spark-2x", "spark-4x"] as const;

test("examples/recipes/ holds a one-node recipe, a two-node TP2 recipe and one that extends another", () => {
  const files = EXAMPLES.map((e) => readFileSync(path.join("examples/recipes", e, "recipe.toml"), "utf8"));
  assert.ok(files.some((f) => /^required_nodes = 1$/m.test(f)), "one node");
  assert.ok(files.some((f) => /^required_nodes = 2$/m.test(f) && /^tensor_parallel_size = 2$/m.test(f)), "two nodes TP2");
  assert.ok(files.some((f) => /^extends = /m.test(f)), "extends");
});

for (const example of EXAMPLES) {
  test(`example recipe ${example}: valid with no finding, and planned (golden)`, () => {
    const r = resolveRecipe(`examples/recipes/${example}`, fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
    assert.deepEqual(r.diagnostics.map(formatDiagnostic), []);
    assert.ok(r.recipe);
    const clusterName = CLUSTERS.find((c) => {
      const cluster = parseCluster(`examples/clusters/${c}.toml`, readFileSync(`examples/clusters/${c}.toml`, "utf8")).cluster;
      return cluster !== undefined && cluster.nodes.length >= (r.recipe?.required_nodes ?? 1);
    });
    assert.ok(clusterName);
    const file = `examples/clusters/${clusterName}.toml`;
    const cluster = parseCluster(file, readFileSync(file, "utf8")).cluster;
    assert.ok(cluster);
    const p = planDeployment(r.recipe, cluster);
    assert.ok(p.ok, JSON.stringify(p));
    assertGolden(`test/golden/example.${example}.${clusterName}.json`, `${JSON.stringify(planJson(p.plan), null, 2)}\n`);
    assertGolden(`test/golden/example.${example}.${clusterName}.txt`, planText(p.plan));
  });
}
