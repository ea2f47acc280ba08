import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { validate as podTemplateSchema } from "kubernetes-models/_schemas/IoK8sApiCoreV1PodTemplateSpec";
import type { Cluster } from "../../src/cluster/cluster.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { UserError } from "../../src/config/errors.js";
import { escapeRegExp } from "../../src/config/reg-exp.js";
import { isSecretEnvName } from "../../src/config/secret-env.js";
import { NOT_FABRIC_ADDRESS, NOT_FABRIC_ADDRESS_PATTERN, NOT_FABRIC_ADDRESS_TAIL } from "../../src/contract/pod-start.js";
import { RPC_NOT_REACHED, RPC_NOT_REACHED_PATTERN } from "../../src/engine/llamacpp/at-start.js";
import { RAY_HEAD_UNREACHED, RAY_HEAD_UNREACHED_PATTERN, RAY_NOT_JOINED, RAY_NOT_JOINED_PATTERN } from "../../src/engine/vllm/ray.js";
import type { EngineAdapter } from "../../src/engine/adapter.js";
import { llamacpp } from "../../src/engine/llamacpp/adapter.js";
import { adapterOf } from "../../src/engine/registry.js";
import { templateCommands } from "../../src/export/commands.js";
import { FACT_VARS } from "../../src/export/fabric-start.js";
import { unknownFields } from "../../src/export/core-fields.js";
import { exportProblems } from "../../src/export/validate.js";
import { droppedRunArgs, exportK8s, exportOptions, type K8sChoices } from "../../src/export/k8s.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";

/*
 * `launcher export k8s` after its hostile review: messages without the export's own markers,
 * secrets of the recipe's env in a Secret, the pod network's own interfaces, the docker settings
 * a pod spec leaves out.
 */

const CHOICES: K8sChoices = { fabric: { network: "host" }, claims: {}, home: "/home/ai" };

function cluster(name = "spark-2x", edit: (text: string) => string = (t) => t): Cluster {
  const file = `examples/clusters/${name}.toml`;
  const c = parseCluster(file, edit(readFileSync(file, "utf8"))).cluster;
  assert.ok(c, file);
  return c;
}

function recipeOf(ref: string): Recipe {
  const r = resolveRecipe(ref, fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  return r.recipe;
}

function planOf(recipe: Recipe, c: Cluster): Plan {
  const p = planDeployment(recipe, c);
  assert.ok(p.ok, JSON.stringify(p));
  return p.plan;
}

test("an engine's refusal names the plan's node and the pod's IP in words: no stand-in rank, no NUL marker", () => {
  const c = cluster();
  const plan = planOf(recipeOf("examples/recipes/llamacpp-qwen3-235b-2x"), c);
  // An engine that refuses every worker's address, naming it as command.ts does.
  const picky: EngineAdapter = {
    ...llamacpp,
    rankCommand: (recipe, ctx) => {
      if (ctx.rank === 0) return llamacpp.rankCommand(recipe, ctx);
      const node = ctx.nodes[ctx.rank]?.name ?? `rank ${ctx.rank}`;
      throw new UserError(`node ${node}: fabric_ip ${JSON.stringify(ctx.nodeIp)} is not one rpc-server binds to`, `set fabric_ip for ${node}`);
    },
  };
  const e = (() => {
    try {
      templateCommands(plan, picky, { name: "x", nodeIpIsFabric: true });
    } catch (err) {
      return err;
    }
    assert.fail("refused");
  })();
  assert.ok(e instanceof UserError);
  const said = `${e.message}\n${e.hint ?? ""}`;
  assert.match(said, new RegExp(`node ${plan.nodes[1]?.node}: fabric_ip the pod's IP is not`));
  assert.doesNotMatch(said, /\u0000|\\u0000|1000003|LAUNCHER_POD_IP/);
});

test("llama.cpp under --node-ip-is-fabric: the worker's address is checked by its pod, not at export", () => {
  const c = cluster();
  const plan = planOf(recipeOf("examples/recipes/llamacpp-qwen3-235b-2x"), c);
  const { worker } = templateCommands(plan, llamacpp, { name: "x", nodeIpIsFabric: true });
  assert.deepEqual(worker.argv.slice(-4), ["--host", "$(LAUNCHER_POD_IP)", "--port", String(plan.master_port)]);
});

test("secret env names: one rule, by whole words", () => {
  for (const name of ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "DB_PASSWORD", "OPENAI_APIKEY", "GOOGLE_APPLICATION_CREDENTIALS"]) assert.equal(isSecretEnvName(name), true, name);
  for (const name of ["PRACTICE_KV_TOKENS", "HF_HOME", "VLLM_USE_V2_MODEL_RUNNER", "CACHE_KEY", "MAX_JOBS", "TOKENIZERS_PARALLELISM"]) assert.equal(isSecretEnvName(name), false, name);
});

test("a recipe's secret env (HF_TOKEN) is read from the Secret NAME-env, never written in the YAML or the JSON; the note says how to make it", () => {
  const c = cluster();
  const base = recipeOf("examples/recipes/qwen3-32b-2x");
  const token = "hf_exportTestToken0123456789";
  const recipe = { ...base, env: { ...base.env, HF_TOKEN: token, HF_HUB_OFFLINE: "1" } };
  const plan = planOf(recipe, c);
  const engine = adapterOf(recipe.engine);
  assert.ok(engine);
  const result = exportK8s(plan, engine, exportOptions(plan, c, CHOICES), "h");
  assert.doesNotMatch(result.yaml, new RegExp(token));
  assert.doesNotMatch(JSON.stringify({ ...result.manifest, notes: result.notes }), new RegExp(token));
  for (const template of ["leaderTemplate", "workerTemplate"]) {
    const env = (result.manifest.lws.spec as any).leaderWorkerTemplate[template].spec.containers[0].env as { name: string }[];
    assert.deepEqual(env.find((e) => e.name === "HF_TOKEN"), { name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "qwen3-32b-2x-env", key: "HF_TOKEN" } } }, template);
    assert.deepEqual(env.find((e) => e.name === "HF_HUB_OFFLINE"), { name: "HF_HUB_OFFLINE", value: "1" }, template);
  }
  assert.ok(result.notes.some((n) => n.includes("kubectl create secret generic qwen3-32b-2x-env --from-literal=HF_TOKEN=...")), result.notes.join("\n"));
});

