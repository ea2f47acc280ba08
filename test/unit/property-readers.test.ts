/**
 * Bad input at volume for the file readers (issue 25): recipes through the RecipeSource port and
 * cluster files through parseCluster, as mutations of the real seeds and as random text. The
 * property: nothing escapes as an internal error, and every rejection is a diagnostic at a real
 * file:line:col. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { hasErrors } from "../../src/config/diagnostic.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";
import { assertPositioned, holds, mutatedText, reportInputsTried, typedOutcome } from "./property.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** Every seed recipe, keyed as memorySource names them (`recipes/<id>/recipe.toml`). */
function seedRecipes(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const dir of ["recipes", "examples/recipes"]) {
    for (const id of readdirSync(path.join(ROOT, dir))) {
      out[`recipes/${id}/recipe.toml`] = readFileSync(path.join(ROOT, dir, id, "recipe.toml"), "utf8");
    }
  }
  return out;
}

const SEEDS = seedRecipes();
const SEED_FILES = Object.keys(SEEDS);
const idOf = (file: string): string => path.basename(path.dirname(file));

const RECIPE_FRAGMENTS = [
  'extends = "practice-2x"\n',
  'extends = "nope"\n',
  'extends = "../practice-4x/recipe.toml"\n',
  "\n[env]\n",
  "\n[[extra_mounts]]\n",
  "\n[args]\n",
  'engine = "sglang"\n',
  "required_nodes = 0\n",
  "required_nodes = -3\n",
  "tensor_parallel_size = 1.5\n",
  "tensor_parallel_size = 9007199254740993\n",
  'pipeline_parallel_size = "2"\n',
  'distributed_backend = "nccl"\n',
  'shm_size = "--privileged"\n',
  'docker_image = "-v /:/host"\n',
  'entrypoint = "\'sh -c"\n',
  "entrypoint = [1, 2]\n",
  'args = ["--model", "x"]\n',
  'args = ["\'{\\"a\\": 1"]\n',
  'args = ["--speculative-config", "{nope"]\n',
  'args = ["--tensor-parallel-size", "4"]\n',
  'args = ["--data-parallel-size", "0"]\n',
  'args = ["# a comment"]\n',
  'args = [1, true, {}]\n',
  "args = 5\n",
  'remove_args = ["--max-model-len"]\n',
  'remove_env = ["HF_HUB_OFFLINE"]\n',
  'remove_mounts = ["/root/.cache/vllm"]\n',
  'env = { "1BAD" = "x", NCCL_SOCKET_IFNAME = "eth0" }\n',
  "env = { A = 1 }\n",
  'VLLM_SERVER_DEV_MODE = "1"\n',
  'unsafe_dev_routes = "yes"\n',
  'host = "/etc"\ncontainer = "relative"\n',
  'container = "/root/.cache/vllm"\n',
  'env = "1X"\n',
  "read_only = 1\n",
  "when = 1979-05-27T07:32:00Z\n",
  "nan_value = nan\n",
  "big = 0x7fffffffffffffff\n",
  "a.b.c = 1\n",
  '"quoted key" = 1\n',
  "__proto__ = 1\n",
  "constructor = { x = 1 }\n",
];

const CLUSTER_FRAGMENTS = [
  "\n[[nodes]]\n",
  '\n[[nodes]]\nname = "spark1"\nhost = "spark1"\n',
  "\n[ssh]\n",
  "\n[docker]\n",
  'name = "-oProxyCommand=x"\n',
  'host = "-oProxyCommand=touch /tmp/x"\n',
  'user = "root; rm -rf /"\n',
  'home = "relative/home"\n',
  'address = "not an address"\n',
  'fabric_ip = "10.0.0.300"\n',
  'fabric_iface = "eth0 up"\n',
  'hca = ["mlx5_0", "../x"]\n',
  "port = 70000\n",
  "port = -1\n",
  "gpus = 0\n",
  "gid_index = 1.5\n",
  'api_bind = "any"\n',
  'api_bind = "example.com"\n',
  "api_port = 0\n",
  "master_port = 65536\n",
  'memory_floor = "lots"\n',
  'options = ["-oProxyCommand=x"]\n',
  'run_args = ["--privileged"]\n',
  "nodes = []\n",
  "nodes = 3\n",
  "__proto__ = 1\n",
];

function clusterSeeds(): Record<string, string> {
  const dir = path.join(ROOT, "examples/clusters");
  return Object.fromEntries(readdirSync(dir).map((f) => [`examples/clusters/${f}`, readFileSync(path.join(dir, f), "utf8")]));
}
const CLUSTERS = clusterSeeds();

/** A recipe reader's verdict checked: no internal error, every diagnostic positioned in a given file, no recipe without an error. */
function checkRecipe(files: Record<string, string>, id: string): "read" | "refused" {
  const outcome = typedOutcome(() => resolveRecipe(id, memorySource(files), { gpusPerNode: 1 }));
  // The reader reports through diagnostics; even a typed throw would be one error too many.
  assert.ok("value" in outcome, `resolveRecipe threw ${"error" in outcome ? outcome.error.message : ""}`);
  const { recipe, diagnostics } = outcome.value;
  for (const d of diagnostics) assertPositioned(d, files);
  if (recipe === undefined) assert.ok(hasErrors(diagnostics), "a recipe refused without an error diagnostic");
  else assert.ok(!hasErrors(diagnostics), "a recipe given with an error diagnostic");
  return recipe === undefined ? "refused" : "read";
}

