import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { crossNodeFindings, detectFabric, parseIp, withDetected, type FabricFacts } from "../../src/cluster/detect.js";
import { fabricEnv } from "../../src/cluster/fabric-env.js";
import { dumpTree, folderTree, gidIpv4, readHcas, SYSFS_DUMP_SCRIPT } from "../../src/cluster/sysfs.js";
import { parseCluster } from "../../src/cluster/parse.js";

// Fixture trees laid out like real DGX Sparks' /sys (ConnectX-7: four RoCE functions).
const FIXTURES = path.resolve("test/fixtures/spark");
const fixture = (name: string) => path.join(FIXTURES, name);
const bare = (name: string): ClusterNode => ({ name, rank: 0, host: name, hca: [], gpus: 1 });

function facts(name: string, node = bare(name)) {
  const root = fixture(name);
  const ifaces = parseIp(readFileSync(path.join(root, "ip-link.txt"), "utf8"), readFileSync(path.join(root, "ip-addr.txt"), "utf8"));
  return detectFabric(node, readHcas(folderTree(root)), ifaces, true);
}

test("GIDs: the IPv4-mapped form sysfs writes", () => {
  assert.equal(gidIpv4("0000:0000:0000:0000:0000:ffff:0a0a:0001"), "10.10.0.1");
  assert.equal(gidIpv4("fe80:0000:0000:0000:4cbb:47ff:fe00:1234"), undefined);
});

test("two ports up, RoCE v2 at GID index 3: HCAs, netdevs, fabric IP and MTU", () => {
  const hcas = readHcas(folderTree(fixture("two-ports-gid3")));
  assert.deepEqual(hcas.map((h) => [h.name, h.netdevs, h.ports.map((p) => p.active)]), [
    ["roceP2p1s0f0", ["enP2p1s0f0np0"], [false]],
    ["roceP2p1s0f1", ["enP2p1s0f1np1"], [true]],
    ["rocep1s0f0", ["enp1s0f0np0"], [false]],
    ["rocep1s0f1", ["enp1s0f1np1"], [true]],
  ]);
  const { facts: f, findings } = facts("two-ports-gid3");
  assert.deepEqual(f, { fabric_iface: "enP2p1s0f1np1", fabric_ip: "10.10.1.1", mtu: 9000, hca: ["roceP2p1s0f1", "rocep1s0f1"], gid_index: 3, ports_up: 2 });
  assert.deepEqual(findings, []);
});

test("four ports up, an IPv6 GID first: index 4, and the four-port NCCL settings", () => {
  const { facts: f, findings } = facts("four-ports-gid4", { ...bare("s2"), fabric_ip: "10.10.0.2" });
  assert.equal(f.gid_index, 4);
  assert.equal(f.fabric_iface, "enp1s0f1np1", "the interface holding the cluster file's fabric IP");
  assert.equal(f.ports_up, 4);
  assert.deepEqual(findings, []);
  const env = fabricEnv({ ...bare("s2"), ...f, hca: f.hca, ports_up: f.ports_up });
  assert.equal(env.NCCL_IB_GID_INDEX, "4");
  assert.equal(env.NCCL_IB_SUBNET_AWARE_ROUTING, "1");
  assert.equal(env.NCCL_IB_MERGE_NICS, "0");
  assert.equal(env.NCCL_NET_PLUGIN, "none");
  assert.equal(fabricEnv({ ...bare("s1"), ports_up: 2 }).NCCL_NET_PLUGIN, undefined);
});

