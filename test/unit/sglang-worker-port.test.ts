import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { test } from "node:test";
import { listeningPorts } from "../../src/boot/listening.js";
import { workerPortProblems, type PlanReadings } from "../../src/boot/preflight.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { ENGINES } from "../../src/engine/registry.js";
import { planDeployment } from "../../src/plan/plan.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";

// An SGLang rank above 0 binds the deployment's API port on its node's loopback (its dummy health
// server): preflight checks that port on the worker nodes too, as it checks the head's (issue 31).

const TCP = [
  "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
  "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0",
  "   1: 0500000A:9C40 0900000A:1F41 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0 20 4 30 10 -1",
].join("\n");
const TCP6 = "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0";

test("listeningPorts: the ports in LISTEN of /proc/net/tcp and tcp6, not a connection's", () => {
  assert.deepEqual([...listeningPorts(`${TCP}\n${TCP6}\n`)].sort((a, b) => a - b), [22, 8000]);
  assert.deepEqual([...listeningPorts("garbage\n   0: zz:yy\n")], []);
});

test("listeningPorts reads this machine's own table: a port it listens on is there", async () => {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const port = (server.address() as { port: number }).port;
    assert.ok(listeningPorts(readFileSync("/proc/net/tcp", "utf8")).has(port));
  } finally {
    server.close();
  }
});

test("preflight: a worker node where the API port is taken is a problem for SGLang; a node a replaced or another deployment holds is not judged here", () => {
  assert.equal(ENGINES.sglang.workersBindApiPort, true);
  assert.equal(ENGINES.vllm.workersBindApiPort, undefined);
  const cluster = parseCluster("examples/clusters/spark-2x.toml", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;
  const r = resolveRecipe("s", memorySource({ "recipes/s/recipe.toml": 'engine = "sglang"\nname = "s"\ndocker_image = "img:local"\nmodel = "org/model"\nrequired_nodes = 2\ntensor_parallel_size = 2\n' })).recipe;
  assert.ok(cluster && r);
  const p = planDeployment(r, cluster);
  assert.ok(p.ok);
  const plan = { ...p.plan, api_port: 8000 };
  const [head, worker] = plan.nodes.map((n) => n.node) as [string, string];
  const reading = (tcp: string) => ({ imageId: "sha256:1", containers: [], mounts: { code: 0, stdout: "", stderr: "" }, meminfo: "", tcp: { code: 0, stdout: tcp, stderr: "" } });
  const read = (tcp: string): PlanReadings => ({ nodes: new Map([[head, { node: head, ...reading(TCP) }], [worker, { node: worker, ...reading(tcp) }]]), weights: [] });
  assert.deepEqual(workerPortProblems(plan, read(TCP), new Set(), new Map()), [`${worker}: port 8000 is already in use there, and the engine's rank on it listens on that port too (its health check): free it or pass --port`]);
  assert.deepEqual(workerPortProblems(plan, read(TCP6), new Set(), new Map()), [], "port 22 only");
  assert.deepEqual(workerPortProblems(plan, read(TCP), new Set([worker]), new Map()), [], "freed first by the deployment this one replaces");
  assert.deepEqual(workerPortProblems(plan, read(TCP), new Set(), new Map([["other", new Set([worker])]])), [], "held: said as held");
});
