import assert from "node:assert/strict";
import { test } from "node:test";
import type { Cluster, ClusterNode } from "../../src/cluster/cluster.js";
import { mergeDetected, type FabricFacts } from "../../src/cluster/detect.js";
import { fabricEnv, fabricGaps, FABRIC_ENV_KEYS } from "../../src/cluster/fabric-env.js";
import { ENGINES } from "../../src/engine/registry.js";
import { VLLM_NODE_ENV_KEYS } from "../../src/engine/vllm/node-env.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { UserError } from "../../src/config/errors.js";
import { detectedNote } from "../../src/cli/plan.js";
import { planFromFlags } from "../../src/app/plan-flags.js";
import { localRecipes } from "../../src/app/this-process.js";
import type { Output } from "../../src/app/output.js";

const spark = (name: string, extra: Partial<ClusterNode> = {}): ClusterNode => ({
  name,
  rank: 0,
  host: name,
  gpus: 1,
  fabric_ip: "192.168.177.11",
  fabric_iface: "enp1s0f1np1",
  hca: ["rocep1s0f1"],
  gid_index: 3,
  ...extra,
});

const cluster = (text: string): Cluster => {
  const parsed = parseCluster("c.toml", text);
  assert.ok(parsed.cluster, JSON.stringify(parsed.diagnostics));
  return parsed.cluster;
};

function capture(): Output & { errors: string[] } {
  const errors: string[] = [];
  return { errors, out: () => undefined, err: (t) => errors.push(t), warn: (t) => errors.push(`warning: ${t}`), json: () => undefined, diagnostics: () => undefined };
}

test("fabric env: only what NCCL, Gloo and UCX read; nothing for TensorPipe, MPI or a script; no engine's own address", () => {
  const env = fabricEnv(spark("s1"));
  assert.deepEqual(Object.keys(env).sort(), ["GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES"]);
  for (const unread of ["TP_SOCKET_IFNAME", "MN_IF_NAME", "OMPI_MCA_btl_tcp_if_include"]) {
    assert.equal(env[unread], undefined, unread);
    assert.ok(!VLLM_NODE_ENV_KEYS.includes(unread), `${unread} is no longer launcher's: a recipe may set it`);
  }
});

test("vLLM's node env: the fabric env, its own address VLLM_HOST_IP, and Ray's address only with the Ray backend; every key managed", () => {
  const mp = ENGINES.vllm.nodeEnv({ distributed_backend: "mp" }, spark("s1"));
  assert.deepEqual(mp, { ...fabricEnv(spark("s1")), VLLM_HOST_IP: "192.168.177.11" });
  const ray = ENGINES.vllm.nodeEnv({ distributed_backend: "ray" }, spark("s1"));
  assert.deepEqual(ray, { ...mp, RAY_NODE_IP_ADDRESS: "192.168.177.11", RAY_OVERRIDE_NODE_IP_ADDRESS: "192.168.177.11" });
  const { fabric_ip: _ip, ...noIp } = spark("s1");
  assert.equal(ENGINES.vllm.nodeEnv({ distributed_backend: "ray" }, noIp).VLLM_HOST_IP, undefined);
  for (const key of [...FABRIC_ENV_KEYS, ...Object.keys(ray)]) assert.ok(ENGINES.vllm.managedEnv.includes(key), key);
});

test("UCX_NET_DEVICES names the RDMA device ports, never the netdev (a netdev confines UCX to TCP)", () => {
  assert.equal(fabricEnv(spark("s1", { hca: ["rocep1s0f0", "roceP2p1s0f1"] })).UCX_NET_DEVICES, "rocep1s0f0:1,roceP2p1s0f1:1");
  assert.equal(fabricEnv(spark("s1", { hca: ["mlx5_0:2"] })).UCX_NET_DEVICES, "mlx5_0:2", "a port given in the cluster file stays");
  const noRdma = fabricEnv(spark("s1", { hca: [] }));
  assert.equal(noRdma.UCX_NET_DEVICES, undefined, "without HCAs UCX keeps its own choice");
  assert.equal(noRdma.NCCL_SOCKET_IFNAME, "enp1s0f1np1");
});

