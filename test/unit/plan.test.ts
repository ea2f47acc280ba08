import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { splitShellWords } from "../../src/config/shell-words.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { planDeployment, startSteps, type Plan } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { assertGolden } from "./golden.js";
import { BASE, memorySource } from "../support/memory-source.js";

const cluster = (file: string): Cluster => {
  const c = parseCluster(file, readFileSync(file, "utf8")).cluster;
  assert.ok(c, file);
  return c;
};
const seedPlan = (recipe: string, clusterFile: string): Plan => {
  const r = resolveRecipe(recipe, fileRecipeSource(["recipes"]));
  assert.deepEqual(r.diagnostics, [], recipe);
  assert.ok(r.recipe);
  const p = planDeployment(r.recipe, cluster(clusterFile));
  assert.ok(p.ok, JSON.stringify(p));
  return p.plan;
};

const CASES = [
  ["dsv4-flash-vision", "spark-2x"],
  ["dsv41-flash-4x-dcp2", "spark-4x"],
  ["dsv4-flash-vision", "spark-4x"],
] as const;

for (const [recipe, c] of CASES) {
  test(`golden plan: ${recipe} on ${c}`, () => {
    const plan = seedPlan(recipe, `examples/clusters/${c}.toml`);
    assertGolden(`test/golden/${recipe}.${c}.json`, `${JSON.stringify(planJson(plan), null, 2)}\n`);
    assertGolden(`test/golden/${recipe}.${c}.txt`, planText(plan));
  });
}

test("planning is deterministic", () => {
  const a = JSON.stringify(planJson(seedPlan("dsv41-flash-4x-dcp2", "examples/clusters/spark-4x.toml")));
  const b = JSON.stringify(planJson(seedPlan("dsv41-flash-4x-dcp2", "examples/clusters/spark-4x.toml")));
  assert.equal(a, b);
});

test("mp ranks: managed flags per rank, --headless above 0, the API on rank 0 only", () => {
  const plan = seedPlan("dsv41-flash-4x-dcp2", "examples/clusters/spark-4x.toml");
  // Every mp rank waits for the others by itself: one step of every node, in rank order.
  assert.deepEqual(plan.start_order, ["spark1", "spark2", "spark3", "spark4"]);
  assert.equal(plan.start, "at once");
  assert.deepEqual(startSteps(plan), [["spark1", "spark2", "spark3", "spark4"]]);
  for (const n of plan.nodes) {
    const argv = n.argv;
    const after = (flag: string): string | undefined => argv[argv.indexOf(flag) + 1];
    assert.equal(after("--node-rank"), String(n.rank));
    assert.equal(after("--nnodes"), "4");
    assert.equal(after("--master-addr"), "192.168.100.11");
    assert.equal(after("--master-port"), "29501");
    assert.equal(after("--tensor-parallel-size"), "4");
    assert.equal(argv.includes("--headless"), n.rank > 0);
    assert.equal(argv.includes("--port"), n.rank === 0);
    // The image is followed by the model: no recipe entrypoint, so the image's vllm serve completes it.
    assert.equal(argv[argv.indexOf("dsv41-flash-dcp2:local") + 1], "deepseek-ai/DeepSeek-V4.1-Flash");
    assert.ok(!argv.includes("--entrypoint"));
  }
});

test("fabric env and ~ come from each node's own values", () => {
  const plan = seedPlan("dsv41-flash-4x-dcp2", "examples/clusters/spark-4x.toml");
  const [n1, , n3, n4] = plan.nodes;
  assert.equal(n3?.env.NCCL_SOCKET_IFNAME, "enP2p1s0f1np1");
  assert.equal(n3?.env.NCCL_IB_HCA, "roceP2p1s0f1");
  assert.equal(n3?.env.NCCL_IB_GID_INDEX, "4");
  assert.equal(n1?.env.NCCL_IB_GID_INDEX, "3");
  assert.equal(n3?.env.VLLM_HOST_IP, "192.168.100.13");
  assert.ok(n4?.argv.includes("/root/sm121-cache/jit-121f/vllm:/root/.cache/vllm"));
  assert.ok(n1?.argv.includes("/home/ai/sm121-cache/jit-121f/vllm:/root/.cache/vllm"));
  assert.ok(n1?.argv.includes("/var/tmp/engram-local/DeepSeek-V4.1-Flash:/engram-local:ro"));
});

