import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { explainLog } from "../../src/boot/explain.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { detectFabric, parseIp } from "../../src/cluster/detect.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { folderTree, readHcas } from "../../src/cluster/sysfs.js";
import { UserError } from "../../src/config/errors.js";
import { NOT_FABRIC_ADDRESS_PATTERN } from "../../src/contract/pod-start.js";
import type { EngineRecipe, RankContext } from "../../src/engine/adapter.js";
import { advanceBoot, INITIAL_BOOT } from "../../src/engine/boot-log.js";
import { llamacpp } from "../../src/engine/llamacpp/adapter.js";
import { RPC_NOT_REACHED, RPC_WAIT_SECONDS_ENV } from "../../src/engine/llamacpp/at-start.js";
import { expand } from "../../src/export/expansion.js";
import { exportHeader, exportK8s, exportOptions, type K8sChoices, type K8sExportResult } from "../../src/export/k8s.js";
import { lwsProblems } from "../../src/export/lws-schema.js";
import { exportProblems } from "../../src/export/validate.js";
import { apiAddress } from "../../src/plan/api-address.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { planJson } from "../../src/plan/render.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { assertGolden } from "./golden.js";
import { NO_REFERENCE, referenceCheck } from "./lws-reference.js";
import { cliArgs } from "../built-cli.js";

/*
 * llama.cpp over RPC exported with --node-ip-is-fabric (src/engine/llamacpp/at-start.ts): the
 * golden export, its commands against the engine's and plan's, and its start scripts run under
 * sh and bash with stand-ins for rpc-server and llama-server.
 */

const REF = "examples/recipes/llamacpp-qwen3-235b-2x";
const GOLDEN = "test/golden/k8s/example.llamacpp-qwen3-235b-2x.node-ip-is-fabric.spark-2x.yaml";
const CHOICES: K8sChoices = { fabric: { network: "host" }, claims: {}, home: "/home/ai", nodeIpIsFabric: true };

function cluster(): Cluster {
  const file = "examples/clusters/spark-2x.toml";
  const c = parseCluster(file, readFileSync(file, "utf8")).cluster;
  assert.ok(c, file);
  return c;
}

function exported(choices: K8sChoices = CHOICES): { plan: Plan; cluster: Cluster; result: K8sExportResult } {
  const c = cluster();
  const r = resolveRecipe(REF, fileRecipeSource(["recipes"]), { imageFolders: { roots: [], names: [] } });
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  const p = planDeployment(r.recipe, c);
  assert.ok(p.ok, JSON.stringify(p));
  return { plan: p.plan, cluster: c, result: exportK8s(p.plan, llamacpp, exportOptions(p.plan, c, choices), exportHeader(REF, p.plan, llamacpp, undefined)) };
}

type Container = { command: string[]; args: string[]; env: { name: string; value?: string; valueFrom?: unknown }[] };
const containerOf = (result: K8sExportResult, template: "leaderTemplate" | "workerTemplate"): Container => {
  const c = (result.manifest.lws.spec as any).leaderWorkerTemplate[template].spec.containers[0] as Container | undefined;
  assert.ok(c, template);
  return c;
};

test("llama.cpp over RPC with --node-ip-is-fabric exports: golden, valid against launcher's LWS schema and the core types", () => {
  const { result } = exported();
  assert.deepEqual(exportProblems(result.manifest), []);
  assertGolden(GOLDEN, result.yaml);
  const docs = parseAllDocuments(result.yaml).map((d) => d.toJS() as Record<string, unknown>);
  assert.deepEqual(docs, [result.manifest.lws, result.manifest.service], "the YAML reads back as the objects validated");
  assert.deepEqual(lwsProblems(docs[0]), []);
  // The leader names its workers after its own pod, in its own namespace: both from the downward API.
  const env = containerOf(result, "leaderTemplate").env;
  assert.deepEqual(env.find((e) => e.name === "LAUNCHER_POD_NAME")?.valueFrom, { fieldRef: { fieldPath: "metadata.name" } });
  assert.deepEqual(env.find((e) => e.name === "LAUNCHER_POD_NAMESPACE")?.valueFrom, { fieldRef: { fieldPath: "metadata.namespace" } });
});

test("llama.cpp's export with --node-ip-is-fabric, and its golden file, are valid against the published LWS CRD", { skip: NO_REFERENCE }, () => {
  const crd = referenceCheck();
  assert.deepEqual(exportProblems(exported().result.manifest, crd), []);
  const [lws, service] = parseAllDocuments(readFileSync(GOLDEN, "utf8")).map((d) => d.toJS() as Record<string, unknown>);
  assert.ok(lws !== undefined && service !== undefined);
  assert.deepEqual(exportProblems({ lws, service }, crd), []);
});

