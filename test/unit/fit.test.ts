import assert from "node:assert/strict";
import { test } from "node:test";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { dockerSizeBytes, fitDeployment, fitProblems, fitText, memoryAsk, type FitVerdict, type NodeMemoryFacts } from "../../src/memory/fit.js";
import { parseMeminfo, type Meminfo } from "../../src/memory/meminfo.js";
import { assertGolden } from "./golden.js";

const seed = (name: string): Recipe => {
  const r = resolveRecipe(name, fileRecipeSource(["recipes"]));
  assert.deepEqual(r.diagnostics, [], name);
  assert.ok(r.recipe);
  return r.recipe;
};

/** /proc/meminfo as a GB10 shows it: 119.7 GiB visible to CUDA and to the kernel alike. */
const sparkMeminfo = (availableGiB: number, freeGiB: number, cacheGiB: number, shmemGiB = 0.1): string => {
  const k = (gib: number): number => Math.round(gib * 1024 * 1024);
  return [
    `MemTotal:       ${k(119.7)} kB`,
    `MemFree:        ${k(freeGiB)} kB`,
    `MemAvailable:   ${k(availableGiB)} kB`,
    `Buffers:        ${k(0.2)} kB`,
    `Cached:         ${k(cacheGiB + shmemGiB)} kB`,
    "SwapCached:            0 kB",
    `Shmem:          ${k(shmemGiB)} kB`,
    `SReclaimable:   ${k(0.3)} kB`,
    "HugePages_Total:       0",
    "Hugepagesize:       2048 kB",
    "",
  ].join("\n");
};
const mem = (text: string): Meminfo => {
  const r = parseMeminfo(text);
  assert.ok(r.ok);
  return r.meminfo;
};

const IDLE = mem(sparkMeminfo(116.5, 110.4, 5.6));
// Another deployment's containers hold 60 GiB; the cache is mostly dropped.
const BUSY = mem(sparkMeminfo(56.0, 54.0, 1.5, 2.0));
// Idle, but most of the pool sits in page cache (a sync of weights just ran).
const CACHED = mem(sparkMeminfo(116.0, 40.0, 75.0));

const GB = 1e9;
const nodes = (names: readonly string[], meminfo: Meminfo, weightsBytes: number, deployments: readonly string[] = []): NodeMemoryFacts[] =>
  names.map((node) => ({ node, meminfo, weightsBytes, deployments }));

test("parseMeminfo reads the figures and tells cache from shared memory", () => {
  const m = mem(sparkMeminfo(116.5, 110.4, 5.6, 2.0));
  assert.equal(m.totalKiB, Math.round(119.7 * 1024 * 1024));
  assert.equal(m.availableKiB, Math.round(116.5 * 1024 * 1024));
  // Cached + Buffers - Shmem: the shared memory is in Cached, but no cache drop frees it.
  assert.equal(m.cachedKiB, Math.round(7.6 * 1024 * 1024) + Math.round(0.2 * 1024 * 1024) - Math.round(2.0 * 1024 * 1024));
  assert.equal(m.shmemKiB, Math.round(2.0 * 1024 * 1024));
  assert.deepEqual(parseMeminfo("MemTotal: 100 kB\nnothing else\n"), { ok: false, missing: ["MemAvailable", "MemFree"] });
});

test("the engine's memory flags, read through its adapter", () => {
  assert.deepEqual(memoryAsk(seed("dsv4-flash-vision")), { kind: "kv", kvBytes: 12884901888, source: "--kv-cache-memory 12884901888" });
  assert.deepEqual(memoryAsk(seed("dsv41-flash-4x-dcp2")), { kind: "utilization", fraction: 0.85, source: "--gpu-memory-utilization 0.85" });
  assert.equal(memoryAsk({ engine: "vllm", args: [] }).kind, "utilization");
  assert.equal(memoryAsk({ engine: "vllm", args: ["--kv-cache-memory", "12G"] }).kind, "unknown");
  assert.equal(memoryAsk({ engine: "vllm", args: ["--gpu-memory-utilization", "1.5"] }).kind, "unknown");
  // go-units RAMInBytes: binary units.
  assert.equal(dockerSizeBytes("32gb"), 32 * 1024 ** 3);
  assert.equal(dockerSizeBytes("512m"), 512 * 1024 ** 2);
  assert.equal(dockerSizeBytes("lots"), undefined);
});

const CASES: readonly { name: string; recipe: string; nodes: NodeMemoryFacts[]; verdicts: FitVerdict[] }[] = [
  // 168 GB of weights over TP 2 (~78 GiB a node, the seed's "Model loading took ~84 GiB"), 12 GiB KV.
  { name: "dsv4-flash-vision.idle", recipe: "dsv4-flash-vision", nodes: nodes(["spark1", "spark2"], IDLE, 168 * GB), verdicts: ["ok", "ok"] },
  { name: "dsv4-flash-vision.busy", recipe: "dsv4-flash-vision", nodes: [...nodes(["spark1"], BUSY, 168 * GB, ["qwen3-32b"]), ...nodes(["spark2"], IDLE, 168 * GB)], verdicts: ["over-available", "ok"] },
  { name: "dsv4-flash-vision.cached", recipe: "dsv4-flash-vision", nodes: nodes(["spark1", "spark2"], CACHED, 168 * GB), verdicts: ["ok", "ok"] },
  // TP 2 on one node's worth of weights: over the node's total.
  { name: "dsv4-flash-vision.one-node-weights", recipe: "dsv4-flash-vision", nodes: nodes(["spark1", "spark2"], IDLE, 336 * GB), verdicts: ["over-total", "over-total"] },
  // 476 GB on disk, of which the engram tables stay there: a budget of 0.85 x 119.7.
  { name: "dsv41-flash-4x-dcp2.idle", recipe: "dsv41-flash-4x-dcp2", nodes: nodes(["spark1", "spark2", "spark3", "spark4"], IDLE, 476 * GB), verdicts: ["ok", "ok", "ok", "ok"] },
  { name: "dsv41-flash-4x-dcp2.tight", recipe: "dsv41-flash-4x-dcp2", nodes: nodes(["spark1", "spark2", "spark3", "spark4"], mem(sparkMeminfo(110.0, 100.0, 8.0)), 270 * GB), verdicts: ["tight", "tight", "tight", "tight"] },
];

