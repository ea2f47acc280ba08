import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { detectFabric, parseIp } from "../../src/cluster/detect.js";
import { folderTree, readHcas } from "../../src/cluster/sysfs.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import type { EngineAdapter } from "../../src/engine/adapter.js";
import { FACT_VARS, fabricStartScript, START_SCRIPT_NAME } from "../../src/export/fabric-start.js";

// The start script of `launcher export k8s` against the Spark fixture trees doctor's detection is
// tested on (test/unit/fabric.test.ts): the env it exports is the adapter's nodeEnv of the facts
// detectFabric finds there.

const FIXTURES = path.resolve("test/fixtures/spark");
const FIXTURE_NAMES = ["two-ports-gid3", "four-ports-gid4", "same-subnet-mtu1500"];
const bare = (name: string): ClusterNode => ({ name, rank: 0, host: name, hca: [], gpus: 1 });

function doctorFacts(fixture: string, node: ClusterNode) {
  const root = path.join(FIXTURES, fixture);
  const ifaces = parseIp(readFileSync(path.join(root, "ip-link.txt"), "utf8"), readFileSync(path.join(root, "ip-addr.txt"), "utf8"));
  return detectFabric(node, readHcas(folderTree(root)), ifaces, true).facts;
}

/** The script run over a fixture tree (a name under FIXTURES, or a folder) with `preset` as the template's env. */
function runScript(script: string, fixture: string, preset: Record<string, string> = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LAUNCHER_FABRIC_") && !/^(NCCL|GLOO|UCX|VLLM|RAY)_/.test(k)));
  return spawnSync("sh", ["-c", script, START_SCRIPT_NAME, "env"], { encoding: "utf8", env: { ...clean, ...preset, LAUNCHER_SYSFS_ROOT: path.resolve(FIXTURES, fixture) } });
}

/** The env the script hands the command, run over a fixture tree with `preset` as the template's env. */
function scriptEnv(script: string, fixture: string, preset: Record<string, string> = {}): Record<string, string> {
  const r = runScript(script, fixture, preset);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^launcher: fabric detected: /m);
  return Object.fromEntries(r.stdout.split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
}

const managed = (engine: EngineAdapter, env: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(env).filter(([k]) => engine.managedEnv.includes(k)).sort(([a], [b]) => a.localeCompare(b)));

for (const backend of ["mp", "ray"] as const) {
  for (const fixture of FIXTURE_NAMES) {
    test(`start script (${backend}) on ${fixture}: the env nodeEnv gives detectFabric's facts`, () => {
      const facts = doctorFacts(fixture, bare("n"));
      const expected = vllm.nodeEnv({ distributed_backend: backend }, { ...bare("n"), ...facts, hca: facts.hca, ports_up: facts.ports_up });
      const got = scriptEnv(fabricStartScript(vllm, { distributed_backend: backend }), fixture);
      assert.deepEqual(managed(vllm, got), managed(vllm, expected));
    });
  }
}

test("start script: the cluster file's shared values win, detection fills the rest (as detectFabric)", () => {
  const node = { ...bare("n"), fabric_iface: "enp1s0f1np1", hca: ["rocep1s0f1"] };
  const facts = doctorFacts("two-ports-gid3", node);
  const expected = vllm.nodeEnv({ distributed_backend: "mp" }, { ...node, ...facts, hca: facts.hca, ports_up: facts.ports_up });
  const got = scriptEnv(fabricStartScript(vllm, { distributed_backend: "mp" }), "two-ports-gid3", { [FACT_VARS.iface]: "enp1s0f1np1", [FACT_VARS.hcas]: "rocep1s0f1" });
  assert.deepEqual(managed(vllm, got), managed(vllm, expected));
  assert.equal(got.NCCL_IB_HCA, "rocep1s0f1");
  assert.equal(got.UCX_NET_DEVICES, "rocep1s0f1:1");
});

test("start script: a node without RoCE exports no fabric env, and still runs the command", () => {
  const got = scriptEnv(fabricStartScript(vllm, { distributed_backend: "mp" }), "no-such-fixture");
  assert.deepEqual(managed(vllm, got), {});
});

test("start script: an env the script cannot build per HCA is launcher's bug, said at export", () => {
  const odd = { name: "odd", nodeEnv: (_r: unknown, n: ClusterNode) => (n.hca.length > 0 ? { ODD_HCAS: n.hca.join(" ") } : {}) } as unknown as EngineAdapter;
  assert.throws(() => fabricStartScript(odd, { distributed_backend: "mp" }), /ODD_HCAS is not one value per HCA/);
});

