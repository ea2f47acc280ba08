import assert from "node:assert/strict";
import { test } from "node:test";
import { diffRecipes, formatChanges } from "../../src/recipe/diff.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { memorySource } from "../support/memory-source.js";

/** A one-node recipe whose args are `args` (TOML array elements, as written in a recipe file). */
const recipe = (args: string): Recipe => {
  const text = `name = "r"\ndocker_image = "img:local"\nmodel = "org/m"\nargs = [${args}]\n`;
  const r = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": text }));
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  return r.recipe;
};
const diff = (a: string, b: string): string[] => formatChanges(diffRecipes(recipe(a), recipe(b)));

test("diff: a JSON-valued flag compares key by key (the A/B case: one speculative setting changed)", () => {
  assert.deepEqual(
    diff(
      `"--speculative-config", """'{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}'"""`,
      `"--speculative-config", """'{"method":"ngram","num_speculative_tokens":6,"prompt_lookup_max":4}'"""`,
    ),
    ["~ args --speculative-config.num_speculative_tokens: 5 -> 6"],
  );
});

test("diff: JSON formatting and key order are no difference", () => {
  assert.deepEqual(
    diff(
      `"--compilation-config", """'{"cudagraph_mode":"FULL","cudagraph_capture_sizes":[1,2,4]}'"""`,
      `"--compilation-config", '''{ "cudagraph_capture_sizes": [1, 2, 4],\n  "cudagraph_mode": "FULL" }'''`,
    ),
    [],
  );
});

test("diff: nested keys, added and removed keys, and a changed array are named by their path", () => {
  assert.deepEqual(
    diff(
      `"--hf-overrides", '{"rope_scaling":{"factor":2,"type":"yarn"},"drop":true}', "--compilation-config", '{"cudagraph_capture_sizes":[1,2]}'`,
      `"--hf-overrides", '{"rope_scaling":{"factor":4,"type":"yarn"},"new":"x"}', "--compilation-config", '{"cudagraph_capture_sizes":[1,2,4]}'`,
    ),
    [
      "~ args --hf-overrides.rope_scaling.factor: 2 -> 4",
      "- args --hf-overrides.drop: true",
      '+ args --hf-overrides.new: "x"',
      "~ args --compilation-config.cudagraph_capture_sizes: [1,2] -> [1,2,4]",
    ],
  );
});

test("diff: a JSON flag on one side only is one line with its whole value, formatting ignored", () => {
  assert.deepEqual(diff(`"--enforce-eager"`, `"--enforce-eager", "--speculative-config", '{ "num_speculative_tokens": 5, "method": "ngram" }'`), [
    '+ args --speculative-config: {"method":"ngram","num_speculative_tokens":5}',
  ]);
});

test("diff: a flag that is no JSON flag, or a dict-or-string flag written as a string, still compares as text", () => {
  assert.deepEqual(diff(`"--max-model-len", "4096", "--hf-overrides", "a"`, `"--max-model-len", "8192", "--hf-overrides", "b"`), [
    "~ args --max-model-len: 4096 -> 8192",
    "~ args --hf-overrides: a -> b",
  ]);
});
