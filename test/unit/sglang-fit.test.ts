import assert from "node:assert/strict";
import { test } from "node:test";
import { fitDeployment, fitProblems, memoryAsk } from "../../src/memory/fit.js";
import { parseMeminfo, type Meminfo } from "../../src/memory/meminfo.js";

// The fit check of an SGLang recipe (issue 31): --mem-fraction-static is a share of the memory
// free when SGLang starts, for weights and KV cache only, its activations and CUDA graphs on top
// (src/engine/sglang/adapter.ts SGLANG_MEMORY); without the flag SGLang computes its share at
// start, and the check says it makes none.

const GIB_KB = 1024 * 1024;
/** A GB10's /proc/meminfo: 119.7 GiB total, `available` of it available. */
const spark = (available: number): Meminfo => {
  const r = parseMeminfo(
    [`MemTotal: ${Math.round(119.7 * GIB_KB)} kB`, `MemFree: ${Math.round(available * GIB_KB)} kB`, `MemAvailable: ${Math.round(available * GIB_KB)} kB`, "Cached: 0 kB", "Shmem: 0 kB", "SReclaimable: 0 kB", ""].join("\n"),
  );
  assert.ok(r.ok);
  return r.meminfo;
};
const recipe = (args: string[]) => ({ engine: "sglang" as const, args, tensor_parallel_size: 2, pipeline_parallel_size: 1, shm_size: "16g" });
const nodes = (available: number, weightsGiB?: number) =>
  ["n1", "n2"].map((node) => ({ node, meminfo: spark(available), ...(weightsGiB === undefined ? {} : { weightsBytes: weightsGiB * 1024 ** 3 }) }));

test("--mem-fraction-static is checked as a share of what is free at SGLang's start, its working memory on top", () => {
  assert.deepEqual(memoryAsk({ engine: "sglang", args: ["--mem-fraction-static", "0.5"] }), { kind: "utilization", fraction: 0.5, source: "--mem-fraction-static 0.5", ofFree: true });
  const r = fitDeployment(recipe(["--mem-fraction-static", "0.5"]), nodes(100, 60));
  const n1 = r.nodes[0];
  assert.equal(n1?.verdict, "ok");
  // 100 x 0.5 = 50 for weights (60 / TP 2 = 30) and KV (20), + working memory 4 + engine and loader 6.
  assert.equal(n1?.needGiB, 60);
  assert.match(n1?.lines[0] ?? "", /^n1: need 60\.0 GiB = engine budget 50\.0 \(--mem-fraction-static 0\.5 x available 100\.0: weights 30\.0 \(60\.0 on disk \/ TP 2 x PP 1\), KV cache 20\.0\) \+ working memory 4\.0 \+ engine and loader 6\.0$/);
});

test("a share too large for what is free, and one that leaves the weights no KV cache, are said as for vLLM", () => {
  const over = fitProblems(fitDeployment(recipe(["--mem-fraction-static=0.95"]), nodes(100, 60)));
  assert.equal(over.errors.length, 2, over.errors.join("\n"));
  assert.match(over.errors[0] ?? "", /^n1: the deployment needs 105\.0 GiB, but only 100\.0 of 119\.7 GiB are available now/);
  const noKv = fitProblems(fitDeployment(recipe(["--mem-fraction-static", "0.25"]), nodes(100, 60)));
  assert.deepEqual(noKv.errors, []);
  assert.match(noKv.warnings[0] ?? "", /^n1: the weights on disk \(30\.0 GiB per node\) and working memory leave no KV cache in the engine's 25\.0 GiB budget.*raise --mem-fraction-static/);
});

test("without --mem-fraction-static no fit check is made, and it is said why (SGLang computes its share at start)", () => {
  const ask = memoryAsk({ engine: "sglang", args: ["--context-length", "4096"] });
  assert.equal(ask.kind, "unknown");
  const r = fitDeployment(recipe([]), nodes(100, 60));
  assert.equal(r.nodes[0]?.verdict, "unknown");
  assert.match(r.nodes[0]?.lines[0] ?? "", /^n1: no fit check: --mem-fraction-static is not given: SGLang computes its share when it starts, from the GPU's memory, tp and pp.*; give --mem-fraction-static for a fit check$/);
  assert.deepEqual(fitProblems(r), { errors: [], warnings: [] });
  // vLLM's share without its flag stays its default, of the total.
  const vllm = memoryAsk({ engine: "vllm", args: [] });
  assert.equal(vllm.kind, "utilization");
  assert.ok(vllm.kind === "utilization" && vllm.ofFree === undefined);
});