test("a mount's env is set to its container path; JSON args arrive unquoted", () => {
  const plan = seedPlan("dsv4-flash-vision", "examples/clusters/spark-2x.toml");
  const head = plan.nodes[0];
  assert.equal(head?.env.HF_HOME, "/mnt/nas/ai/huggingface");
  const spec = head?.argv[(head?.argv.indexOf("--speculative-config") ?? 0) + 1];
  assert.equal(JSON.parse(spec ?? "").num_speculative_tokens, 6);
  assert.ok(plan.nodes[1]?.argv.includes("/data/home/ai/.cache/dsv4vision-jit/vllm:/root/.cache/vllm"));
});

test("the pasteable command splits back into exactly argv, its heredoc into exactly the env", () => {
  const plan = seedPlan("dsv4-flash-vision", "examples/clusters/spark-2x.toml");
  const text = planText(plan);
  for (const n of plan.nodes) {
    const block = text.split(`container ${n.container}\n`)[1]?.split("\n\n")[0] ?? "";
    const [command = "", heredoc = ""] = block.split(" <<'LAUNCHER_ENV'\n");
    const words = splitShellWords(command.replace(/\\\n/g, " "));
    assert.deepEqual(words, { ok: true, words: n.argv });
    assert.deepEqual(heredoc.trimEnd().split("\n"), [...Object.entries(n.env).map(([k, v]) => `${k}=${v}`), "LAUNCHER_ENV"]);
  }
});

test("labels identify deployment, recipe, hash, rank and node", () => {
  const plan = seedPlan("dsv4-flash-vision", "examples/clusters/spark-2x.toml");
  const w = plan.nodes[1];
  assert.equal(w?.labels["launcher.deployment"], "dsv4-flash-vision");
  assert.equal(w?.labels["launcher.recipe"], "dsv4-flash-vision");
  assert.match(w?.labels["launcher.recipe-hash"] ?? "", /^[0-9a-f]{12}$/);
  assert.equal(w?.labels["launcher.rank"], "1");
  assert.equal(w?.labels["launcher.node"], "spark2");
  assert.equal(w?.container, "launcher-dsv4-flash-vision-r1");
});

test("--port, lanes and deployment names reach the plan", () => {
  const r = resolveRecipe("dsv4-flash-vision", fileRecipeSource(["recipes"])).recipe;
  assert.ok(r);
  const p = planDeployment(r, cluster("examples/clusters/spark-2x.toml"), { apiPort: 9000, lane: "vision" });
  assert.ok(p.ok);
  assert.equal(p.plan.deployment, "dsv4-flash-vision");
  assert.equal(p.plan.endpoint, "http://spark1.lan:9000");
  assert.equal(p.plan.nodes[0]?.labels["launcher.lane"], "vision");
  assert.equal(p.plan.nodes[0]?.argv.at(-1), "9000");
});

test("--nodes picks the nodes and their order: the first named is the head", () => {
  const r = resolveRecipe("dsv4-flash-vision", fileRecipeSource(["recipes"])).recipe;
  assert.ok(r);
  const c = cluster("examples/clusters/spark-4x.toml");
  const names = c.nodes.map((n) => n.name);
  const p = planDeployment(r, c, { nodes: [names[3] as string, names[2] as string] });
  assert.ok(p.ok);
  assert.deepEqual(p.plan.nodes.map((n) => [n.node, n.rank, n.role]), [[names[3], 0, "head"], [names[2], 1, "worker"]]);
  const bad = planDeployment(r, c, { nodes: ["nope", names[0] as string] });
  assert.ok(!bad.ok);
  assert.match(bad.diagnostics[0]?.message ?? "", /no node nope in the cluster/);
  const few = planDeployment(r, c, { nodes: [names[0] as string] });
  assert.ok(!few.ok);
  assert.match(few.diagnostics[0]?.message ?? "", /needs 2 nodes, 1 were named/);
});

