import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import type { Cluster } from "../../src/cluster/cluster.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { DEFAULTS, seconds } from "../../src/contract/defaults.js";
import { PROBE_PATH, probeBody } from "../../src/contract/generation.js";
import type { EngineAdapter } from "../../src/engine/adapter.js";
import { STATE_FILE } from "../../src/engine/generation-probe.js";
import { adapterOf } from "../../src/engine/registry.js";
import { expand } from "../../src/export/expansion.js";
import { exportHeader, exportK8s, exportOptions, type K8sChoices, type K8sExportResult } from "../../src/export/k8s.js";
import { exportProblems } from "../../src/export/validate.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { NO_REFERENCE, referenceCheck } from "./lws-reference.js";
import { close, engine, json, run, TOKEN } from "./probe-engine.js";

// The exported leader's liveness is launcher serve's generation probe, run by the engine's own
// image (src/export/lws.ts generationLiveness, src/engine/generation-probe.ts): each engine's,
// exported with an API key, run here as the kubelet runs it against a stand-in engine.

const KEY = "sk-liveness-test-0123456789";

function cluster(): Cluster {
  const file = "examples/clusters/spark-2x.toml";
  const c = parseCluster(file, readFileSync(file, "utf8")).cluster;
  assert.ok(c, file);
  return c;
}

