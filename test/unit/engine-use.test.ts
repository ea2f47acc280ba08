import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDiagnostic, type Loc } from "../../src/config/diagnostic.js";
import { ENGINE_RECIPE_KEYS } from "../../src/engine/adapter.js";
import { ENGINES, type EngineName } from "../../src/engine/registry.js";
import { engineUseDiagnostics } from "../../src/recipe/engine-use.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";
import { toy } from "./toy-engine/adapter.js";

const FILE = "recipes/s/recipe.toml";

function errors(files: Record<string, string>, ref = "s"): string[] {
  const r = resolveRecipe(ref, memorySource(files));
  return r.diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
}

const SGLANG = `engine = "sglang"
name = "s"
docker_image = "img:local"
model = "org/model"
required_nodes = 2
tensor_parallel_size = 2
args = ["--mem-fraction-static", "0.5"]
`;

test("an SGLang recipe that sets only what SGLang reads is clean", () => {
  assert.deepEqual(errors({ [FILE]: SGLANG }), []);
});

test("a recipe key the engine does not read is an error at its line, naming the engine that ignores it and the one that reads it", () => {
  const errs = errors({ [FILE]: SGLANG.replace("args =", 'distributed_backend = "mp"\nargs =') });
  assert.equal(errs.length, 1, errs.join("\n"));
  assert.match(errs[0] ?? "", /^recipes\/s\/recipe\.toml:7:\d+: error: distributed_backend is not read by SGLang: engine = "sglang" ignores it \(vLLM reads it\)/);
  assert.match(errs[0] ?? "", /SGLang joins its nodes itself/);
  const entry = errors({ [FILE]: SGLANG.replace("args =", 'entrypoint = ["python3", "-m", "sglang.launch_server"]\nargs =') });
  assert.equal(entry.length, 1, entry.join("\n"));
  assert.match(entry[0] ?? "", /:7:\d+: error: entrypoint is not read by SGLang/);
});

test("an env name only another engine reads is an error at its line, in [env] and in a mount's env", () => {
  const withEnv = `${SGLANG}extra_mounts = [{ host = "~/cache", container = "/cache", env = "VLLM_CACHE_ROOT" }]\n[env]\nVLLM_USE_V1 = "1"\nNCCL_DEBUG = "INFO"\nSGLANG_ENABLE_JIT_DEEPGEMM = "0"\n`;
  const errs = errors({ [FILE]: withEnv });
  assert.equal(errs.length, 2, errs.join("\n"));
  assert.ok(errs.some((e) => /:10:\d+: error: env VLLM_USE_V1 is read only by vLLM \(VLLM_\*\): engine = "sglang" ignores it/.test(e) && /SGLang reads SGLANG_\*, SGL_\*/.test(e)), errs.join("\n"));
  assert.ok(errs.some((e) => /the mount at \/cache sets env VLLM_CACHE_ROOT, which is read only by vLLM/.test(e)), errs.join("\n"));
  // The other way round: SGLang's names in a vLLM recipe.
  const vllm = `engine = "vllm"\nname = "v"\ndocker_image = "img:local"\nmodel = "org/model"\n[env]\nSGLANG_API_KEY = "k"\n`;
  const v = errors({ [FILE]: vllm });
  assert.equal(v.length, 1, v.join("\n"));
  assert.match(v[0] ?? "", /:6:\d+: error: env SGLANG_API_KEY is read only by SGLang \(SGLANG_\*\): engine = "vllm" ignores it/);
});

test("a key a parent of another engine set is refused at the parent's line", () => {
  const parent = `engine = "vllm"\nname = "p"\ndocker_image = "img:local"\nmodel = "org/model"\nrequired_nodes = 2\ntensor_parallel_size = 2\ndistributed_backend = "ray"\n`;
  const child = `extends = "p"\nengine = "sglang"\n`;
  const errs = errors({ "recipes/p/recipe.toml": parent, [FILE]: child });
  assert.equal(errs.length, 1, errs.join("\n"));
  assert.match(errs[0] ?? "", /^recipes\/p\/recipe\.toml:7:\d+: error: distributed_backend is not read by SGLang/);
});

test("every engine declares which engine keys it reads, and vLLM reads them all but llama.cpp's gguf", () => {
  for (const e of Object.values(ENGINES)) for (const k of e.recipeUse.keys) assert.ok(ENGINE_RECIPE_KEYS.includes(k), `${e.name}: ${k}`);
  assert.deepEqual([...ENGINES.vllm.recipeUse.keys].sort(), ENGINE_RECIPE_KEYS.filter((k) => k !== "gguf").sort());
  assert.ok(ENGINES.llamacpp.recipeUse.keys.includes("gguf"));
});

test("the check reads only adapter data: a toy engine's keys and env prefixes", () => {
  const at: Loc = { file: "t.toml", line: 3, col: 1 };
  const withToy = { ...ENGINES, toy };
  const locs = { key: (k: string) => (k === "tensor_parallel_size" ? at : undefined), env: () => at, mount: () => at };
  const out = engineUseDiagnostics({ engine: "toy" as string as EngineName, env: { TOY_X: "1", VLLM_Y: "2" }, extra_mounts: [] }, locs, withToy).map(formatDiagnostic);
  assert.equal(out.length, 2, out.join("\n"));
  assert.match(out[0] ?? "", /tensor_parallel_size is not read by Toy: engine = "toy" ignores it \(vLLM and SGLang read it\)/);
  assert.match(out[1] ?? "", /env VLLM_Y is read only by vLLM/);
  // A vLLM recipe with the toy's env name is refused too, once the toy is registered.
  const back = engineUseDiagnostics({ engine: "vllm" as EngineName, env: { TOY_X: "1" }, extra_mounts: [] }, { ...locs, key: () => undefined }, withToy);
  assert.equal(back.length, 1);
});
