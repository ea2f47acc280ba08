import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { apiAddress } from "../../src/plan/api-address.js";
import { SshDocker } from "../../src/remote/docker.js";
import { recordingTransport } from "../support/docker-parts.js";
import { BASE, memorySource } from "../support/memory-source.js";

// Issue 24: the head's engine listens only where launcher reaches it, a recipe cannot open vLLM's
// unauthenticated admin routes without saying so, and no key or env value is on a command line.

const NODES = `[[nodes]]\nname = "a1"\nhost = "h1"\naddress = "10.0.0.11"\nfabric_ip = "10.9.0.1"\nfabric_iface = "eth1"\n[[nodes]]\nname = "a2"\nhost = "h2"\nfabric_ip = "10.9.0.2"\nfabric_iface = "eth1"\n`;

function clusterOf(top = ""): Cluster {
  const parsed = parseCluster("c.toml", `${top}${NODES}`);
  assert.ok(parsed.cluster, parsed.diagnostics.map(formatDiagnostic).join("\n"));
  return parsed.cluster;
}

function planOf(recipeText: string, cluster: Cluster = clusterOf()): Plan {
  const r = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": recipeText }));
  assert.ok(r.recipe, r.diagnostics.map(formatDiagnostic).join("\n"));
  const p = planDeployment(r.recipe, cluster);
  assert.ok(p.ok, p.ok ? "" : p.diagnostics.map(formatDiagnostic).join("\n"));
  return p.plan;
}

const hostFlag = (argv: readonly string[]): string | undefined => argv[argv.indexOf("--host") + 1];
const recipeErrors = (text: string, files: Record<string, string> = {}): string[] =>
  resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": text, ...files })).diagnostics.map(formatDiagnostic);

test("the head's engine binds to the address launcher reaches it at; workers serve no HTTP", () => {
  const plan = planOf(BASE);
  const [head, worker] = [plan.nodes.find((n) => n.role === "head"), plan.nodes.find((n) => n.role === "worker")];
  assert.equal(hostFlag(head?.argv ?? []), "10.0.0.11");
  assert.equal(plan.endpoint, "http://10.0.0.11:8000");
  assert.equal(head?.labels["launcher.endpoint"], "http://10.0.0.11:8000");
  assert.ok(!(worker?.argv ?? []).includes("--host"), "a headless worker gets no --host");
  assert.ok(!plan.nodes.some((n) => n.argv.includes("0.0.0.0")));
});

test("api_bind: each choice gives the bind address and the endpoint from one function", () => {
  const head = { name: "a1", rank: 0, host: "h1", hca: [], gpus: 1 };
  const table: [string | undefined, Partial<typeof head> & { address?: string; address_ip?: string }, string, string][] = [
    [undefined, { address: "10.0.0.11" }, "10.0.0.11", "http://10.0.0.11:8000"],
    // A name binds to what this machine resolves it to, not to what the head's own /etc/hosts says.
    [undefined, { address: "spark1.lan", address_ip: "192.168.1.11" }, "192.168.1.11", "http://spark1.lan:8000"],
    [undefined, {}, "h1", "http://h1:8000"],
    ["management", { address: "[fd00::11]" }, "fd00::11", "http://[fd00::11]:8000"],
    ["loopback", { address: "10.0.0.11" }, "127.0.0.1", "http://127.0.0.1:8000"],
    ["any", { address: "10.0.0.11" }, "0.0.0.0", "http://10.0.0.11:8000"],
    ["10.0.0.99", { address: "10.0.0.11" }, "10.0.0.99", "http://10.0.0.99:8000"],
    ["fd00::99", {}, "fd00::99", "http://[fd00::99]:8000"],
  ];
  for (const [bind, node, want, endpoint] of table) {
    const got = apiAddress(bind === undefined ? {} : { api_bind: bind }, { ...head, ...node }, 8000);
    assert.deepEqual(got, { bind: want, endpoint }, `api_bind ${String(bind)} with ${JSON.stringify(node)}`);
  }
  const plan = planOf(BASE, clusterOf('api_bind = "loopback"\n'));
  assert.equal(hostFlag(plan.nodes[0]?.argv ?? []), "127.0.0.1");
  assert.equal(plan.endpoint, "http://127.0.0.1:8000");
});

