import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { test, type TestContext } from "node:test";
import { parseAllDocuments } from "yaml";
import type { Cluster } from "../../src/cluster/cluster.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { UserError } from "../../src/config/errors.js";
import { adapterOf } from "../../src/engine/registry.js";
import { escapeExpansion, expand } from "../../src/export/expansion.js";
import { exportHeader, exportK8s, exportOptions, type K8sChoices, type K8sExportResult } from "../../src/export/k8s.js";
import { crdCheck, lwsCrdOf } from "../../src/export/lws-crd.js";
import { lwsProblems } from "../../src/export/lws-schema.js";
import { exportProblems } from "../../src/export/validate.js";
import { apiAddress } from "../../src/plan/api-address.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { planJson } from "../../src/plan/render.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { assertGolden } from "./golden.js";
import { handMadeCrd, NO_REFERENCE, referenceCheck } from "./lws-reference.js";

const clusterOf = (name: string): Cluster => {
  const file = `examples/clusters/${name}.toml`;
  const c = parseCluster(file, readFileSync(file, "utf8")).cluster;
  assert.ok(c, file);
  return c;
};

function planOf(ref: string, cluster: Cluster): Plan {
  const r = resolveRecipe(ref, fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  const p = planDeployment(r.recipe, cluster);
  assert.ok(p.ok, JSON.stringify(p));
  return p.plan;
}

const CHOICES: K8sChoices = { fabric: { network: "host" }, claims: {}, home: "/home/ai" };

function exported(ref: string, clusterName: string, choices: Partial<K8sChoices> = {}, base: K8sChoices = CHOICES): { plan: Plan; cluster: Cluster; result: K8sExportResult } {
  const cluster = clusterOf(clusterName);
  const plan = planOf(ref, cluster);
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const image = plan.recipe.docker_image_dir === undefined ? {} : { image: `registry.example/${plan.recipe.docker_image}` };
  const result = exportK8s(plan, engine, exportOptions(plan, cluster, { ...base, ...image, ...choices }), exportHeader(ref, plan, engine, undefined));
  return { plan, cluster, result };
}

/** Every example with a recipe: each is exported, validated and checked against its plan. */
const EXAMPLES = readdirSync("examples/recipes", { withFileTypes: true }).filter((d) => d.isDirectory() && existsSync(`examples/recipes/${d.name}/recipe.toml`)).map((d) => d.name).sort();
/**
 * The exports kept as golden files: both seeds and the examples of vLLM's recipes. An example
 * another engine's work adds is exported and checked above all the same; its golden file comes
 * with its engine.
 */
const GOLDEN = new Set(["dsv4-flash-vision", "dsv41-flash-4x-dcp2", "example.qwen3-8b-1x", "example.qwen3-32b-2x", "example.qwen3-32b-2x-spec6"]);
const CASES: readonly (readonly [string, string, string])[] = [
  ["dsv4-flash-vision", "dsv4-flash-vision", "spark-2x"],
  ["dsv41-flash-4x-dcp2", "dsv41-flash-4x-dcp2", "spark-4x"],
  ...EXAMPLES.map((e) => [`examples/recipes/${e}`, `example.${e}`, "spark-2x"] as const),
];

/**
 * An example whose engine cannot be one LWS template (its ranks need each node's address before
 * they start) is refused, saying so; none of the golden ones is.
 */
function exportedOrRefused(ref: string, clusterName: string, golden: string, t: TestContext): ReturnType<typeof exported> | undefined {
  try {
    return exported(ref, clusterName);
  } catch (e) {
    if (GOLDEN.has(golden) || !(e instanceof UserError) || !/cannot be exported to Kubernetes/.test(`${e.message} ${e.hint ?? ""}`)) throw e;
    t.skip(`refused: ${e.message}`);
    return undefined;
  }
}

for (const [ref, golden, clusterName] of CASES) {
  test(`export k8s ${ref} on ${clusterName}: valid against launcher's LWS schema and the core types${GOLDEN.has(golden) ? ", golden" : ""}`, (t) => {
    const done = exportedOrRefused(ref, clusterName, golden, t);
    if (done === undefined) return;
    const { result } = done;
    assert.deepEqual(exportProblems(result.manifest), []);
    if (GOLDEN.has(golden)) assertGolden(`test/golden/k8s/${golden}.${clusterName}.yaml`, result.yaml);
    const docs = parseAllDocuments(result.yaml).map((d) => d.toJS() as Record<string, unknown>);
    assert.deepEqual(docs, [result.manifest.lws, result.manifest.service], "the YAML reads back as the objects validated");
    assert.deepEqual(lwsProblems(docs[0]), [], "launcher's LWS schema takes the LeaderWorkerSet as written");
  });

  test(`export k8s ${ref} on ${clusterName}: valid against the published LWS CRD${GOLDEN.has(golden) ? ", its golden file too" : ""}`, { skip: NO_REFERENCE }, (t) => {
    const done = exportedOrRefused(ref, clusterName, golden, t);
    if (done === undefined) return;
    const crd = referenceCheck();
    assert.deepEqual(crd.check(done.result.manifest.lws), []);
    assert.deepEqual(exportProblems(done.result.manifest, crd), []);
    if (!GOLDEN.has(golden)) return;
    const file = `test/golden/k8s/${golden}.${clusterName}.yaml`;
    const [lws, service] = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as Record<string, unknown>);
    assert.ok(lws !== undefined && service !== undefined, file);
    assert.deepEqual(exportProblems({ lws, service }, crd), [], file);
  });

  test(`export k8s ${ref} on ${clusterName}: every rank's command, with the LWS variables put in, is plan's argv`, (t) => {
    const done = exportedOrRefused(ref, clusterName, golden, t);
    if (done === undefined) return;
    const { plan, cluster, result } = done;
    const engine = adapterOf(plan.recipe.engine);
    assert.ok(engine);
    const head = cluster.nodes.find((n) => n.name === plan.nodes[0]?.node);
    assert.ok(head);
    const planned = planJson(plan) as { nodes: { rank: number; argv: string[]; env: Record<string, string> }[] };
    const spec = result.manifest.lws.spec as { leaderWorkerTemplate: Record<string, { spec: { containers: { command: string[]; args: string[]; env: { name: string; value?: string }[] }[] } }> };
    for (const node of planned.nodes) {
      const template = spec.leaderWorkerTemplate[node.rank === 0 && plan.nodes.length > 1 ? "leaderTemplate" : "workerTemplate"];
      const container = template?.spec.containers[0];
      assert.ok(container);
      const vars: Record<string, string> = { LWS_LEADER_ADDRESS: plan.master_addr, LWS_WORKER_INDEX: String(node.rank), LWS_GROUP_SIZE: String(plan.nodes.length), LAUNCHER_POD_IP: apiAddress(cluster, head, plan.api_port).bind };
      const argv: string[] = [...container.command, ...container.args].map((w) => expand(w, vars));
      assert.deepEqual(argv.slice(0, 2), ["sh", "-c"]);
      // docker run ... [--entrypoint E] ... -- IMAGE ARGS: the process is E (else the image's, the adapter's default) and ARGS.
      const dashes = node.argv.indexOf("--");
      const entry = node.argv.indexOf("--entrypoint");
      const entrypoint: string[] = entry >= 0 && entry < dashes ? [node.argv[entry + 1] as string] : [...(engine.defaultEntrypoint ?? [])];
      assert.deepEqual(argv.slice(4), [...entrypoint, ...node.argv.slice(dashes + 2)], `rank ${node.rank}`);
      // The env too, but for the per-node fabric keys (the start script's).
      const env = Object.fromEntries(container.env.filter((e) => e.value !== undefined && !e.name.startsWith("LAUNCHER_")).map((e) => [e.name, expand(e.value as string, vars)]));
      assert.deepEqual(env, Object.fromEntries(Object.entries(node.env).filter(([k]) => !engine.managedEnv.includes(k))), `rank ${node.rank}'s env`);
    }
  });
}