test("every rank's command, with the LWS and downward-API variables put in, is the engine's for that rank; a worker's is plan's where the pod IP is the node's fabric IP", () => {
  const { plan, cluster: c, result } = exported();
  const head = c.nodes.find((n) => n.name === plan.nodes[0]?.node);
  assert.ok(head);
  const bind = apiAddress(c, head, plan.api_port).bind;
  const pod = { LAUNCHER_POD_NAME: "llamacpp-qwen3-235b-2x-0", LAUNCHER_POD_NAMESPACE: "llm" };
  const planned = planJson(plan) as { nodes: { rank: number; node: string; argv: string[] }[] };
  for (const node of planned.nodes) {
    const fabricIp = c.nodes.find((n) => n.name === node.node)?.fabric_ip;
    assert.ok(fabricIp);
    const ownIp = node.rank === 0 ? bind : fabricIp;
    const vars = { LWS_LEADER_ADDRESS: plan.master_addr, LWS_WORKER_INDEX: String(node.rank), LWS_GROUP_SIZE: String(plan.nodes.length), LAUNCHER_POD_IP: ownIp, ...pod };
    const container = containerOf(result, node.rank === 0 ? "leaderTemplate" : "workerTemplate");
    const argv = [...container.command, ...container.args].map((w) => expand(w, vars));
    assert.deepEqual(argv.slice(0, 2), ["sh", "-c"]);
    const names = plan.nodes.map((n, i) => (node.rank === 0 && i > 0 ? { name: n.node, ip: `${pod.LAUNCHER_POD_NAME}-${i}.llamacpp-qwen3-235b-2x.llm` } : { name: n.node }));
    const ctx: RankContext = { rank: node.rank, nnodes: plan.nodes.length, masterAddr: plan.master_addr, masterPort: plan.master_port, apiPort: plan.api_port, apiHost: bind, nodeIp: ownIp, nodes: names, addressesAtStart: true, nodeAddressIsFabric: true };
    const own = llamacpp.rankCommand(plan.recipe, ctx);
    assert.deepEqual(argv.slice(4), [...(own.entrypoint ?? []), ...own.command], `rank ${node.rank}`);
    const planAfter = node.argv.slice(node.argv.indexOf("--") + 2);
    if (node.rank > 0) {
      // docker run ... --entrypoint /app/rpc-server ... -- IMAGE ARGS: the same process, bound to the same address.
      assert.deepEqual(argv.slice(4), ["/app/rpc-server", ...planAfter], "the worker is launcher's own, on its fabric address");
      continue;
    }
    // The head: bash's wait for each worker by DNS name, then plan's llama-server but for --rpc.
    assert.deepEqual(argv.slice(4, 6), ["bash", "-c"]);
    const endpoints = "llamacpp-qwen3-235b-2x-0-1.llamacpp-qwen3-235b-2x.llm:29501";
    assert.deepEqual(argv.slice(7, 10), ["launcher-rpc-wait", "300", endpoints]);
    const serve = argv.slice(10);
    const rpc = serve.indexOf("--rpc");
    assert.equal(serve[rpc + 1], endpoints);
    const planRpc = planAfter.indexOf("--rpc");
    assert.equal(planAfter[planRpc + 1], "192.168.177.12:29501", "launcher's own boot dials the worker's fabric_ip");
    assert.deepEqual([...serve.slice(1, rpc), ...serve.slice(rpc + 2)], [...planAfter.slice(0, planRpc), ...planAfter.slice(planRpc + 2)]);
  }
});

