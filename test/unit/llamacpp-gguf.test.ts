import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { validateRecipes } from "../../src/app/validate.js";
import { parseCluster } from "../../src/cluster/parse.js";
import type { Cluster, ClusterNode } from "../../src/cluster/cluster.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { UserError } from "../../src/config/errors.js";
import { snapshotFilePath } from "../../src/engine/hf-snapshot.js";
import { ggufContainerPaths, ggufParts, ggufWeightFiles, MAX_SPLIT_PARTS } from "../../src/engine/llamacpp/gguf.js";
import { fitDeployment } from "../../src/memory/fit.js";
import { parseMeminfo } from "../../src/memory/meminfo.js";
import { planDeployment } from "../../src/plan/plan.js";
import { checkDownload, downloadRunArgs } from "../../src/plan/pull.js";
import { wantedFiles, weightsLocation, type SnapshotFile } from "../../src/plan/weights.js";
import { diffRecipes, formatChanges } from "../../src/recipe/diff.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { memorySource } from "../support/memory-source.js";

const FILE = "recipes/g/recipe.toml";
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const GGUF = `engine = "llamacpp"
name = "g"
docker_image = "llama:local"
model = "unsloth/Qwen3-235B-A22B-Instruct-2507-GGUF"
gguf = { file = "Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf", mmproj = "mmproj-F16.gguf", revision = "${COMMIT}" }
required_nodes = 2
pipeline_parallel_size = 2
args = ["--alias", "qwen", "-ngl", "99", "--ctx-size", "32768"]

[[extra_mounts]]
host = "~/.cache/huggingface"
container = "/root/.cache/huggingface"
env = "HF_HOME"
read_only = true
`;

function resolved(text: string): { recipe?: Recipe; errors: string[] } {
  const r = resolveRecipe("g", memorySource({ [FILE]: text }));
  return { ...(r.recipe === undefined ? {} : { recipe: r.recipe }), errors: r.diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic) };
}