/**
 * Fields broken on purpose: each fails launcher's own check (its LWS schema, and kubernetes-models
 * for the pod templates and the Service), naming the field, and fails the published CRD too.
 */
const BREAKAGES: readonly { what: string; change: (m: { lws: Record<string, any>; service: Record<string, any> }) => void; own: RegExp; crd?: RegExp }[] = [
  { what: "restartPolicy not one of LWS's", change: (m) => (m.lws.spec.leaderWorkerTemplate.restartPolicy = "Sometimes"), own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate\/restartPolicy: Invalid option/m, crd: /^\/spec\/leaderWorkerTemplate\/restartPolicy: must be equal to one of the allowed values/m },
  { what: "size a string", change: (m) => (m.lws.spec.leaderWorkerTemplate.size = "2"), own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate\/size: Invalid input: expected number, received string/m, crd: /^\/spec\/leaderWorkerTemplate\/size: must be integer/m },
  { what: "startupPolicy not one of LWS's", change: (m) => (m.lws.spec.startupPolicy = "WorkersFirst"), own: /^LeaderWorkerSet \/spec\/startupPolicy: Invalid option: expected one of "LeaderCreated"\|"LeaderReady"/m, crd: /^\/spec\/startupPolicy: must be equal to one of the allowed values \(LeaderCreated, LeaderReady\)/m },
  { what: "a misspelt field", change: (m) => (m.lws.spec.leaderWorkerTemplate.restartpolicy = "None"), own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate: Unrecognized key: "restartpolicy"/m, crd: /^\/spec\/leaderWorkerTemplate: must NOT have additional properties: restartpolicy/m },
  { what: "startupPolicy moved into leaderWorkerTemplate", change: (m) => { m.lws.spec.leaderWorkerTemplate.startupPolicy = m.lws.spec.startupPolicy; delete m.lws.spec.startupPolicy; }, own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate: Unrecognized key: "startupPolicy"/m, crd: /^\/spec\/leaderWorkerTemplate: must NOT have additional properties: startupPolicy/m },
  { what: "a label that is not a string", change: (m) => (m.lws.spec.leaderWorkerTemplate.leaderTemplate.metadata.labels.rank = 0), own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate\/leaderTemplate\/metadata\/labels\/rank: Invalid input: expected string/m, crd: /^\/spec\/leaderWorkerTemplate\/leaderTemplate\/metadata\/labels\/rank: must be string/m },
  { what: "a container without its name", change: (m) => delete m.lws.spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name, own: /^LeaderWorkerSet \/spec\/leaderWorkerTemplate\/workerTemplate: .*name/m, crd: /^\/spec\/leaderWorkerTemplate\/workerTemplate\/spec\/containers\/0: must have required property 'name'/m },
  { what: "the Service's port a word", change: (m) => (m.service.spec.ports[0].port = "eight thousand"), own: /^Service: .*port/m },
];