test("api_bind in the cluster file: a wrong value is an error at its line, \"any\" a warning there", () => {
  const bad = parseCluster("c.toml", `name = "c"\napi_bind = "everywhere"\n${NODES}`);
  assert.equal(bad.cluster, undefined);
  assert.match(bad.diagnostics.map(formatDiagnostic).join("\n"), /^c\.toml:2:\d+: error: api_bind "everywhere" is not "management", "loopback", "any" nor an IP address/m);
  const any = parseCluster("c.toml", `name = "c"\napi_bind = "any"\n${NODES}`);
  assert.ok(any.cluster);
  assert.match(any.diagnostics.map(formatDiagnostic).join("\n"), /^c\.toml:2:\d+: warning: api_bind = "any": the head's engine listens on every address/m);
});

test("an env switch that opens vLLM's admin routes is refused at its line, unless the recipe opts in (then a warning)", () => {
  const errors = recipeErrors(`${BASE}VLLM_SERVER_DEV_MODE = "1"\n`);
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /^recipes\/r\/recipe\.toml:18:\d+: error: env VLLM_SERVER_DEV_MODE opens vLLM's development routes .*with no key/);
  assert.match(errors[0] ?? "", /unsafe_dev_routes = true/);
  for (const key of ["VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_TORCH_PROFILER_DIR"]) {
    assert.match(recipeErrors(`${BASE}${key} = "1"\n`).join("\n"), new RegExp(`error: env ${key} opens`));
  }
  // The opt-in sits at the top of the file (a TOML key after [env] would be an env variable).
  const optedIn = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": `unsafe_dev_routes = true\n${BASE}VLLM_SERVER_DEV_MODE = "1"\n` }));
  assert.ok(optedIn.recipe, optedIn.diagnostics.map(formatDiagnostic).join("\n"));
  assert.match(optedIn.diagnostics.map(formatDiagnostic).join("\n"), /recipe\.toml:19:\d+: warning: env VLLM_SERVER_DEV_MODE opens/);
  // A switch inherited from a parent is refused at the parent's line; the variant may opt in.
  const parent = { "recipes/p/recipe.toml": `${BASE}VLLM_SERVER_DEV_MODE = "1"\n` };
  assert.match(recipeErrors(`extends = "p"\nname = "child"\n`, parent).join("\n"), /^recipes\/p\/recipe\.toml:18:\d+: error: env VLLM_SERVER_DEV_MODE/m);
});

test("the engine's key leaves the command line for its env: --api-key K, --api-key=K, and the flag wins over VLLM_API_KEY", () => {
  for (const written of ['"--api-key", "sk-flag-1"', '"--api-key=sk-flag-1"']) {
    const plan = planOf(BASE.replace(`"--enable-prefix-caching",`, `"--enable-prefix-caching", ${written},`).replace("[env]\n", '[env]\nVLLM_API_KEY = "sk-env-2"\n'));
    assert.equal(plan.api_key, "sk-flag-1");
    for (const n of plan.nodes) {
      assert.ok(!n.argv.some((a) => a.includes("sk-flag-1") || a.includes("sk-env-2") || a.startsWith("--api-key")), `${n.node}: ${n.argv.join(" ")}`);
      // Only the rank that serves the API gets the key, and the recipe's env key leaves the workers too.
      assert.equal(n.env.VLLM_API_KEY, n.rank === 0 ? "sk-flag-1" : undefined);
    }
    // Still served under the name the args give: only the key's words left.
    assert.equal(plan.served_model, "served");
    assert.ok(plan.nodes[0]?.argv.includes("--enable-prefix-caching"));
  }
  const two = recipeErrors(BASE.replace(`"--enable-prefix-caching",`, `"--enable-prefix-caching", "--api-key", "k1", "k2",`));
  assert.match(two.join("\n"), /recipe\.toml:\d+:\d+: error: --api-key gives 2 keys: launcher passes the engine its key in VLLM_API_KEY, which holds one/);
});

test("no env value is on docker run's command line: --env-file /dev/stdin, and SshDocker.run writes the env file to stdin", async () => {
  const plan = planOf(BASE.replace("[env]\n", '[env]\nSECRET_TOKEN = "hunter2-secret"\n'));
  for (const n of plan.nodes) {
    assert.ok(!n.argv.includes("--env"), `${n.node}: ${n.argv.join(" ")}`);
    assert.ok(!n.argv.some((a) => a.includes("hunter2-secret")));
    assert.equal(n.argv[n.argv.indexOf("--env-file") + 1], "/dev/stdin");
    assert.ok(n.argv.indexOf("--env-file") < n.argv.indexOf("--"), "an option of docker run, before the image");
  }
  const { transport, calls } = recordingTransport("a1");
  const head = plan.nodes[0];
  assert.ok(head);
  assert.equal(await new SshDocker(transport).run(head.argv, head.env), "cid");
  assert.deepEqual(calls[0]?.argv, head.argv);
  assert.equal(calls[0]?.options?.stdin, Object.entries(head.env).map(([k, v]) => `${k}=${v}\n`).join(""));
  assert.match(calls[0]?.options?.stdin ?? "", /^SECRET_TOKEN=hunter2-secret$/m);
});

test("an env value docker's env file cannot carry is an error at its line", () => {
  const errors = recipeErrors(`${BASE}TWO_LINES = """a\nb"""\n`);
  assert.match(errors.join("\n"), /^recipes\/r\/recipe\.toml:18:\d+: error: env TWO_LINES: it holds a line break/m);
});

test("plan shows the env it sends on stdin, with the key redacted in text and JSON", () => {
  const plan = planOf(BASE.replace(`"--enable-prefix-caching",`, `"--enable-prefix-caching", "--api-key", "sk-flag-1",`));
  const text = planText(plan);
  assert.ok(!text.includes("sk-flag-1"));
  assert.match(text, /--env-file \/dev\/stdin/);
  assert.match(text, /^VLLM_API_KEY=<redacted>$/m);
  const json = JSON.stringify(planJson(plan));
  assert.ok(!json.includes("sk-flag-1"));
  assert.match(json, /"VLLM_API_KEY":"<redacted>"/);
});