test("without --node-ip-is-fabric llama.cpp over RPC stays refused, naming the option and its condition; with --network pod the option is refused", () => {
  assert.throws(
    () => exported({ ...CHOICES, nodeIpIsFabric: false }),
    (e: unknown) => e instanceof UserError && /cannot be exported to Kubernetes: llama\.cpp's RPC workers need/.test(e.message) && /--node-ip-is-fabric/.test(e.hint ?? "") && /every node's Kubernetes address is its fabric address \(k3s --node-ip/.test(e.hint ?? ""),
  );
  assert.throws(() => exported({ ...CHOICES, fabric: { network: "pod" } }), (e: unknown) => e instanceof UserError && /^--node-ip-is-fabric: .*--network pod/.test(e.message));
  // vLLM's exports are as before without it: no pod-IP check in their start script.
  assert.doesNotMatch(readFileSync("test/golden/k8s/example.qwen3-32b-2x.spark-2x.yaml", "utf8"), /launcher: pod address/);
});

// --- The start scripts, run ---

const FIXTURE = path.resolve("test/fixtures/spark/two-ports-gid3");

function fixtureIp(): string {
  const ifaces = parseIp(readFileSync(path.join(FIXTURE, "ip-link.txt"), "utf8"), readFileSync(path.join(FIXTURE, "ip-addr.txt"), "utf8"));
  const ip = detectFabric({ name: "n", rank: 0, host: "n", hca: [], gpus: 1 }, readHcas(folderTree(FIXTURE)), ifaces, true).facts.fabric_ip;
  assert.ok(ip);
  return ip;
}

function inDir<T>(body: (dir: string) => T): T {
  const dir = mkdtempSync(path.join(tmpdir(), "k8s-llamacpp-"));
  try {
    return body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function inDirAsync(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "k8s-llamacpp-"));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A stand-in program at dir/name that appends its name and arguments to dir/calls, then runs `then`. */
function standIn(dir: string, name: string, then = ""): string {
  const file = path.join(dir, "bin", name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `#!/bin/sh\nprintf '%s' "${name}" >> "${dir}/calls"\nfor a in "$@"; do printf ' [%s]' "$a" >> "${dir}/calls"; done\necho >> "${dir}/calls"\n${then}`);
  chmodSync(file, 0o755);
  return file;
}

const calls = (dir: string): string[] => (existsSync(path.join(dir, "calls")) ? readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n").filter(Boolean) : []);

/** The worker's container as Kubernetes runs it on a node whose fabric is the fixture's, with the pod IP given. */
function runWorker(podIp: string): { code: number | null; stderr: string; calls: string[] } {
  const container = containerOf(exported().result, "workerTemplate");
  return inDir((dir) => {
    const rpcServer = standIn(dir, "rpc-server");
    const argv = [...container.command, ...container.args].map((w) => expand(w, { LAUNCHER_POD_IP: podIp })).map((w) => (w === "/app/rpc-server" ? rpcServer : w));
    const r = spawnSync(argv[0] as string, argv.slice(1), { env: { PATH: "/usr/bin:/bin", LAUNCHER_SYSFS_ROOT: FIXTURE, LAUNCHER_POD_IP: podIp }, encoding: "utf8", timeout: 10_000 });
    return { code: r.status, stderr: r.stderr, calls: calls(dir) };
  });
}

/** The fixture's two active RoCE v2 ports' addresses, in the order its HCAs list (its ip-addr.txt): detection picks the first. */
const FABRIC_IPS = ["10.10.1.1", "10.10.0.1"];

test("a worker's start runs rpc-server on its pod IP when it is one of its node's fabric addresses", () => {
  assert.equal(fixtureIp(), FABRIC_IPS[0], "the other address counts as much as the one detection picks");
  for (const ip of FABRIC_IPS) {
    const ok = runWorker(ip);
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual(ok.calls, [`rpc-server [--host] [${ip}] [--port] [29501]`]);
  }
});

test("a worker whose pod IP is not its node's fabric address ends before rpc-server runs, with a line explain reads as the boot's fatal cause", () => {
  // The node's LAN (enP7s7 in the fixture), another address, none.
  for (const podIp of ["192.168.1.21", "10.10.0.11", ""]) {
    const r = runWorker(podIp);
    assert.equal(r.code, 1);
    assert.deepEqual(r.calls, [], "rpc-server never runs");
    const line = r.stderr.trim().split("\n").at(-1) ?? "";
    assert.match(line, NOT_FABRIC_ADDRESS_PATTERN);
    assert.ok(line.includes(`(${FABRIC_IPS.join(" ")})`), line);
    assert.equal(advanceBoot(llamacpp, INITIAL_BOOT, line).fatal, line);
    const e = explainLog(llamacpp, r.stderr);
    assert.equal(e.failed, true);
    assert.equal(e.cause, line);
  }
});

const RECIPE = (entry: string): EngineRecipe => ({ model: "/models/m.gguf", docker_image: "i", tensor_parallel_size: 1, pipeline_parallel_size: 3, distributed_backend: "mp", args: [], env: {}, entrypoint: [entry] });
const headCtx = (port: number, hosts: readonly string[]): RankContext => ({
  rank: 0,
  nnodes: hosts.length + 1,
  masterAddr: "lws-0.lws",
  masterPort: port,
  apiPort: 8000,
  apiHost: "10.1.0.5",
  nodeIp: "10.1.0.5",
  nodes: [{ name: "a" }, ...hosts.map((ip, i) => ({ name: `w${i}`, ip }))],
  addressesAtStart: true,
  nodeAddressIsFabric: true,
});

const listen = (port = 0): Promise<Server> =>
  new Promise((resolve, reject) => {
    const s = createServer((c) => c.destroy());
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => resolve(s));
  });
const close = (s: Server): Promise<void> => new Promise((resolve) => s.close(() => resolve()));

/** Runs the head's command (bash, its wait, then the stand-in llama-server) asynchronously. */
function runHead(dir: string, port: number, hosts: readonly string[], seconds: string): { done: Promise<{ code: number | null; stderr: string }> } {
  const server = standIn(dir, "llama-server");
  // A `timeout` that notes each probe, then is coreutils' own: the test sees the head try.
  standIn(dir, "timeout", 'exec /usr/bin/timeout "$@"\n');
  const cmd = llamacpp.rankCommand(RECIPE(server), headCtx(port, hosts));
  assert.deepEqual(cmd.entrypoint, ["bash"]);
  const child = spawn("bash", cmd.command, { env: { PATH: `${dir}/bin:/usr/bin:/bin`, [RPC_WAIT_SECONDS_ENV]: seconds } });
  let stderr = "";
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return { done: new Promise((resolve) => child.on("close", (code) => resolve({ code, stderr }))) };
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(`not seen within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("the head waits until each worker's name resolves and its port accepts, then runs llama-server with --rpc naming them", async () => {
  const probe = await listen();
  const port = (probe.address() as AddressInfo).port;
  await close(probe);
  await inDirAsync(async (dir) => {
    const run = runHead(dir, port, ["localhost", "127.0.0.1"], "30");
    // Two probes of the first worker: the head tried, failed, and tries again rather than going on.
    await until("a second probe of the closed port", () => calls(dir).filter((c) => c.startsWith("timeout") && c.endsWith(`[localhost:${port}]`)).length >= 2);
    assert.ok(!calls(dir).some((c) => c.startsWith("llama-server")), "llama-server waits for its workers");
    const worker = await listen(port);
    try {
      const r = await run.done;
      assert.equal(r.code, 0, r.stderr);
      const served = calls(dir).filter((c) => c.startsWith("llama-server"));
      assert.deepEqual(served, [`llama-server [--model] [/models/m.gguf] [--host] [10.1.0.5] [--port] [8000] [--metrics] [--rpc] [localhost:${port},127.0.0.1:${port}]`]);
      assert.match(r.stderr, /launcher: llama\.cpp RPC workers accept: /);
    } finally {
      await close(worker);
    }
  });
});

test("a worker that never accepts ends the head's wait with a fatal line naming it; llama-server never runs", async () => {
  const worker = await listen();
  const port = (worker.address() as AddressInfo).port;
  try {
    await inDirAsync(async (dir) => {
      // The first accepts; the second's name never resolves.
      const r = await runHead(dir, port, ["127.0.0.1", "no-such-worker.invalid"], "0").done;
      assert.equal(r.code, 1);
      assert.ok(!calls(dir).some((c) => c.startsWith("llama-server")));
      const line = r.stderr.trim().split("\n").at(-1) ?? "";
      assert.ok(line.startsWith(`${RPC_NOT_REACHED} 0 s: no-such-worker.invalid:${port};`), line);
      assert.equal(advanceBoot(llamacpp, INITIAL_BOOT, line).fatal, line);
    });
  } finally {
    await close(worker);
  }
});

// --- The command line ---

const cli = (args: string[]): { code: number | null; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

test("launcher export k8s --node-ip-is-fabric writes the golden export; without it, exit 1 and a hint naming it, no stack", () => {
  const args = ["export", "k8s", REF, "-c", "examples/clusters/spark-2x.toml", "--home", "/home/ai"];
  const on = cli([...args, "--node-ip-is-fabric"]);
  assert.equal(on.code, 0, on.stderr);
  assert.equal(`${on.stdout.trimEnd()}\n`, readFileSync(GOLDEN, "utf8"));
  const off = cli(args);
  assert.equal(off.code, 1);
  assert.match(off.stderr, /^launcher: recipe llamacpp-qwen3-235b-2x: engine llamacpp cannot be exported to Kubernetes/);
  assert.match(off.stderr, /hint: .*pass --node-ip-is-fabric/);
  assert.doesNotMatch(off.stderr, /\n\s+at /);
});