for (const c of CASES) {
  test(`fit arithmetic: ${c.name}`, () => {
    const report = fitDeployment(seed(c.recipe), c.nodes);
    assert.deepEqual(report.nodes.map((n) => n.verdict), c.verdicts);
    assertGolden(`test/golden/fit/${c.name}.txt`, `${fitText(report)}\n`);
  });
}

test("an error names the node and its figures; a fit keeps quiet", () => {
  const busy = fitProblems(fitDeployment(seed("dsv4-flash-vision"), [...nodes(["spark1"], BUSY, 168 * GB, ["qwen3-32b"]), ...nodes(["spark2"], IDLE, 168 * GB)]));
  assert.equal(busy.errors.length, 1);
  assert.match(busy.errors[0] ?? "", /^spark1: the deployment needs 100\.2 GiB, but only 56\.0 of 119\.7 GiB are available now: .*deployment qwen3-32b runs on spark1/);
  const idle = fitProblems(fitDeployment(seed("dsv4-flash-vision"), nodes(["spark1", "spark2"], IDLE, 168 * GB)));
  assert.deepEqual(idle.errors, []);
});

test("unknown figures give no verdict rather than a guess", () => {
  const r = fitDeployment(seed("dsv4-flash-vision"), [{ node: "spark1" }]);
  assert.equal(r.nodes[0]?.verdict, "unknown");
  assert.deepEqual(fitProblems(r), { errors: [], warnings: [] });
});

test("doctor's probe reads the node's /proc/meminfo (what plan's fit uses)", async () => {
  const { readProbe } = await import("../../src/nodes/doctor.js");
  const node = { name: "s1", rank: 0, host: "s1", hca: [], gpus: 1 };
  const p = readProbe(node, "/root/.cache/huggingface", ["@@docker", "28.2.2", "@@meminfo", sparkMeminfo(116.5, 110.4, 5.6), "@@peers"].join("\n"));
  assert.deepEqual(p.memory, IDLE);
  assert.equal(readProbe(node, "/root/.cache/huggingface", "@@docker\n28.2.2\n").memory, undefined);
});

test("without the weights' size a fixed KV budget can refuse a boot but not say it fits", () => {
  const r = fitDeployment(seed("dsv4-flash-vision"), [{ node: "spark1", meminfo: IDLE }, { node: "spark2", meminfo: BUSY }]);
  assert.deepEqual(r.nodes.map((n) => n.verdict), ["unknown", "unknown"]);
  assert.match(fitText(r), /spark1: need 22\.0 GiB = weights \? \(size not read: not counted\)/);
  assert.match(fitText(r), /: ok without the weights/);
  const over = fitDeployment({ ...seed("dsv4-flash-vision"), args: ["--kv-cache-memory", String(200 * 1024 ** 3)] }, [{ node: "spark1", meminfo: IDLE }]);
  assert.equal(over.nodes[0]?.verdict, "over-total");
});

test("the store keeps each node's memory (doctor) and a model's size on each node (preflight) for plan", async () => {
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const path = await import("node:path");
  const { openStateStore } = await import("../../src/store/open.js");
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-fit-store-"));
  try {
    const store = openStateStore(path.join(dir, "launcher.db"), () => {}, () => new Date());
    store.saveMemory("spark-2x", new Map([["spark1", IDLE]]), "2026-12-03T09:00:00Z");
    store.saveWeights("spark-2x", "org/model", new Map([["spark1", 168 * GB]]), "2026-12-03T09:00:00Z");
    assert.deepEqual(store.memory("spark-2x").get("spark1"), { meminfo: IDLE, read_at: "2026-12-03T09:00:00Z" });
    assert.deepEqual([...store.weights("spark-2x", "org/model")], [["spark1", 168 * GB]]);
    assert.equal(store.weights("spark-2x", "org/other").size, 0);
    store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("shm_size is shown beside the need as a tmpfs counted only as it fills, never added to it", () => {
  const big = fitDeployment(seed("dsv4-flash-vision"), nodes(["spark1"], IDLE, 168 * GB));
  const small = fitDeployment({ ...seed("dsv4-flash-vision"), shm_size: "1gb" }, nodes(["spark1"], IDLE, 168 * GB));
  assert.equal(big.nodes[0]?.needGiB, small.nodes[0]?.needGiB);
  assert.equal(big.nodes[0]?.verdict, "ok");
  assert.match(fitText(big), /\+ \/dev\/shm up to 32\.0 \(shm_size 32gb\): a tmpfs, counted only as it fills, so not in the need/);
});
