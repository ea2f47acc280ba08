// Times resolving and planning a seed recipe on 4 and on 64 nodes, side by side in one run.
// Run: npx tsx bench/plan.ts   (target: well under 50 ms per plan at 64 nodes)
import { parseCluster } from "../src/cluster/parse.js";
import { fileRecipeSource } from "../src/recipe/fs-source.js";
import { resolveRecipe } from "../src/recipe/resolve.js";
import { planDeployment } from "../src/plan/plan.js";
import { planJson } from "../src/plan/render.js";

const ROUNDS = 200;

function clusterText(n: number): string {
  const nodes = Array.from({ length: n }, (_, i) =>
    [`[[nodes]]`, `name = "spark${i + 1}"`, `host = "spark${i + 1}.lan"`, `user = "ai"`, `fabric_ip = "192.168.100.${i + 10}"`, `fabric_iface = "enp1s0f1np1"`, `hca = ["rocep1s0f1"]`, `gid_index = ${3 + (i % 2)}`].join("\n"),
  );
  return nodes.join("\n\n");
}

function timeOnce(nodes: number): number {
  const start = process.hrtime.bigint();
  const resolved = resolveRecipe("dsv41-flash-4x-dcp2", fileRecipeSource(["recipes"]));
  if (resolved.recipe === undefined) throw new Error("seed recipe does not resolve");
  const recipe = { ...resolved.recipe, required_nodes: nodes, tensor_parallel_size: nodes };
  const cluster = parseCluster(`bench-${nodes}.toml`, clusterText(nodes)).cluster;
  if (cluster === undefined) throw new Error("bench cluster does not parse");
  const plan = planDeployment(recipe, cluster);
  if (!plan.ok) throw new Error("plan failed");
  JSON.stringify(planJson(plan.plan));
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function measure(nodes: number): { median: number; p95: number } {
  for (let i = 0; i < 20; i++) timeOnce(nodes);
  const samples = Array.from({ length: ROUNDS }, () => timeOnce(nodes)).sort((a, b) => a - b);
  return { median: samples[Math.floor(ROUNDS / 2)] ?? NaN, p95: samples[Math.floor(ROUNDS * 0.95)] ?? NaN };
}

const four = measure(4);
const sixtyFour = measure(64);
console.log(`resolve + plan + JSON, ${ROUNDS} rounds each (reads the recipe file every round)`);
console.log(`   4 nodes: median ${four.median.toFixed(2)} ms, p95 ${four.p95.toFixed(2)} ms`);
console.log(`  64 nodes: median ${sixtyFour.median.toFixed(2)} ms, p95 ${sixtyFour.p95.toFixed(2)} ms`);
console.log(`  64/4 ratio: ${(sixtyFour.median / four.median).toFixed(2)}x; target: 64 nodes well under 50 ms -> ${sixtyFour.p95 < 50 ? "met" : "MISSED"}`);