const memoryRecipe = (extra: string) => {
  const r = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": extra + BASE }));
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  return r.recipe;
};
const twoNodes = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\n[[nodes]]\nname = "a2"\nhost = "h2"\nuser = "bob"\nfabric_ip = "10.9.0.2"\n`).cluster;

test("without a fabric IP the head's host is the rendezvous address; ~ needs a known user", () => {
  assert.ok(twoNodes);
  const r = memoryRecipe("");
  const p = planDeployment(r, twoNodes);
  assert.ok(p.ok);
  assert.equal(p.plan.master_addr, "h1");
  assert.equal(p.plan.nodes[1]?.env.VLLM_HOST_IP, "10.9.0.2");
  assert.equal(p.plan.nodes[0]?.env.VLLM_HOST_IP, undefined, "a worker's value never reaches the head");
  const withHome = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": `${BASE}\n[[extra_mounts]]\nhost = "~/c"\ncontainer = "/c"\n` })).recipe;
  assert.ok(withHome);
  const bad = planDeployment(withHome, twoNodes);
  assert.equal(bad.ok, false);
  assert.match(JSON.stringify(bad), /node a1: mount ~\/c uses ~ but the node's user is unknown/);
});

test("a recipe entrypoint replaces the image's; the command stays model + flags", () => {
  assert.ok(twoNodes);
  const p = planDeployment(memoryRecipe(`entrypoint = ["python3", "-m", "vllm.entrypoints.cli.main", "serve"]\n`), twoNodes);
  assert.ok(p.ok);
  const argv = p.plan.nodes[0]?.argv ?? [];
  const i = argv.indexOf("--entrypoint");
  assert.equal(argv[i + 1], "python3");
  assert.deepEqual(argv.slice(argv.indexOf("img:local"), argv.indexOf("img:local") + 6), ["img:local", "-m", "vllm.entrypoints.cli.main", "serve", "org/model", "--served-model-name"]);
});

test("ray backend: ray head and workers, one vllm serve on the head, head started first", () => {
  assert.ok(twoNodes);
  const r = { ...memoryRecipe(""), distributed_backend: "ray" as const };
  const p = planDeployment(r, twoNodes);
  assert.ok(p.ok);
  assert.deepEqual(p.plan.start_order, ["a1", "a2"]);
  assert.deepEqual(startSteps(p.plan), [["a1"], ["a2"]], "the workers' docker runs wait for the head's");
  const [head, worker] = p.plan.nodes;
  assert.deepEqual(worker?.argv.slice(-4), ["start", "--block", "--address=h1:6379", "--node-ip-address=10.9.0.2"]);
  assert.equal(worker?.env.RAY_NODE_IP_ADDRESS, "10.9.0.2");
  const argv = head?.argv ?? [];
  const at = argv.indexOf("img:local");
  assert.equal(argv[argv.indexOf("--entrypoint") + 1], "sh");
  assert.equal(argv[at + 1], "-c");
  // $1... of the head's script: head IP, port, wait, keys kept per node, nodes to wait for, then vllm serve.
  assert.deepEqual(argv.slice(at + 3, at + 6), ["sh", "h1", "6379"]);
  assert.equal(argv[at + 8], "a1=h1,a2=10.9.0.2");
  assert.equal(argv.slice(at + 9).join(" "), "vllm serve org/model --served-model-name served --max-model-len 4096 --enable-prefix-caching --distributed-executor-backend ray --tensor-parallel-size 2 --pipeline-parallel-size 1 --host h1 --port 8000");
});

test("too few nodes in the cluster is an error", () => {
  const one = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\n`).cluster;
  assert.ok(one);
  const p = planDeployment(memoryRecipe(""), one);
  assert.equal(p.ok, false);
  assert.match(JSON.stringify(p), /needs 2 nodes, the cluster has 1/);
});