const spark2x = (): Cluster => {
  const c = parseCluster("x", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;
  assert.ok(c);
  return c;
};

test("every part of a split GGUF is named from its first part; one file is itself", () => {
  assert.deepEqual(ggufParts("m.gguf"), { parts: ["m.gguf"] });
  assert.deepEqual(ggufParts("Q4/x-00001-of-00003.gguf"), { parts: ["Q4/x-00001-of-00003.gguf", "Q4/x-00002-of-00003.gguf", "Q4/x-00003-of-00003.gguf"] });
  const later = ggufParts("Q4/x-00002-of-00003.gguf");
  assert.ok("problem" in later && /part 2 of 3/.test(later.problem) && later.fix.includes('"Q4/x-00001-of-00003.gguf"'), JSON.stringify(later));
  const many = ggufParts(`x-00001-of-${String(MAX_SPLIT_PARTS + 1).padStart(5, "0")}.gguf`);
  assert.ok("problem" in many, "a count past the bound names no files");
});

test("the recipe's gguf files: every part, then the projector, at the pinned commit", () => {
  assert.deepEqual(ggufWeightFiles({ file: "a-00001-of-00002.gguf", mmproj: "mm.gguf", revision: COMMIT }), { files: ["a-00001-of-00002.gguf", "a-00002-of-00002.gguf", "mm.gguf"], revision: COMMIT });
  assert.throws(() => ggufWeightFiles({ file: "a-00002-of-00002.gguf", revision: COMMIT }), (e: unknown) => e instanceof UserError && /gguf\.file/.test(e.message));
});

test("the head's --model and --mmproj are the files in the HF_HOME mount's snapshot of the commit", () => {
  const mounts = [{ container: "/root/.cache/huggingface/", env: "HF_HOME" }];
  const paths = ggufContainerPaths({ model: "org/name", gguf: { file: "Q4/m.gguf", mmproj: "mm.gguf", revision: COMMIT }, extra_mounts: mounts });
  assert.deepEqual(paths, { model: `/root/.cache/huggingface/hub/models--org--name/snapshots/${COMMIT}/Q4/m.gguf`, mmproj: `/root/.cache/huggingface/hub/models--org--name/snapshots/${COMMIT}/mm.gguf` });
  assert.equal(snapshotFilePath("/h", "org/name", COMMIT, "f.gguf"), `/h/hub/models--org--name/snapshots/${COMMIT}/f.gguf`);
  assert.equal(ggufContainerPaths({ model: "/models/m.gguf", extra_mounts: [] }), undefined, "without gguf: model is the path");
  assert.throws(() => ggufContainerPaths({ model: "org/name", gguf: { file: "m.gguf", revision: COMMIT }, extra_mounts: [] }), (e: unknown) => e instanceof UserError && /does not mount/.test(e.message) && /env = "HF_HOME"/.test(e.hint ?? ""));
  assert.throws(() => ggufContainerPaths({ model: "/models", gguf: { file: "m.gguf", revision: COMMIT }, extra_mounts: mounts }), (e: unknown) => e instanceof UserError && /Hugging Face repo/.test(e.message));
});

test("a llama.cpp recipe with gguf plans the head on the cached files; a second --mmproj is refused", () => {
  const r = resolved(GGUF);
  assert.deepEqual(r.errors, []);
  assert.ok(r.recipe);
  const p = planDeployment(r.recipe, spark2x());
  assert.ok(p.ok, JSON.stringify(p));
  const head = p.plan.nodes[0];
  assert.ok(head);
  const after = (flag: string): string | undefined => head.argv[head.argv.indexOf(flag) + 1];
  const snap = `/root/.cache/huggingface/hub/models--unsloth--Qwen3-235B-A22B-Instruct-2507-GGUF/snapshots/${COMMIT}`;
  assert.equal(after("--model"), `${snap}/Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf`);
  assert.equal(after("--mmproj"), `${snap}/mmproj-F16.gguf`);
  const twice = resolved(GGUF.replace('"-ngl", "99"', '"-ngl", "99", "--mmproj", "/x.gguf"'));
  assert.ok(twice.recipe);
  assert.throws(() => planDeployment(twice.recipe as Recipe, spark2x()), (e: unknown) => e instanceof UserError && /--mmproj is given beside gguf\.mmproj/.test(e.message));
});

test("gguf is refused for an engine that does not read it, and a file that is no plain path in the repo", () => {
  const vllm = resolved(GGUF.replace('engine = "llamacpp"', 'engine = "vllm"').replace("pipeline_parallel_size = 2", "tensor_parallel_size = 2").replace(', "-ngl", "99"', "").replace('"--alias", "qwen"', '"--served-model-name", "qwen"'));
  assert.ok(vllm.errors.some((e) => /recipe\.toml:5:\d+: error: gguf is not read by vLLM: engine = "vllm" ignores it \(llama\.cpp reads it\)/.test(e)), vllm.errors.join("\n"));
  for (const bad of ["../x.gguf", "/abs.gguf", "a//b.gguf", "-x.gguf", "a/./b.gguf", "m.bin"]) {
    const r = resolved(GGUF.replace("Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf", bad));
    assert.ok(r.errors.some((e) => /GGUF file is a path in the repo/.test(e)), `${bad}: ${r.errors.join("\n")}`);
  }
  const unpinned = resolved(GGUF.replace(COMMIT, "main"));
  assert.ok(unpinned.errors.some((e) => /40-hex commit/.test(e)), unpinned.errors.join("\n"));
});

test("the weights location of a gguf recipe names its files and commit", () => {
  const r = resolved(GGUF);
  assert.ok(r.recipe);
  const node = { name: "n1", rank: 0, user: "u", home: "/home/u" } as unknown as ClusterNode;
  const loc = weightsLocation(r.recipe, node);
  assert.deepEqual(loc?.files, ["Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf", "Q4_K_M/Qwen3-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/Qwen3-Q4_K_M-00003-of-00003.gguf", "mmproj-F16.gguf"]);
  assert.equal(loc?.revision, COMMIT);
  assert.equal(loc?.repo, "models--unsloth--Qwen3-235B-A22B-Instruct-2507-GGUF");
});

test("of a snapshot only the wanted files count, and a wanted file absent or without its blob is missing", () => {
  const files: SnapshotFile[] = [
    { path: "README.md", size: 10 },
    { path: "Q4/a-00001-of-00002.gguf", size: 100, blob: "b1" },
    { path: "Q4/a-00002-of-00002.gguf", size: -1, blob: "b2" },
    { path: "Q8/a.gguf", size: 900, blob: "b3" },
  ];
  assert.deepEqual(wantedFiles(files, undefined), { files, missing: [] });
  const w = wantedFiles(files, ["Q4/a-00001-of-00002.gguf", "Q4/a-00002-of-00002.gguf", "mm.gguf"]);
  assert.deepEqual(w.files.map((f) => f.path), ["Q4/a-00001-of-00002.gguf", "Q4/a-00002-of-00002.gguf"]);
  assert.deepEqual(w.missing, ["Q4/a-00002-of-00002.gguf", "mm.gguf"]);
});

test("the download takes only the named files, each checked before it reaches the command line", () => {
  const args = downloadRunArgs({ image: "img:local", hfHome: "/h", model: "org/name", revision: COMMIT, files: ["Q4/a.gguf", "mm.gguf"], name: "n", downloader: "hf" });
  assert.deepEqual(args.slice(args.indexOf("download")), ["download", "org/name", "Q4/a.gguf", "mm.gguf", "--revision", COMMIT]);
  for (const bad of ["-x.gguf", "../x.gguf", "a\nb.gguf"]) assert.throws(() => checkDownload({ image: "img:local", model: "org/name", files: [bad] }), UserError, bad);
});

test("diff shows a changed gguf, whatever order its keys are written in", () => {
  const a = resolved(GGUF).recipe;
  const same = resolved(GGUF.replace(/gguf = \{[^}]*\}/, `gguf = { revision = "${COMMIT}", mmproj = "mmproj-F16.gguf", file = "Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf" }`)).recipe;
  const other = resolved(GGUF.replace("Q4_K_M/Qwen3-Q4_K_M-00001-of-00003.gguf", "Q8_0/Qwen3-Q8_0-00001-of-00005.gguf")).recipe;
  assert.ok(a && same && other);
  assert.deepEqual(diffRecipes(a, same), []);
  const lines = formatChanges(diffRecipes(a, other));
  assert.equal(lines.length, 1);
  assert.match(lines[0] ?? "", /^~ gguf: .*Q4_K_M.* -> .*Q8_0/);
});