test("fabric gaps: a multi-node plan's node without fabric IP or interface; one node alone needs none", () => {
  const bare = spark("s2", { rank: 1 });
  const { fabric_ip: _ip, fabric_iface: _if, ...noFabric } = bare;
  assert.deepEqual(fabricGaps([spark("s1"), noFabric]), [{ node: "s2", missing: ["fabric_ip", "fabric_iface"] }]);
  const { fabric_iface: _only, ...noIface } = bare;
  assert.deepEqual(fabricGaps([spark("s1"), noIface]), [{ node: "s2", missing: ["fabric_iface"] }]);
  assert.deepEqual(fabricGaps([noFabric]), []);
  assert.deepEqual(fabricGaps([spark("s1"), bare]), []);
});

const TWO_BARE = `name = "c"\n[[nodes]]\nname = "a1"\nhost = "a1"\nuser = "u"\nfabric_ip = "10.0.0.1"\nfabric_iface = "eth1"\n[[nodes]]\nname = "a2"\nhost = "a2"\nuser = "u"\n`;

test("plan warns about a node without fabric values, naming it and launcher doctor; up refuses", () => {
  const c = cluster(TWO_BARE);
  const io = capture();
  const plan = planFromFlags("practice-2x", {}, io, c, "warn", localRecipes());
  assert.equal(plan.nodes.length, 2);
  assert.equal(io.errors.length, 1, io.errors.join("\n"));
  assert.match(io.errors[0] ?? "", /warning: node a2 has no fabric IP or fabric interface/);
  assert.match(io.errors[0] ?? "", /launcher doctor --cluster c\.toml/);
  assert.throws(
    () => planFromFlags("practice-2x", {}, capture(), c, "error", localRecipes()),
    (e: unknown) => e instanceof UserError && /node a2 has no fabric IP/.test(e.message) && /launcher doctor/.test(e.hint ?? ""),
  );
  // up's first plan, made before the probe only to find recipe errors, says nothing.
  const quiet = capture();
  planFromFlags("practice-2x", {}, quiet, c, "ignore", localRecipes());
  assert.deepEqual(quiet.errors, []);
});

test("plan says detected only for values really taken from detection", () => {
  const facts: FabricFacts = { fabric_ip: "10.0.0.2", fabric_iface: "eth1", hca: [], gid_index: 3, ports_up: 2, mtu: 9000 };
  // a1 gives everything itself: nothing of it is detected, whatever the store holds.
  const full = `name = "c"\n[[nodes]]\nname = "a1"\nhost = "a1"\nuser = "u"\nfabric_ip = "10.0.0.1"\nfabric_iface = "eth1"\ngid_index = 4\nhca = ["mlx5_0"]\n`;
  const merged = mergeDetected(cluster(`${full}[[nodes]]\nname = "a2"\nhost = "a2"\nuser = "u"\n`), new Map([["a1", facts], ["a2", facts]]));
  assert.equal(merged.detected.get("a1"), undefined);
  assert.deepEqual(merged.detected.get("a2"), [
    { field: "fabric_ip", value: "10.0.0.2" },
    { field: "fabric_iface", value: "eth1" },
    { field: "gid_index", value: "3" },
  ]);
  const io = capture();
  const plan = planFromFlags("practice-2x", {}, io, merged.cluster, "warn", localRecipes());
  assert.deepEqual(io.errors, [], "every node has its fabric now");
  assert.deepEqual(detectedNote(plan, merged.detected), ["a2: fabric_ip 10.0.0.2, fabric_iface eth1, gid_index 3"]);
  const onlyFile = mergeDetected(cluster(full), new Map([["a1", facts]]));
  assert.equal(onlyFile.detected.size, 0, "a stored detection that filled nothing is not mentioned");
});
