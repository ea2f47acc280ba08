import assert from "node:assert/strict";
import { test } from "node:test";
import { fabricIpProblems } from "../../src/boot/fabric-holds.js";
import { detectFabric } from "../../src/cluster/detect.js";

// A llama.cpp worker's rpc-server binds its node's fabric_ip, where its head dials it: preflight
// makes doctor's check that an interface of the node holds that address.

const ok = (stdout: string) => ({ code: 0, stdout, stderr: "" });
const LINKS = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\n2: enp1s0f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP\n";
const ADDRS = "1: lo    inet 127.0.0.1/8 scope host lo\n2: enp1s0f0np0    inet 10.0.0.2/24 brd 10.0.0.255 scope global enp1s0f0np0\n";
const CLUSTER = [{ name: "n1", fabric_ip: "10.0.0.1" }, { name: "n2", fabric_ip: "10.0.0.2" }, { name: "n3", fabric_ip: "10.0.0.3" }];

test("a worker none of whose interfaces holds its fabric_ip is a preflight problem naming the node and the cluster file's field", () => {
  const read = (node: string) => (node === "n2" || node === "n3" ? { links: ok(LINKS), addrs: ok(ADDRS) } : undefined);
  assert.deepEqual(fabricIpProblems(["n2"], CLUSTER, read), [], "n2 holds 10.0.0.2");
  const problems = fabricIpProblems(["n2", "n3"], CLUSTER, read);
  assert.equal(problems.length, 1);
  assert.match(problems[0] ?? "", /^n3: no interface holds the fabric IP 10\.0\.0\.3, which its worker listens on and its head dials: set the address on the fabric port, or fix fabric_ip for n3 in the cluster file$/);
});

test("a node whose `ip` gave nothing usable, or that was not read, is not judged", () => {
  const failed = { code: 127, stdout: "", stderr: "sh: ip: not found" };
  assert.deepEqual(fabricIpProblems(["n3"], CLUSTER, () => ({ links: failed, addrs: failed })), []);
  assert.deepEqual(fabricIpProblems(["n3"], CLUSTER, () => ({ links: ok(""), addrs: ok("") })), []);
  assert.deepEqual(fabricIpProblems(["n3"], CLUSTER, () => undefined), []);
});

test("the same check as doctor's: its finding's words", () => {
  const { findings } = detectFabric({ name: "n3", fabric_ip: "10.0.0.3", hca: [] } as never, [], [{ name: "enp1s0f0np0", mtu: 9000, up: true, ipv4: ["10.0.0.2/24"] }], false);
  assert.ok(findings.some((f) => f.message === "no interface holds the fabric IP 10.0.0.3" && f.fix === "set the address on the fabric port, or fix fabric_ip for n3 in the cluster file"), JSON.stringify(findings));
});