/** An example recipe with `--api-key KEY` added, planned, on `port`. */
function keyedPlan(ref: string, port: number): Plan {
  const r = resolveRecipe(ref, fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  const p = planDeployment({ ...r.recipe, args: [...r.recipe.args, "--api-key", KEY] }, cluster());
  assert.ok(p.ok, JSON.stringify(p));
  assert.equal(p.plan.api_key, KEY);
  return { ...p.plan, api_port: port };
}

function exported(plan: Plan, adapter: EngineAdapter, choices: K8sChoices): K8sExportResult {
  return exportK8s(plan, adapter, exportOptions(plan, cluster(), choices), exportHeader("r", plan, adapter, undefined));
}

type Probe = { exec?: { command: string[] }; httpGet?: { path: string }; periodSeconds: number; timeoutSeconds: number; failureThreshold: number };
type Container = { env: { name: string; value?: string; valueFrom?: unknown }[]; livenessProbe: Probe; readinessProbe: Probe; startupProbe: Probe };
const leaderOf = (result: K8sExportResult): Container => {
  const t = (result.manifest.lws.spec as any).leaderWorkerTemplate;
  return (t.leaderTemplate ?? t.workerTemplate).spec.containers[0] as Container;
};

const BASE: K8sChoices = { fabric: { network: "host" }, claims: {}, home: "/home/ai" };
const CASES: readonly (readonly [string, string, K8sChoices])[] = [
  ["vllm", "examples/recipes/qwen3-32b-2x", BASE],
  ["sglang", "examples/recipes/qwen3-32b-2x-sglang", BASE],
  ["llamacpp", "examples/recipes/llamacpp-qwen3-235b-2x", { ...BASE, nodeIpIsFabric: true }],
];

for (const [name, ref, choices] of CASES) {
  test(`${name}: the leader's liveness is the generation probe; run as the kubelet runs it, it passes on a token and sends the key from the Secret's env, which the export never holds`, async () => {
    const e = await engine(json(200, TOKEN));
    const dir = mkdtempSync(path.join(tmpdir(), "liveness-"));
    try {
      const adapter = adapterOf(name);
      assert.ok(adapter);
      const plan = keyedPlan(ref, e.port);
      const result = exported(plan, adapter, choices);
      assert.doesNotMatch(result.yaml, new RegExp(KEY));
      assert.deepEqual(exportProblems(result.manifest), []);
      const leader = leaderOf(result);
      const probe = leader.livenessProbe;
      assert.ok(probe.exec, JSON.stringify(probe));
      assert.equal(probe.periodSeconds, seconds(DEFAULTS.probeEvery));
      assert.equal(probe.failureThreshold, 2, "one slow answer is no wedge: a second failure confirms it");
      assert.ok(probe.timeoutSeconds > seconds(DEFAULTS.probeBound), "the program's own bound ends it first");
      assert.ok(probe.exec.command.includes(String(seconds(DEFAULTS.probeBound))));
      assert.deepEqual(leader.readinessProbe.httpGet, { path: adapter.healthPath, port: "http" }, "readiness stays launcher's: the health check");
      // The kubelet expands an exec probe's command with the container's plain env values only.
      const statics = Object.fromEntries(leader.env.filter((v) => v.value !== undefined).map((v) => [v.name, v.value as string]));
      // The counter's file in a folder of the test's own, not this machine's /tmp.
      const argv = probe.exec.command.map((w) => expand(w, statics)).map((w) => (w === STATE_FILE ? path.join(dir, "state-") : w));
      assert.ok(leader.env.some((v) => v.name === adapter.flags.apiKey.env && v.valueFrom !== undefined), "the key comes from the Secret");
      const r = await run(argv, { LAUNCHER_POD_IP: "127.0.0.1", [adapter.flags.apiKey.env]: KEY }, 60_000);
      assert.equal(r.code, 0, r.out);
      assert.deepEqual(e.seen.filter((s) => s.method === "POST"), [{ method: "POST", url: PROBE_PATH, authorization: `Bearer ${KEY}`, body: probeBody(plan.served_model) }]);
      assert.ok(e.seen.some((s) => s.method === "GET" && s.url === adapter.metricsPath), "it read the engine's token counter first");
      assert.ok(argv.includes((adapter.engineMetrics?.generationTokens ?? []).join(",")), "the counter's names are the adapter's");
      assert.match(result.yaml, /# livenessProbe: launcher serve's generation probe/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await close(e.server);
    }
  });

  test(`${name}: the export with its generation probe is valid against the published LWS CRD`, { skip: NO_REFERENCE }, () => {
    const adapter = adapterOf(name);
    assert.ok(adapter);
    const result = exported(keyedPlan(ref, 8000), adapter, choices);
    assert.deepEqual(exportProblems(result.manifest, referenceCheck()), []);
    const [lws, service] = parseAllDocuments(result.yaml).map((d) => d.toJS() as Record<string, unknown>);
    assert.ok(lws !== undefined && service !== undefined);
    assert.deepEqual(exportProblems({ lws, service }, referenceCheck()), []);
  });
}

test("an engine whose image gives no generation probe keeps the health check as liveness, and the notes say so", () => {
  const vllm = adapterOf("vllm");
  assert.ok(vllm);
  const { generationProbe: _probe, ...bare } = vllm;
  const result = exported(keyedPlan("examples/recipes/qwen3-32b-2x", 8000), bare, BASE);
  const probe = leaderOf(result).livenessProbe;
  assert.deepEqual(probe, { httpGet: { path: "/health", port: "http" }, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 });
  assert.ok(result.notes.some((n) => /engine vllm's image has no generation probe: the leader's liveness is its health check \(\/health\) alone/.test(n)), result.notes.join("\n"));
  assert.doesNotMatch(result.yaml, /# livenessProbe/);
  assert.deepEqual(exportProblems(result.manifest), []);
  // With one, no such note.
  assert.ok(!exported(keyedPlan("examples/recipes/qwen3-32b-2x", 8000), vllm, BASE).notes.some((n) => /no generation probe/.test(n)));
});

test("the probe's words reach the program as planned through the kubelet's $(VAR) expansion", () => {
  const vllm = adapterOf("vllm");
  assert.ok(vllm);
  const served = "q$(HOME)$$x";
  const result = exported({ ...keyedPlan("examples/recipes/qwen3-32b-2x", 8000), served_model: served }, vllm, BASE);
  const command = leaderOf(result).livenessProbe.exec?.command ?? [];
  assert.ok(command.map((w) => expand(w, { HOME: "/root" })).includes(probeBody(served)), JSON.stringify(command.slice(3)));
});
