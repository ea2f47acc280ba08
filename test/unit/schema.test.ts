import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Ajv } from "ajv";
import { getStaticTOMLValue, parseTOML } from "toml-eslint-parser";
import { schemaFor } from "../../src/cli/schema.js";
import { RECIPE_KEYS } from "../../src/recipe/schema.js";

for (const kind of ["recipe", "cluster"]) {
  test(`launcher schema ${kind} is pinned to schema/${kind}.schema.json`, () => {
    const pinned = readFileSync(`schema/${kind}.schema.json`, "utf8");
    assert.equal(`${JSON.stringify(schemaFor(kind), null, 2)}\n`, pinned, "regenerate with: launcher schema > schema/recipe.schema.json");
  });
}

test("every recipe key has a description in the schema", () => {
  const schema = schemaFor("recipe") as { properties: Record<string, { description?: string }> };
  for (const key of RECIPE_KEYS) assert.ok(schema.properties[key]?.description, key);
});

const validator = (kind: string) => new Ajv({ strict: false }).compile(schemaFor(kind));
const toml = (file: string): unknown => getStaticTOMLValue(parseTOML(readFileSync(file, "utf8")));

test("editors accept the seeds and the example clusters, and flag a typo", () => {
  const recipe = validator("recipe");
  for (const f of ["recipes/dsv4-flash-vision/recipe.toml", "recipes/dsv41-flash-4x-dcp2/recipe.toml"]) {
    assert.ok(recipe(toml(f)), `${f}: ${JSON.stringify(recipe.errors)}`);
  }
  assert.equal(recipe({ name: "x", docker_image: "i", model: "m", tensor_paralel_size: 2 }), false);
  assert.equal(recipe({ extends: "base" }), true);
  assert.equal(recipe({ name: "x" }), false, "without extends, the required keys are required");
  const cluster = validator("cluster");
  for (const f of ["examples/clusters/spark-4x.toml", "examples/clusters/spark-2x.toml"]) {
    assert.ok(cluster(toml(f)), `${f}: ${JSON.stringify(cluster.errors)}`);
  }
});