test("the fit of a llama.cpp recipe: the GGUF files' share on each node, a stated KV allowance, working memory, the engine", () => {
  const r = resolved(GGUF);
  assert.ok(r.recipe);
  const k = (gib: number): number => Math.round(gib * 1024 * 1024);
  const m = parseMeminfo([`MemTotal: ${k(119.7)} kB`, `MemFree: ${k(110)} kB`, `MemAvailable: ${k(116)} kB`, "Buffers: 0 kB", `Cached: ${k(5)} kB`, "Shmem: 0 kB", "SReclaimable: 0 kB", ""].join("\n"));
  assert.ok(m.ok);
  const gguf = 133 * 1024 ** 3;
  const fit = fitDeployment(r.recipe, [{ node: "n1", meminfo: m.meminfo, weightsBytes: gguf }, { node: "n2", meminfo: m.meminfo, weightsBytes: gguf }]);
  assert.equal(fit.ask.kind, "kv");
  const n1 = fit.nodes[0];
  assert.equal(n1?.verdict, "ok");
  // 133 / PP 2 = 66.5, + 4 (allowance) + 4 (working memory) + 6 (engine and loader) = 80.5.
  assert.equal(n1?.needGiB, 80.5);
  assert.match(n1?.lines[0] ?? "", /weights 66\.5 \(133\.0 on disk \/ TP 1 x PP 2\) \+ KV cache 4\.0 \(--ctx-size 32768: an allowance of 4 GiB assumed for it: llama\.cpp sizes it from --ctx-size, --parallel, --cache-type-k\/-v and the model's layers, which launcher does not read\)/);
  assert.match(n1?.lines[1] ?? "", /: ok, the KV cache an allowance$/, "the verdict says what it assumes");
  const big = fitDeployment(r.recipe, [{ node: "n1", meminfo: m.meminfo, weightsBytes: 2 * gguf }]);
  assert.equal(big.nodes[0]?.verdict, "over-total", "weights twice as large do not fit");
  const unread = fitDeployment(r.recipe, [{ node: "n1", meminfo: m.meminfo }]);
  assert.equal(unread.nodes[0]?.verdict, "unknown", "without the GGUF files' size the need is only a lower bound");
});

test("the fit of a llama.cpp recipe without --ctx-size (or -c 0): the model's own context sizes the KV cache, which launcher cannot, so no 'ok'", () => {
  const k = (gib: number): number => Math.round(gib * 1024 * 1024);
  const m = parseMeminfo([`MemTotal: ${k(119.7)} kB`, `MemFree: ${k(110)} kB`, `MemAvailable: ${k(116)} kB`, "Buffers: 0 kB", `Cached: ${k(5)} kB`, "Shmem: 0 kB", "SReclaimable: 0 kB", ""].join("\n"));
  assert.ok(m.ok);
  for (const args of ['"--alias", "qwen"', '"--alias", "qwen", "-c", "0"']) {
    const r = resolved(GGUF.replace(/^args = .*$/m, `args = [${args}]`));
    assert.ok(r.recipe, r.errors.join("\n"));
    const fit = fitDeployment(r.recipe, [{ node: "n1", meminfo: m.meminfo, weightsBytes: 133 * 1024 ** 3 }]);
    const n1 = fit.nodes[0];
    assert.equal(n1?.verdict, "unknown", args);
    assert.match(n1?.lines[0] ?? "", /KV cache \? \(no --ctx-size: llama-server takes the context the model was trained with/);
    assert.match(n1?.lines[1] ?? "", /: ok without the KV cache$/);
    // Still a lower bound: enough to refuse what cannot fit.
    const big = fitDeployment(r.recipe, [{ node: "n1", meminfo: m.meminfo, weightsBytes: 2 * 133 * 1024 ** 3 }]);
    assert.equal(big.nodes[0]?.verdict, "over-total");
  }
});

test("llama-server's env counterparts of the flags launcher writes or refuses are refused with that flag's reason, not as fabric env", () => {
  const r = resolved(`${GGUF.replace("\n[[extra_mounts]]", '\n[env]\nLLAMA_ARG_HF_REPO = "a/b"\nLLAMA_ARG_API_PREFIX = "/x"\nLLAMA_ARG_SSL_KEY_FILE = "/k.pem"\nLLAMA_ARG_RPC = "10.0.0.9:50052"\nLLAMA_ARG_CTX_SIZE = "8192"\n\n[[extra_mounts]]')}`);
  const said = r.errors.join("\n");
  assert.match(said, /env LLAMA_ARG_HF_REPO is llama\.cpp's --hf-repo read from the environment: it downloads a model at boot beside the recipe's model\n  hint: name the GGUF files with the recipe's gguf/);
  assert.match(said, /env LLAMA_ARG_API_PREFIX is llama\.cpp's --api-prefix read from the environment: every route moves under the prefix/);
  assert.match(said, /env LLAMA_ARG_SSL_KEY_FILE is llama\.cpp's --ssl-key-file read from the environment: llama-server then serves HTTPS only/);
  assert.match(said, /env LLAMA_ARG_RPC is llama\.cpp's --rpc read from the environment: launcher manages that flag\n  hint: set required_nodes/);
  assert.doesNotMatch(said, /LLAMA_ARG_CTX_SIZE|cluster file/, "an option launcher leaves to the recipe, and no fabric-env message");
  assert.equal(r.errors.length, 4, said);
});

test("validate names the table of the engine an invalid recipe names, not the default engine's", async () => {
  const [v] = await validateRecipes(["g"], memorySource({ [FILE]: `${GGUF.replace("\n[[extra_mounts]]", '\n[env]\nLLAMA_ARG_API_PREFIX = "/x"\n\n[[extra_mounts]]')}` }), { imageFolders: { roots: [], names: [] } });
  assert.equal(v?.ok, false);
  assert.equal(v?.args_judged_by.engine, "llama.cpp");
});

test("validate refuses at the gguf line a later part of a split file, a recipe that mounts no HF cache, and a model that is no repo", () => {
  const later = resolved(GGUF.replace("-00001-of-00003", "-00002-of-00003"));
  assert.ok(later.errors.some((e) => /recipe\.toml:5:\d+: error: recipe gguf\.file: .* is part 2 of 3 of a split GGUF/.test(e)), later.errors.join("\n"));
  const unmounted = resolved(GGUF.replace(/\n\[\[extra_mounts\]\][^]*$/, "\n"));
  assert.ok(unmounted.errors.some((e) => /recipe\.toml:5:\d+: error: recipe gguf: the GGUF files are in the nodes' Hugging Face cache, which the recipe does not mount/.test(e)), unmounted.errors.join("\n"));
  const path = resolved(GGUF.replace('model = "unsloth/Qwen3-235B-A22B-Instruct-2507-GGUF"', 'model = "/models/x"'));
  assert.ok(path.errors.some((e) => /with gguf, model is the Hugging Face repo/.test(e)), path.errors.join("\n"));
});