test("the start script as the export writes it, once Kubernetes has expanded it, detects as the script itself", async () => {
  const { expand } = await import("../../src/export/expansion.js");
  const { escapeExpansion } = await import("../../src/export/expansion.js");
  const script = fabricStartScript(vllm, { distributed_backend: "mp" });
  const written = escapeExpansion(script);
  assert.notEqual(written, script, "the script holds $( and $$ that Kubernetes would read");
  const asRun = expand(written, { HOME: "/root", i: "9", ip: "1.2.3.4", r: "x", v: "y" });
  assert.equal(asRun, script);
  assert.deepEqual(scriptEnv(asRun, "four-ports-gid4"), scriptEnv(script, "four-ports-gid4"));
});

/** Every interface an active HCA's device/net holds in a fixture, with the fixture. */
const HELD = FIXTURE_NAMES.flatMap((fixture) => readHcas(folderTree(path.join(FIXTURES, fixture))).filter((h) => h.ports.some((p) => p.active)).flatMap((h) => h.netdevs.map((iface) => [fixture, iface] as const)));

test("the interface known, the address is that interface's: detectFabric and the start script agree on every fixture", () => {
  assert.ok(HELD.length >= 4, "the fixtures hold interfaces on active HCAs");
  for (const [fixture, iface] of HELD) {
    const root = path.join(FIXTURES, fixture);
    const own = parseIp(readFileSync(path.join(root, "ip-link.txt"), "utf8"), readFileSync(path.join(root, "ip-addr.txt"), "utf8")).find((i) => i.name === iface)?.ipv4[0]?.split("/")[0];
    const facts = doctorFacts(fixture, { ...bare("n"), fabric_iface: iface });
    assert.equal(facts.fabric_ip, own, `${fixture} ${iface}: doctor`);
    const got = scriptEnv(fabricStartScript(vllm, { distributed_backend: "mp" }), fixture, { [FACT_VARS.iface]: iface });
    assert.equal(got.NCCL_SOCKET_IFNAME, iface, `${fixture} ${iface}`);
    assert.equal(got.VLLM_HOST_IP, own, `${fixture} ${iface}: the script`);
  }
  // The case the review met: roceP2p1s0f1 sorts before rocep1s0f1, whose interface is named.
  const got = scriptEnv(fabricStartScript(vllm, { distributed_backend: "ray" }), "two-ports-gid3", { [FACT_VARS.iface]: "enp1s0f1np1" });
  assert.deepEqual([got.NCCL_SOCKET_IFNAME, got.VLLM_HOST_IP, got.RAY_NODE_IP_ADDRESS], ["enp1s0f1np1", "10.10.0.1", "10.10.0.1"]);
});

/** A copy of a fixture as a pod on the pod network sees it: its own interfaces, and which GIDs they gave. */
function podTree(fixture: string, own: readonly string[], gids: Readonly<Record<string, string>> = {}): string {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-pod-sysfs-"));
  cpSync(path.join(FIXTURES, fixture), dir, { recursive: true });
  for (const name of own) mkdirSync(path.join(dir, "sys/class/net", name), { recursive: true });
  for (const [gid, ndev] of Object.entries(gids)) {
    const file = path.join(dir, "sys/class/infiniband", gid.replace(/\/gids\/(\d+)$/, "/gid_attrs/ndevs/$1"));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${ndev}\n`);
  }
  return dir;
}

test("--network pod: the node's interface and address are never exported; a pod interface that gave a RoCE GID is", () => {
  const script = fabricStartScript(vllm, { distributed_backend: "ray" }, { network: "pod" });
  const bareNet = podTree("two-ports-gid3", ["eth0", "lo"]);
  const macvlan = podTree("two-ports-gid3", ["eth0", "lo", "net1"], { "rocep1s0f1/ports/1/gids/3": "net1" });
  try {
    const none = runScript(script, bareNet);
    assert.equal(none.status, 0, none.stderr);
    assert.match(none.stderr.split("\n")[0] ?? "", /^launcher: fabric: no interface of this pod holds a RoCE address/);
    for (const key of ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "VLLM_HOST_IP", "RAY_NODE_IP_ADDRESS"]) assert.doesNotMatch(none.stdout, new RegExp(`^${key}=`, "m"), key);
    const got = scriptEnv(script, macvlan);
    assert.deepEqual([got.NCCL_SOCKET_IFNAME, got.VLLM_HOST_IP], ["net1", "10.10.0.1"]);
    assert.equal(got.NCCL_IB_GID_INDEX, "3");
    const absent = runScript(script, macvlan, { [FACT_VARS.iface]: "enp1s0f1np1" });
    assert.equal(absent.status, 1);
    assert.match(absent.stderr, /^launcher: fabric interface enp1s0f1np1 \(LAUNCHER_FABRIC_IFACE\) is not in this pod's network namespace/m);
    assert.doesNotMatch(absent.stdout, /\S/, "the engine never ran");
  } finally {
    rmSync(bareNet, { recursive: true, force: true });
    rmSync(macvlan, { recursive: true, force: true });
  }
});