test("--network pod: the cluster file's interface is not given to the pod, and its start detects on the pod's own interfaces", () => {
  const c = cluster();
  const plan = planOf(recipeOf("examples/recipes/qwen3-32b-2x"), c);
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const on = (network: "host" | "pod") => {
    const result = exportK8s(plan, engine, exportOptions(plan, c, { ...CHOICES, fabric: { network } }), "h");
    const container = (result.manifest.lws.spec as any).leaderWorkerTemplate.workerTemplate.spec.containers[0] as { command: string[]; env: { name: string }[] };
    return { names: container.env.map((e) => e.name), script: container.command[2] ?? "" };
  };
  const host = on("host");
  const pod = on("pod");
  assert.ok(host.names.includes(FACT_VARS.iface), "host networking keeps the cluster file's shared interface");
  assert.equal(pod.names.includes(FACT_VARS.iface), false);
  assert.equal(pod.names.includes(FACT_VARS.ip), false);
  assert.match(pod.script, /\/sys\/class\/net\//);
  assert.doesNotMatch(host.script, /\/sys\/class\/net\//);
});

test("the cluster file's docker run settings a pod spec leaves out are named in a note; those it carries are not", () => {
  assert.deepEqual(droppedRunArgs(["--gpus", "all", "--network", "host", "--device", "/dev/infiniband", "--ulimit", "memlock=-1", "--memory", "110g", "--init", "--cpus=8"]), ["--memory 110g", "--init", "--cpus=8"]);
  const c = cluster("spark-2x"); // its [docker] extra_args cap the memory: --memory 110g
  const plan = planOf(recipeOf("examples/recipes/qwen3-32b-2x"), c);
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const notes = exportK8s(plan, engine, exportOptions(plan, c, CHOICES), "h").notes;
  const note = notes.find((n) => n.includes("--memory 110g"));
  assert.ok(note, notes.join("\n"));
  assert.match(note, /left out: a pod spec has no field for them/);
  assert.doesNotMatch(note, /--gpus|--device/);
});

test("a misspelt core field fails without any reference CRD: `comand:` in a container, `hostNetwok:` in a pod spec, `selectr:` in the Service", () => {
  const c = cluster();
  const plan = planOf(recipeOf("examples/recipes/qwen3-32b-2x"), c);
  const engine = adapterOf(plan.recipe.engine);
  assert.ok(engine);
  const { manifest } = exportK8s(plan, engine, exportOptions(plan, c, CHOICES), "h");
  assert.deepEqual(exportProblems(manifest), []);
  const broken = structuredClone(manifest) as any;
  const worker = broken.lws.spec.leaderWorkerTemplate.workerTemplate.spec;
  worker.containers[0].comand = worker.containers[0].command;
  worker.hostNetwok = true;
  broken.service.spec.selectr = broken.service.spec.selector;
  const problems = exportProblems(broken);
  for (const field of ["/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/comand", "/spec/leaderWorkerTemplate/workerTemplate/spec/hostNetwok", "Service/spec/selectr"]) {
    assert.ok(problems.some((p) => p.replace("LeaderWorkerSet ", "").startsWith(field)), `${field} in:\n${problems.join("\n")}`);
  }
  assert.equal(problems.length, 3, problems.join("\n"));
  assert.deepEqual(unknownFields({ metadata: { labels: { any: "key" } }, spec: { containers: [{ name: "e", resources: { limits: { "vendor.example/any": 1 } } }] } }, podTemplateSchema), [], "a map's keys are its own");
});

test("each fatal line's pattern is made from its message: a line of the message matches, the message changed does not", () => {
  assert.equal(escapeRegExp("llama.cpp (x)*[y]+?^$|{z}\\/"), "llama\\.cpp \\(x\\)\\*\\[y\\]\\+\\?\\^\\$\\|\\{z\\}\\\\\\/");
  const cases: [RegExp, string, string][] = [
    [NOT_FABRIC_ADDRESS_PATTERN, `${NOT_FABRIC_ADDRESS} 10.0.0.9 ${NOT_FABRIC_ADDRESS_TAIL} (10.10.0.1): the engine is not started`, `${NOT_FABRIC_ADDRESS} 10.0.0.9 is not the fabric's`],
    [RAY_NOT_JOINED_PATTERN, `x ${RAY_NOT_JOINED} 300 s: 1 of 2`, `${RAY_NOT_JOINED} soon: 1 of 2`],
    [RAY_HEAD_UNREACHED_PATTERN, `${RAY_HEAD_UNREACHED} 120 s: head:6379 (refused)`, `${RAY_HEAD_UNREACHED.replace("Ray", "ray")} 120 s: `],
    [RPC_NOT_REACHED_PATTERN, `${RPC_NOT_REACHED} 300 s: w-1.x.ns:29501; check`, `${RPC_NOT_REACHED.replace("llama.cpp", "llamaXcpp")} 300 s: w`],
  ];
  for (const [pattern, line, other] of cases) {
    assert.match(line, pattern);
    assert.doesNotMatch(other, pattern);
  }
});
