import assert from "node:assert/strict";
import { test } from "node:test";
import { fitFromKept } from "../../src/memory/fit.js";
import { parseMeminfo } from "../../src/memory/meminfo.js";
import { headReadsWeights, weightReaders } from "../../src/plan/weights.js";
import { llamacpp } from "../../src/engine/llamacpp/adapter.js";
import { ggufParts, modelPathProblem } from "../../src/engine/llamacpp/gguf.js";
import { REPO_FILE_PATTERN, repoFileProblem } from "../../src/engine/hf-snapshot.js";
import { namePathProblem } from "../../src/plan/weights.js";
import { checkDownload } from "../../src/plan/pull.js";
import { UserError } from "../../src/config/errors.js";

// llama.cpp's workers read no GGUF file (rpc-server gets its layers' tensors from the head over
// RPC): the files are needed, pulled, synced and looked for on the head alone, and the fit counts
// the head's size for every node.

const RECIPE = { engine: "llamacpp" as const, args: ["--ctx-size", "8192"], tensor_parallel_size: 1, pipeline_parallel_size: 2, shm_size: "64m" };

test("only llama.cpp's head reads the model's files; every vLLM rank does", () => {
  assert.equal(llamacpp.weightsReadBy, "head");
  assert.equal(headReadsWeights({ engine: "llamacpp" }), true);
  assert.deepEqual(weightReaders({ engine: "llamacpp" }, ["n1", "n2", "n3"]), ["n1"]);
  assert.equal(headReadsWeights({ engine: "vllm" }), false);
  assert.deepEqual(weightReaders({ engine: "vllm" }, ["n1", "n2"]), ["n1", "n2"]);
});

test("the kept fit of a llama.cpp deployment counts the head's GGUF size on a worker that has none", () => {
  const k = (gib: number): number => Math.round(gib * 1024 * 1024);
  const m = parseMeminfo([`MemTotal: ${k(119.7)} kB`, `MemFree: ${k(110)} kB`, `MemAvailable: ${k(116)} kB`, "Buffers: 0 kB", `Cached: ${k(5)} kB`, "Shmem: 0 kB", "SReclaimable: 0 kB", ""].join("\n"));
  assert.ok(m.ok);
  const memory = new Map([["n1", { meminfo: m.meminfo }], ["n2", { meminfo: m.meminfo }]]);
  const fit = fitFromKept(RECIPE, ["n1", "n2"], memory, new Map([["n1", 100 * 1024 ** 3]]));
  assert.deepEqual(fit.nodes.map((n) => [n.node, n.verdict, n.weightsBytes]), [["n1", "ok", 100 * 1024 ** 3], ["n2", "ok", 100 * 1024 ** 3]], fit.nodes.map((n) => n.lines.join("\n")).join("\n"));
  // vLLM: each rank's own (a worker without them is not known).
  const vllm = fitFromKept({ ...RECIPE, engine: "vllm" as const, args: [] }, ["n1", "n2"], memory, new Map([["n1", 100 * 1024 ** 3]]));
  assert.equal(vllm.nodes[1]?.weightsBytes, undefined);
});

test("one rule for a repo's file: the recipe's gguf pattern, the download's words and a node's listing agree", () => {
  const pattern = new RegExp(`^${REPO_FILE_PATTERN}$`);
  const samples = ["Q4_K_M/m-00001-of-00003.gguf", "config.json", ".gitattributes", "a..b", "sub/dir/x.bin", "", "/etc/passwd", "-rf", "--force", "a/-b", "../x", "a/../b", "a//b", "./x", "a/", "a\\b", "a\nb", "tab\there", "x\u007f"];
  for (const s of samples) assert.equal(pattern.test(s), repoFileProblem(s) === undefined, JSON.stringify(s));
  assert.equal(namePathProblem, repoFileProblem, "a node's listing takes the same rule");
  assert.match(repoFileProblem("-rf") ?? "", /leading -/);
  assert.match(repoFileProblem("a\\b") ?? "", /backslash/);
  assert.throws(() => checkDownload({ image: "img:1", model: "org/repo", files: ["--help"] }), (e: unknown) => e instanceof UserError && /leading -/.test(e.message));
  assert.throws(() => checkDownload({ image: "img:1", model: "org/repo", files: ["a\\b.gguf"] }), (e: unknown) => e instanceof UserError && /backslash/.test(e.message));
});

test("a later part of a split GGUF: one message, naming the key to change", () => {
  const later = ggufParts("Q4/x-00002-of-00003.gguf");
  assert.ok("problem" in later);
  assert.equal(later.problem, "Q4/x-00002-of-00003.gguf is part 2 of 3 of a split GGUF, and llama.cpp loads a split model only from its first part");
  assert.equal(later.fix, 'set file = "Q4/x-00001-of-00003.gguf": llama.cpp reads the other parts beside it');
  const model = modelPathProblem("/models/x-00003-of-00003.gguf");
  assert.equal(model?.problem, "the model /models/x-00003-of-00003.gguf is part 3 of 3 of a split GGUF, and llama.cpp loads a split model only from its first part");
  assert.equal(model?.fix, 'set model = "/models/x-00001-of-00003.gguf": llama.cpp reads the other parts beside it');
});