function brokenExport(change: (m: { lws: Record<string, any>; service: Record<string, any> }) => void): { lws: Record<string, any>; service: Record<string, any> } {
  const { result } = exported("dsv4-flash-vision", "spark-2x");
  const m = structuredClone(result.manifest) as { lws: Record<string, any>; service: Record<string, any> };
  change(m);
  return m;
}

test("a field broken on purpose fails launcher's own validation, naming it", () => {
  assert.deepEqual(exportProblems(brokenExport(() => {})), []);
  for (const b of BREAKAGES) assert.match(exportProblems(brokenExport(b.change)).join("\n"), b.own, b.what);
});

test("a field broken on purpose fails the published LWS CRD too", { skip: NO_REFERENCE }, () => {
  const crd = referenceCheck();
  assert.deepEqual(crd.check(brokenExport(() => {}).lws), []);
  // The Service is not the CRD's: only the LeaderWorkerSet's breakages are held to it.
  for (const b of BREAKAGES) if (b.crd !== undefined) assert.match(crd.check(brokenExport(b.change).lws).join("\n"), b.crd, b.what);
});

test("an export that does not validate is launcher's bug: a plain Error naming every problem, never a user error", () => {
  const cluster = clusterOf("spark-2x");
  const plan = planOf("dsv4-flash-vision", cluster);
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const options = exportOptions(plan, cluster, { ...CHOICES, image: "registry.example/x:1" });
  const crd = { file: "hand-made.yaml", check: crdCheck(lwsCrdOf(handMadeCrd(["subGroupPolicy"]), "hand-made.yaml")) };
  assert.throws(
    () => exportK8s(plan, engine, options, "h", crd),
    (e: unknown) => e instanceof Error && !(e instanceof UserError) && /does not validate:\n {2}- LeaderWorkerSet \/spec\/leaderWorkerTemplate: must have required property 'subGroupPolicy' \(the CRD in hand-made.yaml\)\n\(launcher writes LeaderWorkerSet v1 as LWS v0.10 defines it/.test(e.message),
  );
  const open = { file: "hand-made.yaml", check: crdCheck(lwsCrdOf(handMadeCrd(), "hand-made.yaml")) };
  assert.equal(exportK8s(plan, engine, options, "h", open).manifest.lws.kind, "LeaderWorkerSet");
});

test("LeaderCreated, with the comment that proves it, and the group restarts whole", () => {
  const { result } = exported("dsv4-flash-vision", "spark-2x");
  const spec = result.manifest.lws.spec as { startupPolicy: string; leaderWorkerTemplate: { restartPolicy: string; size: number } };
  assert.equal(spec.startupPolicy, "LeaderCreated");
  assert.equal(spec.leaderWorkerTemplate.restartPolicy, "RecreateGroupOnPodRestart");
  assert.equal(spec.leaderWorkerTemplate.size, 2);
  assert.match(result.yaml, /# LeaderReady would deadlock: the leader is Ready only when its engine answers its health\n {2}# check, which it does only after every worker has joined the rendezvous[^\n]*\n[^\n]*\n {2}startupPolicy: LeaderCreated/);
});

test("choices: a PVC for a mount, an RDMA device plugin instead of a privileged pod, the pod network, a namespace", () => {
  const { result } = exported("examples/recipes/qwen3-32b-2x", "spark-2x", { claims: { "/root/.cache/huggingface": "hf-cache" }, fabric: { network: "pod", rdmaResource: "rdma/rdma_shared_device_a" }, namespace: "llm" });
  const pod = (result.manifest.lws.spec as any).leaderWorkerTemplate.workerTemplate.spec;
  assert.equal(pod.hostNetwork, undefined);
  assert.deepEqual(pod.volumes.find((v: any) => v.persistentVolumeClaim !== undefined), { name: "mount-0", persistentVolumeClaim: { claimName: "hf-cache" } });
  assert.equal(pod.volumes.some((v: any) => v.name === "infiniband"), false);
  assert.equal(pod.containers[0].securityContext.privileged, undefined);
  assert.deepEqual(pod.containers[0].resources.limits, { "nvidia.com/gpu": 1, "rdma/rdma_shared_device_a": 1 });
  assert.equal((result.manifest.service.metadata as any).namespace, "llm");
  assert.ok(result.notes.some((n) => /--network pod/.test(n)));
  assert.deepEqual(exportProblems(result.manifest), []);
});

test("refused with what to do: a launcher-built image without --image, ~ on nodes whose homes differ, a Service named as the set, a PVC for no mount", () => {
  const cluster = clusterOf("spark-2x");
  const plan = planOf("dsv4-flash-vision", cluster);
  assert.throws(() => exportOptions(plan, cluster, CHOICES), (e: unknown) => e instanceof UserError && /built by launcher/.test(e.message) && /--image REGISTRY\/dsv4-flash-vision:local/.test(e.hint ?? ""));
  assert.throws(() => exported("dsv4-flash-vision", "spark-2x", {}, { fabric: { network: "host" }, claims: {} }), (e: unknown) => e instanceof UserError && /homes differ/.test(e.message));
  assert.throws(() => exported("dsv4-flash-vision", "spark-2x", { lane: "dsv4-flash-vision" }), (e: unknown) => e instanceof UserError && /headless Service/.test(e.message));
  assert.throws(() => exported("dsv4-flash-vision", "spark-2x", { lane: "Vision_Lane" }), (e: unknown) => e instanceof UserError && /DNS label/.test(e.message));
  assert.throws(() => exported("dsv4-flash-vision", "spark-2x", { claims: { "/nowhere": "c" } }), (e: unknown) => e instanceof UserError && /mounts nothing there/.test(e.message));
});

/** examples/recipes/qwen3-32b-2x with distributed_backend = "ray": the Ray backend's export. */
function rayExported(): { plan: Plan; cluster: Cluster; result: K8sExportResult } {
  const cluster = clusterOf("spark-2x");
  const r = resolveRecipe("examples/recipes/qwen3-32b-2x", fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe);
  const p = planDeployment({ ...r.recipe, distributed_backend: "ray" as const }, cluster);
  assert.ok(p.ok, JSON.stringify(p));
  const engine = adapterOf(p.plan.recipe.engine);
  assert.ok(engine);
  const ref = "examples/recipes/qwen3-32b-2x (distributed_backend = ray)";
  return { plan: p.plan, cluster, result: exportK8s(p.plan, engine, exportOptions(p.plan, cluster, CHOICES), exportHeader(ref, p.plan, engine, undefined)) };
}
const RAY_GOLDEN = "test/golden/k8s/example.qwen3-32b-2x-ray.spark-2x.yaml";

type Container = { command: string[]; args: string[]; env: { name: string; value?: string }[] };
const containerOf = (result: K8sExportResult, template: "leaderTemplate" | "workerTemplate"): Container => {
  const c = (result.manifest.lws.spec as any).leaderWorkerTemplate[template].spec.containers[0] as Container | undefined;
  assert.ok(c, template);
  return c;
};

test("the Ray backend exports: golden, valid against launcher's LWS schema and the core types", () => {
  const { result } = rayExported();
  assert.deepEqual(exportProblems(result.manifest), []);
  assertGolden(RAY_GOLDEN, result.yaml);
  const docs = parseAllDocuments(result.yaml).map((d) => d.toJS() as Record<string, unknown>);
  assert.deepEqual(docs, [result.manifest.lws, result.manifest.service]);
});

test("the Ray backend's export, and its golden file, are valid against the published LWS CRD", { skip: NO_REFERENCE }, () => {
  const crd = referenceCheck();
  assert.deepEqual(exportProblems(rayExported().result.manifest, crd), []);
  const [lws, service] = parseAllDocuments(readFileSync(RAY_GOLDEN, "utf8")).map((d) => d.toJS() as Record<string, unknown>);
  assert.ok(lws !== undefined && service !== undefined);
  assert.deepEqual(exportProblems({ lws, service }, crd), []);
});

test("the Ray backend: every rank's command, with the LWS variables put in, is the engine's command for that rank when addresses are known only at start; the leader's vllm serve is plan's word for word", () => {
  const { plan, cluster, result } = rayExported();
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const head = cluster.nodes.find((n) => n.name === plan.nodes[0]?.node);
  assert.ok(head);
  const bind = apiAddress(cluster, head, plan.api_port).bind;
  const planned = planJson(plan) as { nodes: { rank: number; argv: string[]; env: Record<string, string> }[] };
  for (const node of planned.nodes) {
    const container = containerOf(result, node.rank === 0 ? "leaderTemplate" : "workerTemplate");
    const vars = { LWS_LEADER_ADDRESS: plan.master_addr, LWS_WORKER_INDEX: String(node.rank), LWS_GROUP_SIZE: String(plan.nodes.length), LAUNCHER_POD_IP: bind };
    const argv = [...container.command, ...container.args].map((w) => expand(w, vars));
    const own = engine.rankCommand(plan.recipe, { rank: node.rank, nnodes: plan.nodes.length, masterAddr: plan.master_addr, masterPort: plan.master_port, apiPort: plan.api_port, apiHost: bind, nodes: plan.nodes.map((n) => ({ name: n.node })), addressesAtStart: true });
    assert.deepEqual(argv.slice(4), [...(own.entrypoint ?? []), ...own.command], `rank ${node.rank}`);
    const env = Object.fromEntries(container.env.filter((e) => e.value !== undefined && !e.name.startsWith("LAUNCHER_")).map((e) => [e.name, expand(e.value as string, vars)]));
    assert.deepEqual(env, Object.fromEntries(Object.entries(node.env).filter(([k]) => !engine.managedEnv.includes(k))), `rank ${node.rank}'s env`);
  }
  // The head's script takes (ip, port, seconds, keys, nodes) and then the serve argv: all but the
  // node's own address and the nodes it waits for (a count, not NAME=IP) are plan's.
  const leader = [...containerOf(result, "leaderTemplate").args].map((w) => expand(w, { LAUNCHER_POD_IP: bind }));
  const planHead = planned.nodes[0]?.argv ?? [];
  const planAfter = planHead.slice(planHead.indexOf("--") + 2);
  assert.equal(planAfter[0], "-c");
  assert.deepEqual(leader.slice(3, 9), ["sh", "", ...planAfter.slice(4, 7), "2"]);
  assert.equal(planAfter[7], "spark1=192.168.177.11,spark2=192.168.177.12", "launcher's own boot still waits for each node by its address");
  assert.deepEqual(leader.slice(9), planAfter.slice(8));
  assert.ok(leader.slice(9).includes("--distributed-executor-backend"));
  assert.equal(planned.nodes[1]?.argv.slice(-4).join(" "), "start --block --address=192.168.177.11:6379 --node-ip-address=192.168.177.12", "launcher's own Ray worker is as before");
});

test("llama.cpp over RPC is refused, saying why (rpc-server binds the fabric address only, a pod's DNS name is its Kubernetes address) and what would make it possible", () => {
  assert.throws(
    () => exported("examples/recipes/llamacpp-qwen3-235b-2x", "spark-2x"),
    (e: unknown) =>
      e instanceof UserError &&
      /^recipe llamacpp-qwen3-235b-2x: engine llamacpp cannot be exported to Kubernetes: llama\.cpp's RPC workers need each node's fabric address before the head starts/.test(e.message) &&
      /rpc-server has no authentication/.test(e.message) &&
      /NAME-0-1\.NAME/.test(e.message) &&
      /launcher up/.test(e.hint ?? "") &&
      /k3s --node-ip/.test(e.hint ?? ""),
  );
  // One node has no RPC: its llama-server alone is the set's one pod, whatever it knows of addresses.
  const engine = adapterOf("llamacpp");
  assert.ok(engine);
  const one = { rank: 0, nnodes: 1, masterAddr: "m", masterPort: 29501, apiPort: 8000, apiHost: "10.0.0.1", nodes: [{ name: "a" }], addressesAtStart: true } as const;
  const recipe = { model: "/models/m.gguf", docker_image: "i", tensor_parallel_size: 1, pipeline_parallel_size: 1, distributed_backend: "mp", args: [], env: {} };
  assert.ok(!engine.rankCommand(recipe, one).command.includes("--rpc"));
});

test("the engine's API key is never in the export: the env takes it from a Secret, and the notes say how to make it", () => {
  const cluster = clusterOf("spark-2x");
  const r = resolveRecipe("examples/recipes/qwen3-32b-2x", fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe);
  const secret = "sk-export-test-0123456789";
  const recipe = { ...r.recipe, args: [...r.recipe.args, "--api-key", secret] };
  const p = planDeployment(recipe, cluster);
  assert.ok(p.ok, JSON.stringify(p));
  const engine = adapterOf(recipe.engine);
  assert.ok(engine);
  const result = exportK8s(p.plan, engine, exportOptions(p.plan, cluster, CHOICES), "h");
  assert.doesNotMatch(result.yaml, new RegExp(secret));
  assert.doesNotMatch(JSON.stringify(result.manifest), new RegExp(secret));
  const env = (result.manifest.lws.spec as any).leaderWorkerTemplate.leaderTemplate.spec.containers[0].env as { name: string; valueFrom?: unknown }[];
  assert.deepEqual(env.find((e) => e.name === engine.flags.apiKey.env), { name: engine.flags.apiKey.env, valueFrom: { secretKeyRef: { name: "qwen3-32b-2x-engine-key", key: "api-key" } } });
  assert.ok(result.notes.some((n) => /kubectl create secret generic qwen3-32b-2x-engine-key/.test(n)));
});

test("a word reaches the container as planned through Kubernetes' $(VAR) expansion", () => {
  for (const word of ["$(HOME)", "$$(HOME)", "a$b", "$", "$$", "x$(", "$(unclosed", "cost: $5 $$ $(A) $$$(B)", '{"k":"$(v)"}', ")$()"]) {
    assert.equal(expand(escapeExpansion(word), { HOME: "/root", A: "a", B: "b", v: "V" }), word, word);
  }
  assert.equal(expand("--node-rank $(LWS_WORKER_INDEX) $(UNSET)", { LWS_WORKER_INDEX: "2" }), "--node-rank 2 $(UNSET)");
});
