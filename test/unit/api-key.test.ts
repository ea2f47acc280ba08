import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { requestsRunning } from "../../src/lanes/drain.js";
import { checkReady } from "../../src/boot/readiness.js";
import { ENGINES } from "../../src/engine/registry.js";
import { planDeployment } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { diffRecipes, formatChanges } from "../../src/recipe/diff.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";
import { readFileSync } from "node:fs";

// vLLM with --api-key or VLLM_API_KEY answers 401 on /v1 routes without `Authorization: Bearer KEY`
// (vllm/entrypoints/openai/api_server.py build_app, AuthenticationMiddleware); this stand-in
// demands it everywhere, so that a probe that forgets it fails.
async function keyedEngine(key: string): Promise<{ url: string; seen: IncomingHttpHeaders[]; server: Server }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    if (req.headers.authorization !== `Bearer ${key}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"Unauthorized"}');
      return;
    }
    if (req.url === "/health") res.writeHead(200).end();
    else if (req.url === "/metrics") res.writeHead(200).end("vllm:num_requests_running{model_name=\"m\"} 3\n");
    else res.writeHead(200, { "content-type": "text/event-stream" }).end('data: {"choices":[{"delta":{"content":"pong"}}]}\n\ndata: [DONE]\n\n');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

test("readiness and drain send the engine's API key; without it they see the 401", async () => {
  const engine = await keyedEngine("s3cret");
  try {
    const signal = AbortSignal.timeout(10_000);
    assert.deepEqual(await checkReady(engine.url, "m", signal, ENGINES.vllm.healthPath, "s3cret"), { ok: true });
    const without = await checkReady(engine.url, "m", signal, ENGINES.vllm.healthPath);
    assert.equal(without.ok, false);
    assert.equal(await requestsRunning(engine.url, ENGINES.vllm, signal, "s3cret"), 3);
    assert.equal(await requestsRunning(engine.url, ENGINES.vllm, signal), undefined);
    assert.ok(engine.seen.every((h) => h.authorization === undefined || h.authorization === "Bearer s3cret"));
    assert.ok(engine.seen.every((h) => !String(h.host ?? "").includes("s3cret")), "never in a URL");
  } finally {
    engine.server.close();
  }
});

const cluster = (): ReturnType<typeof parseCluster>["cluster"] => parseCluster("examples/clusters/spark-2x.toml", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;

function planOf(text: string): ReturnType<typeof planDeployment> {
  const r = resolveRecipe("keyed", memorySource({ "recipes/keyed/recipe.toml": text }));
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  const c = cluster();
  assert.ok(c);
  return planDeployment(r.recipe, c);
}

test("the plan carries the key from --api-key or VLLM_API_KEY and prints it redacted", () => {
  const withFlag = planOf(BASE.replace('"--enable-prefix-caching",', '"--enable-prefix-caching",\n    "--api-key", "flag-secret-1",'));
  const withEnv = planOf(`${BASE}VLLM_API_KEY = "env-secret-2"\n`);
  for (const [p, key] of [[withFlag, "flag-secret-1"], [withEnv, "env-secret-2"]] as const) {
    assert.ok(p.ok, JSON.stringify(p));
    assert.equal(p.plan.api_key, key);
    // The engine still gets it: the containers' argv/env hold it.
    assert.ok(JSON.stringify(p.plan.nodes).includes(key));
    const text = planText(p.plan);
    const json = JSON.stringify(planJson(p.plan));
    assert.ok(!text.includes(key) && !json.includes(key), "never printed");
    assert.match(text, /<redacted>/);
    assert.match(json, /<redacted>/);
  }
  const none = planOf(BASE);
  assert.ok(none.ok);
  assert.equal(none.plan.api_key, undefined);
});

test("diff shows a changed engine API key as a change, never the key", () => {
  const resolveText = (text: string) => {
    const r = resolveRecipe("keyed", memorySource({ "recipes/keyed/recipe.toml": text }));
    assert.ok(r.recipe, JSON.stringify(r.diagnostics));
    return r.recipe;
  };
  const a = resolveText(BASE.replace('"--enable-prefix-caching",', '"--enable-prefix-caching",\n    "--api-key", "old-secret-1",'));
  const b = resolveText(`${BASE}VLLM_API_KEY = "new-secret-2"\n`);
  const text = formatChanges(diffRecipes(a, b)).join("\n");
  assert.match(text, /- args --api-key: <redacted>/);
  assert.match(text, /\+ env VLLM_API_KEY: <redacted>/);
  assert.ok(!text.includes("secret-"), text);
});