/** Both verdicts were met: a generator that only ever made good (or only broken) files would test half the reader. */
function verdicts(): { note: (v: string) => void; assertBoth: () => void } {
  const seen = new Set<string>();
  return { note: (v) => void seen.add(v), assertBoth: () => assert.deepEqual([...seen].sort(), ["read", "refused"]) };
}

/** True when the file was read into a cluster. */
function checkCluster(file: string, text: string): boolean {
  const outcome = typedOutcome(() => parseCluster(file, text));
  assert.ok("value" in outcome, `parseCluster threw ${"error" in outcome ? outcome.error.message : ""}`);
  const { cluster, diagnostics } = outcome.value;
  for (const d of diagnostics) assertPositioned(d, { [file]: text });
  if (cluster === undefined) assert.ok(hasErrors(diagnostics), "a cluster refused without an error diagnostic");
  else assert.ok(!hasErrors(diagnostics), "a cluster given with an error diagnostic");
  return cluster !== undefined;
}

test("a mutated seed recipe is read or refused at a position, never crashes the reader", () => {
  const arb = fc.constantFrom(...SEED_FILES).chain((file) => mutatedText(SEEDS[file] as string, RECIPE_FRAGMENTS).map((text) => ({ file, text })));
  const seen = verdicts();
  holds("recipe: mutated seed", arb, ({ file, text }) => {
    seen.note(checkRecipe({ ...SEEDS, [file]: text }, idOf(file)));
  });
  seen.assertBoth();
});

test("a mutated parent recipe is read or refused at a position when its variant is resolved", () => {
  const parents = SEED_FILES.filter((f) => Object.values(SEEDS).some((t) => t.includes(`extends = "${idOf(f)}"`)));
  assert.ok(parents.length > 0, "some seed recipe extends another");
  const arb = fc.constantFrom(...parents).chain((file) => mutatedText(SEEDS[file] as string, RECIPE_FRAGMENTS).map((text) => ({ file, text })));
  holds("recipe: mutated parent of a variant", arb, ({ file, text }) => {
    const files = { ...SEEDS, [file]: text };
    for (const child of SEED_FILES.filter((f) => (SEEDS[f] as string).includes(`extends = "${idOf(file)}"`))) checkRecipe(files, idOf(child));
  });
});

test("random text as a recipe is read or refused at a position", () => {
  const text = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 120 }),
    fc.array(fc.constantFrom(...RECIPE_FRAGMENTS), { maxLength: 12 }).map((parts) => parts.join("")),
  );
  holds("recipe: random text", text, (t) => {
    checkRecipe({ ...SEEDS, "recipes/random/recipe.toml": t }, "random");
  });
});

/** A TOML basic string for any text without lone surrogates (TOML 1.0 section "String"). */
const tomlString = (s: string): string =>
  `"${[...s].map((c) => (c === '"' ? '\\"' : c === "\\" ? "\\\\" : /[\u0000-\u0008\u000a-\u001f\u007f]/.test(c) ? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}` : c)).join("")}"`;

const ENV_KEY = fc.stringMatching(/^[A-Z][A-Z0-9_]{0,11}$/).filter((k) => !/^(NCCL|GLOO|UCX|VLLM|RAY|TORCH|MASTER|HF|CUDA|OMP|PYTORCH)/.test(k));

test("a recipe written as TOML reads back to the same values", () => {
  const arb = fc.record({
    name: fc.string({ unit: "binary", maxLength: 40 }),
    model: fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,15}\/[A-Za-z0-9][A-Za-z0-9._-]{0,23}$/),
    maxLen: fc.integer({ min: 1, max: 1 << 20 }),
    // Docker's env file carries no line break or NUL: such a value is refused (a diagnostic), not read back.
    env: fc.dictionary(ENV_KEY, fc.string({ unit: "binary", maxLength: 30 }).filter((v) => !/[\n\r\0]/.test(v)), { maxKeys: 5 }),
  });
  holds("recipe: TOML round trip", arb, (r) => {
    const text = [
      `name = ${tomlString(r.name)}`,
      'docker_image = "img:local"',
      `model = ${tomlString(r.model)}`,
      `args = ["--max-model-len", "${r.maxLen}"]`,
      "[env]",
      ...Object.entries(r.env).map(([k, v]) => `${k} = ${tomlString(v)}`),
    ].join("\n");
    const { recipe, diagnostics } = resolveRecipe("rt", memorySource({ "recipes/rt/recipe.toml": text }));
    assert.deepEqual(diagnostics.filter((d) => d.severity === "error"), []);
    assert.ok(recipe !== undefined);
    assert.equal(recipe.name, r.name);
    assert.equal(recipe.model, r.model);
    assert.deepEqual(recipe.args, ["--max-model-len", String(r.maxLen)]);
    assert.deepEqual(recipe.env, { ...r.env });
  });
});

test("a mutated example cluster file is read or refused at a position", () => {
  const files = Object.keys(CLUSTERS);
  const arb = fc.constantFrom(...files).chain((file) => mutatedText(CLUSTERS[file] as string, CLUSTER_FRAGMENTS).map((text) => ({ file, text })));
  const seen = verdicts();
  holds("cluster: mutated example", arb, ({ file, text }) => {
    seen.note(checkCluster(file, text) ? "read" : "refused");
  });
  seen.assertBoth();
});

test("random text as a cluster file is read or refused at a position", () => {
  const text = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 120 }),
    fc.array(fc.constantFrom(...CLUSTER_FRAGMENTS), { maxLength: 12 }).map((parts) => parts.join("")),
  );
  holds("cluster: random text", text, (t) => {
    checkCluster("random.toml", t);
  });
});

reportInputsTried();
