import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { diffRecipes, formatChanges } from "../../src/recipe/diff.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

const MOUNTS = `
[[extra_mounts]]
host = "~/cache/vllm"
container = "/root/.cache/vllm"

[[extra_mounts]]
host = "/mnt/hub"
container = "/hub"
env = "HF_HOME"
`;

const files = {
  "recipes/base/recipe.toml": BASE + MOUNTS,
  "recipes/child/recipe.toml": `
extends = "base"
name = "child"
args = ["--max-model-len", "8192", "--kv-cache-dtype", "fp8"]
remove_args = ["--enable-prefix-caching"]
remove_env = ["HF_HUB_OFFLINE"]
[env]
EXTRA = "yes"
[[extra_mounts]]
host = "~/other/vllm"
container = "/root/.cache/vllm"
read_only = true
`,
  "recipes/grandchild/recipe.toml": `extends = "../child/recipe.toml"\nshm_size = "16g"\n`,
  "recipes/loop-a/recipe.toml": `extends = "loop-b"\n`,
  "recipes/loop-b/recipe.toml": `extends = "loop-a"\n`,
  "recipes/orphan/recipe.toml": `extends = "nowhere"\nname = "x"\n`,
};
const source = memorySource(files);

test("a variant replaces a parent flag's value in place, appends new flags and removes others", () => {
  const r = resolveRecipe("child", source);
  assert.deepEqual(r.diagnostics, []);
  assert.deepEqual(r.recipe?.args, ["--served-model-name", "served", "--max-model-len", "8192", "--kv-cache-dtype", "fp8"]);
});

test("env merges by key and a variant can remove a key", () => {
  assert.deepEqual(resolveRecipe("child", source).recipe?.env, { EXTRA: "yes" });
});

test("mounts merge by container path", () => {
  assert.deepEqual(resolveRecipe("child", source).recipe?.extra_mounts, [
    { host: "~/other/vllm", container: "/root/.cache/vllm", read_only: true },
    { host: "/mnt/hub", container: "/hub", read_only: false, env: "HF_HOME" },
  ]);
});

test("fields not set by the variant come from the parent; a chain of three resolves", () => {
  const r = resolveRecipe("grandchild", source).recipe;
  assert.equal(r?.model, "org/model");
  assert.equal(r?.name, "child");
  assert.equal(r?.shm_size, "16g");
  assert.deepEqual(r?.chain, ["recipes/grandchild/recipe.toml", "recipes/child/recipe.toml", "recipes/base/recipe.toml"]);
});

test("a cycle is an error naming the chain", () => {
  const r = resolveRecipe("loop-a", source);
  assert.equal(r.recipe, undefined);
  assert.match(r.diagnostics.map(formatDiagnostic).join("\n"), /recipes\/loop-b\/recipe\.toml:1:11: error: extends makes a cycle: loop-a -> loop-b -> loop-a/);
});

test("a missing parent is an error at the extends line", () => {
  const r = resolveRecipe("orphan", source);
  assert.match(r.diagnostics.map(formatDiagnostic).join("\n"), /recipes\/orphan\/recipe\.toml:1:11: error: extends: recipe "nowhere" not found/);
});

test("diff of two variants shows exactly their delta", () => {
  const a = resolveRecipe("base", source).recipe;
  const b = resolveRecipe("child", source).recipe;
  assert.ok(a && b);
  assert.deepEqual(formatChanges(diffRecipes(a, b)), [
    "~ name: base -> child",
    "~ args --max-model-len: 4096 -> 8192",
    "- args --enable-prefix-caching: (set)",
    "+ args --kv-cache-dtype: fp8",
    "- env HF_HUB_OFFLINE: 1",
    "+ env EXTRA: yes",
    "~ mount /root/.cache/vllm: ~/cache/vllm -> ~/other/vllm (read-only)",
  ]);
  assert.deepEqual(diffRecipes(a, a), []);
});