test("the dump script run over a tree reads the same as the folder itself", () => {
  for (const name of ["two-ports-gid3", "four-ports-gid4"]) {
    const r = spawnSync("sh", ["-c", SYSFS_DUMP_SCRIPT, "sh", fixture(name)], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(readHcas(dumpTree(r.stdout)), readHcas(folderTree(fixture(name))), name);
  }
  assert.deepEqual(readHcas(dumpTree("")), [], "a node without /sys/class/infiniband");
});

test("breaking findings: two interfaces on one subnet; MTU mismatch between nodes; no HCA on a GPU node", () => {
  const { facts: f, findings } = facts("same-subnet-mtu1500", { ...bare("s3"), fabric_ip: "10.10.0.3" });
  assert.equal(findings.length, 1);
  assert.match(findings[0]?.message ?? "", /interfaces enp1s0f1np1 and enP2p1s0f1np1 are both on subnet 10\.10\.0\.0\/24/);
  const all = new Map<string, FabricFacts>([["s1", facts("two-ports-gid3").facts], ["s2", facts("four-ports-gid4").facts], ["s3", f]]);
  const mtu = crossNodeFindings(all);
  assert.deepEqual(mtu.map((x) => [x.node, x.severity]), [["s3", "error"]]);
  assert.match(mtu[0]?.message ?? "", /fabric MTU 1500 differs from the other nodes' 9000/);
  const none = detectFabric(bare("g"), [], [], true);
  assert.equal(none.findings[0]?.severity, "error");
  assert.equal(detectFabric(bare("p"), [], [], false).findings[0]?.severity, "warning", "no GPU (a practice host): only a warning");
});

test("detected values fill what the cluster file leaves out; the file always wins; each node keeps its own", () => {
  const parsed = parseCluster("c.toml", `name = "c"\n[[nodes]]\nname = "s1"\nhost = "s1"\n[[nodes]]\nname = "s2"\nhost = "s2"\ngid_index = 7\nfabric_iface = "enp1s0f0np0"\n`);
  assert.ok(parsed.cluster);
  const detected = new Map<string, FabricFacts>([["s1", facts("two-ports-gid3").facts], ["s2", facts("four-ports-gid4").facts]]);
  const c = withDetected(parsed.cluster, detected);
  const [s1, s2] = c.nodes;
  assert.equal(s1?.gid_index, 3);
  assert.equal(s1?.fabric_ip, "10.10.1.1");
  assert.equal(s2?.gid_index, 7, "the cluster file wins");
  assert.equal(s2?.fabric_iface, "enp1s0f0np0");
  assert.deepEqual(s2?.hca, ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]);
  assert.notDeepEqual(s1?.hca, s2?.hca, "never the head's values on a worker");
});

test("a probe's output: GPUs, a busy GPU and an unreachable peer are findings with the fix", async () => {
  const { readProbe } = await import("../../src/nodes/doctor.js");
  const root = fixture("two-ports-gid3");
  const sysfs = spawnSync("sh", ["-c", SYSFS_DUMP_SCRIPT, "sh", root], { encoding: "utf8" }).stdout;
  const text = [
    "@@sysfs", sysfs,
    "@@ip-link", readFileSync(path.join(root, "ip-link.txt"), "utf8"),
    "@@ip-addr", readFileSync(path.join(root, "ip-addr.txt"), "utf8"),
    "@@docker", "28.2.2", "/var/lib/docker", "/dev/nvme0n1p2 3800000000 1200000000 2600000000 32% /",
    "@@gpu", "NVIDIA GB10, 124000 MiB",
    "@@gpu-apps", "4242, python3, 98000 MiB",
    "@@hf", "nas:/ai 9000000000 1000000000 8000000000 12% /mnt/nas",
    "@@peers", "10.10.0.2 0", "10.10.0.3 1",
  ].join("\n");
  const p = readProbe(bare("s1"), "/mnt/nas/ai/huggingface", text);
  assert.deepEqual(p.gpus, [{ name: "NVIDIA GB10", memory: "124000 MiB" }]);
  assert.deepEqual(p.docker, { version: "28.2.2", root: "/var/lib/docker", free_gib: 2479.6 });
  assert.equal(p.hf_cache.free_gib, 7629.4);
  assert.deepEqual(p.peers, { "10.10.0.2": true, "10.10.0.3": false });
  assert.equal(p.facts.gid_index, 3);
  assert.deepEqual(p.findings.map((f) => f.message), ["the GPU is busy: 4242, python3, 98000 MiB", "cannot reach peer fabric IP 10.10.0.3"]);
  assert.ok(p.findings.every((f) => f.severity === "error" && f.fix.length > 0));
});
