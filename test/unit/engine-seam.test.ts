import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { decodeLabels, encodeLabels, LABELS, type DeploymentLabels } from "../../src/contract/deployment.js";
import { rankBehind } from "../../src/boot/blame.js";
import { requestsRunning } from "../../src/lanes/drain.js";
import { sumGauge } from "../../src/engine/metrics-text.js";
import { checkReady } from "../../src/boot/readiness.js";
import { advanceBoot, INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { adapterOf, DEFAULT_ENGINE, ENGINE_NAMES, ENGINES, engineApiMethods, type EngineName } from "../../src/engine/registry.js";
import { planDeployment } from "../../src/plan/plan.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { recipeJsonSchema } from "../../src/recipe/schema.js";
import { toy } from "./toy-engine/adapter.js";

// The one line a second engine adds to src/engine/registry.ts, made here for the test alone.
const WITH_TOY = { ...ENGINES, toy };

const cluster = parseCluster("examples/clusters/spark-2x.toml", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;
const practice = resolveRecipe("practice-2x", fileRecipeSource(["recipes"])).recipe;
assert.ok(cluster && practice);
// The practice recipe as a toy recipe: its own served-name flag, none of vLLM's flags.
const toyRecipe = { ...practice, engine: "toy" as string as EngineName, args: ["--alias", "pets", "--threads", "4"] };

test("a second engine is one folder and one registry line: the plan's commands, order, labels and served name are its adapter's", () => {
  const r = planDeployment(toyRecipe, cluster, { engines: WITH_TOY });
  assert.ok(r.ok, JSON.stringify(r));
  const { plan } = r;
  const [head, worker] = plan.nodes;
  assert.ok(head && worker);
  assert.deepEqual(plan.start_order, [head.node, worker.node], "the toy starts its head first");
  assert.equal(plan.served_model, "pets", "served name from the toy's --alias, not vLLM's --served-model-name");
  for (const n of plan.nodes) {
    const argv = n.argv;
    assert.equal(argv[argv.indexOf("--entrypoint") + 1], "toyserve");
    const command = argv.slice(argv.indexOf(practice.docker_image) + 1);
    assert.deepEqual(command.slice(0, 6), ["--weights", practice.model, "--peer", `${plan.master_addr}:${plan.master_port}`, "--rank", String(n.rank)]);
    // Nothing of vLLM's command leaks into another engine's.
    for (const vllmWord of ["--tensor-parallel-size", "--headless", "--nnodes"]) assert.ok(!argv.includes(vllmWord), `${n.node}: ${vllmWord}`);
    const fabricIp: string | undefined = cluster.nodes.find((c) => c.name === n.node)?.fabric_ip;
    assert.ok(fabricIp);
    assert.equal(n.env.TOY_PEER, fabricIp, "the node's env is the toy's, from its own fabric IP");
    assert.equal(n.env.VLLM_HOST_IP, undefined);
    assert.equal(n.labels[LABELS.engine], "toy");
    const decoded = decodeLabels(n.labels);
    assert.ok(decoded.ok);
    assert.equal(decoded.labels.engine, "toy");
    assert.equal(adapterOf(decoded.labels.engine, WITH_TOY), toy, "status and drain find the toy's adapter from the label");
  }
});

test("a recipe whose engine no adapter has is a user error at plan, naming the engine and the known ones", () => {
  const r = planDeployment(toyRecipe, cluster);
  assert.ok(!r.ok);
  assert.match(r.diagnostics[0]?.message ?? "", /no engine "toy"/);
  assert.match(r.diagnostics[0]?.hint ?? "", new RegExp(ENGINE_NAMES.join(", ")));
});

test("the boot log, the blame on timeout and drain's gauge are read through the engine's adapter", () => {
  const read = (lines: readonly string[]): BootState => lines.reduce((s, l) => advanceBoot(toy, s, l), INITIAL_BOOT);
  const head = read(["toy: loading weights", "toy: waiting for peers", "toy: cache holds 4096 tokens"]);
  assert.equal(head.phase, "kv-cache");
  assert.equal(head.figures.kv_tokens, "4096");
  assert.equal(read(["toy: listening"]).ready, true);
  assert.equal(read(["toy: gave up"]).fatal, "toy: gave up");
  const worker = read(["toy: loading weights"]);
  assert.equal(rankBehind(toy, [{ node: "a", rank: 0, state: head }, { node: "b", rank: 1, state: worker }])?.node, "b");
  // Prometheus text: every series of the gauge summed, a longer name with the same start ignored.
  assert.equal(sumGauge('toy_busy{slot="1"} 2\ntoy_busy 3\ntoy_busy_total 9\n# HELP toy_busy x', "toy_busy"), 5);
  assert.equal(sumGauge("other 1", "toy_busy"), undefined);
});

test("the gateway fronts every engine's routes", () => {
  const methods = engineApiMethods(WITH_TOY);
  assert.deepEqual(methods["/v1/toy/poke"], ["PUT"]);
  assert.deepEqual(methods["/v1/chat/completions"], ["POST"]);
  for (const route of Object.keys(ENGINES[DEFAULT_ENGINE].apiMethods)) assert.ok(methods[route], route);
});

test("the recipe schema's engines are the registry's, the default first", () => {
  const schema = recipeJsonSchema() as { properties: { engine: { enum: string[]; default: string } } };
  assert.deepEqual(schema.properties.engine.enum, ENGINE_NAMES);
  assert.equal(schema.properties.engine.default, DEFAULT_ENGINE);
});

test("the engine label: written by the plan, read back, and absent on a container made before it (the default engine)", () => {
  const base: DeploymentLabels = { deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", rank: 0, role: "head", node: "n1", nnodes: 1, cluster: "c", endpoint: "http://n1:8000" };
  const withEngine = decodeLabels(encodeLabels({ ...base, engine: "toy" }));
  assert.ok(withEngine.ok);
  assert.equal(withEngine.labels.engine, "toy");
  const older = decodeLabels(encodeLabels(base));
  assert.ok(older.ok);
  assert.equal(older.labels.engine, undefined);
  assert.equal(adapterOf(older.labels.engine), ENGINES[DEFAULT_ENGINE]);
  assert.equal(adapterOf("an-engine-of-a-newer-launcher"), undefined, "read as unknown, never as the default engine");
});

// One loopback server that answers as the toy engine: readiness and drain must ask its paths.
let server: Server;
let endpoint: string;
const asked: string[] = [];
before(async () => {
  server = createServer((req, res) => {
    asked.push(req.url ?? "");
    if (req.url === "/toy/metrics") res.end('toy_busy{slot="0"} 1\ntoy_busy{slot="1"} 2\n');
    else res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

test("readiness and drain ask the engine's own health and metrics paths", async () => {
  const ready = await checkReady(endpoint, "pets", AbortSignal.timeout(5000), toy.healthPath);
  assert.deepEqual(ready, { ok: false, why: "/toy/alive answered 503" });
  assert.equal(await requestsRunning(endpoint, toy), 3);
  assert.deepEqual(asked, ["/toy/alive", "/toy/metrics"]);
});

// --- The seam's shape, read from the source tree ---

const SRC = "src";
const ENGINE_DIR = path.join(SRC, "engine");
const sources = (readdirSync(SRC, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => path.join(SRC, f));
const importsOf = (file: string): string[] =>
  [...readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => path.normalize(path.join(path.dirname(file), m[1] as string)));
const inside = (file: string, dir: string): boolean => file.startsWith(dir + path.sep);

test("nothing outside src/engine imports an engine's own folder; src/engine imports nothing from src/recipe", () => {
  assert.ok(sources.length > 50, "the source tree was read");
  const problems: string[] = [];
  for (const file of sources) {
    for (const target of importsOf(file)) {
      const engineFolder = inside(target, ENGINE_DIR) && path.dirname(target) !== ENGINE_DIR;
      if (!inside(file, ENGINE_DIR) && engineFolder) problems.push(`${file} imports ${target}: go through src/engine/registry.ts`);
      if (inside(file, ENGINE_DIR) && inside(target, path.join(SRC, "recipe"))) problems.push(`${file} imports ${target}: take an EngineRecipe from the planner`);
    }
  }
  assert.deepEqual(problems, []);
});

test("no code outside src/engine names an engine (comments may)", () => {
  const problems: string[] = [];
  for (const file of sources.filter((f) => !inside(f, ENGINE_DIR))) {
    readFileSync(file, "utf8").split("\n").forEach((line, i) => {
      const code = line.trim();
      if (code.startsWith("//") || code.startsWith("*") || code.startsWith("/*")) return;
      // A name as a word of its own: `"vllm"`, `vllm:metric`; not a part of an image name (vllm/vllm-openai).
      for (const name of ENGINE_NAMES) if (new RegExp(`(?<![\\w/.-])${name}(?![\\w/.-])`).test(code)) problems.push(`${file}:${i + 1}: ${code}`);
    });
  }
  assert.deepEqual(problems, []);
});
