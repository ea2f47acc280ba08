import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { release } from "node:os";
import { test } from "node:test";
import type { Cluster, ClusterNode } from "../../src/cluster/cluster.js";
import { doctorNodeJson } from "../../src/cli/doctor.js";
import { healthFindings, probeArgv, readProbe, type NodeProbe } from "../../src/nodes/doctor.js";
import { driftFindings, reference, type DriftRow } from "../../src/nodes/drift.js";
import { parseHelpers, parseOom, parseVersions, portFindings, protectionFindings, rateFindings, type PortLink } from "../../src/nodes/health.js";

const bare = (name: string, rank = 0, hca: string[] = []): ClusterNode => ({ name, rank, host: name, hca, gpus: 1 });

// A Spark's probe with doctor's own sections: one port of two up, at 200 Gb/s.
const HEALTH_TEXT = [
  "@@sysfs",
  "==> /sys/class/infiniband/rocep1s0f1/device/net/ <==",
  "enp1s0f1np1",
  "==> /sys/class/infiniband/rocep1s0f1/ports/1/state <==",
  "4: ACTIVE",
  "==> /sys/class/infiniband/roceP2p1s0f1/device/net/ <==",
  "enP2p1s0f1np1",
  "==> /sys/class/infiniband/roceP2p1s0f1/ports/1/state <==",
  "1: DOWN",
  "@@ip-link",
  "2: enp1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP",
  "3: enP2p1s0f1np1: <BROADCAST,MULTICAST> mtu 1500 qdisc mq state DOWN",
  "@@ip-addr",
  "2: enp1s0f1np1    inet 10.10.0.1/24 brd 10.10.0.255 scope global enp1s0f1np1",
  "@@docker",
  "28.3.3",
  "/var/lib/docker",
  "/dev/nvme0n1p2 3000000000 1000000000 2000000000 34% /",
  "@@gpu",
  "NVIDIA GB10, [N/A]",
  "@@gpu-apps",
  "@@hf",
  "@@meminfo",
  "MemTotal:       128000000 kB",
  "MemFree:        100000000 kB",
  "MemAvailable:   120000000 kB",
  "SwapTotal:       16777216 kB",
  "@@oom",
  "sshd 1234 0",
  "dockerd 2345 -500",
  "@@oom-helpers",
  "earlyoom inactive none",
  "systemd-oomd active 812",
  "@@versions",
  "kernel 6.11.0-1016-nvidia",
  "driver 580.95.05",
  "cuda 13.0",
  "@@ib-rate",
  "==> /sys/class/infiniband/rocep1s0f1/ports/1/rate <==",
  "200 Gb/sec (4X HDR)",
  "==> /sys/class/infiniband/roceP2p1s0f1/ports/1/rate <==",
  "40 Gb/sec (4X QDR)",
  "@@peers",
].join("\n");

test("the probe's health sections: versions, OOM scores, helpers, swap and each port's state and rate", () => {
  const p = readProbe(bare("s1"), "/hf", HEALTH_TEXT);
  assert.deepEqual(p.system, { kernel: "6.11.0-1016-nvidia", nvidia_driver: "580.95.05", cuda: "13.0" });
  assert.deepEqual(p.protection, {
    processes: [{ name: "sshd", pid: 1234, oom_score_adj: 0 }, { name: "dockerd", pid: 2345, oom_score_adj: -500 }],
    oom_helpers: [{ name: "earlyoom", state: "inactive", active: false }, { name: "systemd-oomd", state: "active", pid: 812, active: true }],
    swap_total_kib: 16777216,
  });
  assert.deepEqual(p.links, [
    { hca: "roceP2p1s0f1", port: 1, state: "1: DOWN", active: false, rate: "40 Gb/sec (4X QDR)", rate_gbps: 40 },
    { hca: "rocep1s0f1", port: 1, state: "4: ACTIVE", active: true, rate: "200 Gb/sec (4X HDR)", rate_gbps: 200 },
  ]);
  // Up's probe has no health sections: none of these facts, as before.
  const up = readProbe(bare("s1"), "/hf", HEALTH_TEXT.slice(0, HEALTH_TEXT.indexOf("@@oom\n")));
  assert.equal(up.system, undefined);
  assert.equal(up.protection, undefined);
});

test("node output is bounded and only read: odd lines are dropped, long ones cut, the driver read from /proc without nvidia-smi", () => {
  assert.deepEqual(parseOom("sshd none\n$(reboot) 1 2\ndockerd 99 -1000"), [{ name: "sshd" }, { name: "dockerd", pid: 99, oom_score_adj: -1000 }]);
  assert.deepEqual(parseHelpers("earlyoom unknown none\nsystemd-oomd in;rm 5"), [{ name: "earlyoom", state: "unknown", active: false }, { name: "systemd-oomd", state: "unknown", pid: 5, active: true }]);
  const v = parseVersions(`kernel ${"x".repeat(500)}\ndriver-proc NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build  (dvs-builder@U22)  Tue Sep 30 2025`);
  assert.equal(v.kernel?.length, 80);
  assert.equal(v.nvidia_driver, "580.95.05");
});

test("versions: nvidia-smi's error text is never the driver version; the kernel module's is read instead", () => {
  const proc = "driver-proc NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build  (dvs-builder@U22)  Tue Sep 30 2025";
  const failed = parseVersions(`kernel 6.11.0\ndriver NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\ncuda \n${proc}`);
  assert.equal(failed.nvidia_driver, "580.95.05");
  assert.equal(failed.cuda, undefined);
  assert.equal(parseVersions("driver No devices were found").nvidia_driver, undefined, "no module either: not read");
  assert.equal(parseVersions("driver 580.95.05\ncuda 13.0").nvidia_driver, "580.95.05");
  assert.equal(parseVersions("driver 580.95.05\ncuda 13.0").cuda, "13.0");
});

test("the probe script runs in sh with doctor's sections and reads back this machine's kernel", () => {
  const [cmd, ...args] = probeArgv("/nonexistent/hf", true, []);
  const r = spawnSync(cmd as string, args, { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const p = readProbe(bare("here"), "/nonexistent/hf", r.stdout);
  assert.equal(p.system?.kernel, release());
  assert.deepEqual(p.protection?.processes.map((x) => x.name), ["sshd", "dockerd"]);
  assert.deepEqual(p.protection?.oom_helpers.map((x) => x.name), ["earlyoom", "systemd-oomd"]);
  // Without the flag (up's probe): no health sections.
  const [c2, ...a2] = probeArgv("/nonexistent/hf", false, []);
  const plain = spawnSync(c2 as string, a2, { encoding: "utf8", timeout: 60_000 });
  assert.doesNotMatch(plain.stdout, /^@@(oom|versions|ib-rate)$/m);
});

test("protections: sshd and dockerd not strongly negative are named with their value; no active OOM helper is said; swap is no finding", () => {
  const p = readProbe(bare("s1"), "/hf", HEALTH_TEXT).protection;
  assert.ok(p !== undefined);
  const f = protectionFindings("s1", p);
  assert.deepEqual(f.map((x) => [x.severity, x.kind]), [["warning", "protection"], ["warning", "protection"]]);
  assert.match(f[0]?.message ?? "", /^sshd \(pid 1234\) has oom_score_adj 0: .*node can no longer be reached; a protected sshd has -1000 \(OOMScoreAdjust=-1000 in a systemd drop-in, systemd.exec\(5\)\)/);
  assert.match(f[1]?.message ?? "", /^dockerd \(pid 2345\) has oom_score_adj -500/);
  assert.match(f[0]?.fix ?? "", /launcher nodes protect/);
  const safe = { ...p, processes: p.processes.map((x) => ({ ...x, oom_score_adj: -1000 })), oom_helpers: [] };
  const none = protectionFindings("s1", safe);
  assert.equal(none.length, 1);
  assert.match(none[0]?.message ?? "", /^no OOM helper is active \(none found\)/);
  assert.match(none[0]?.fix ?? "", /sudo apt-get install earlyoom/);
  assert.deepEqual(protectionFindings("s1", { ...safe, oom_helpers: [{ name: "earlyoom", state: "active", active: true }] }), []);
});

const link = (hca: string, active: boolean, rate_gbps?: number): PortLink => ({ hca, port: 1, state: active ? "4: ACTIVE" : "1: DOWN", active, ...(rate_gbps === undefined ? {} : { rate: `${rate_gbps} Gb/sec (4X)`, rate_gbps }) });

test("ports against the record: a missing HCA, a port down, fewer ports up than recorded; a slower port than the cluster's others", () => {
  const node = bare("s1", 0, ["rocep1s0f1"]);
  const recorded = { facts: { hca: ["rocep1s0f1", "roceP2p1s0f1"], ports_up: 4 }, at: "2026-12-01T10:00:00Z" };
  const f = portFindings(node, [link("rocep1s0f1", false, 200)], recorded);
  assert.deepEqual(f.map((x) => x.message), [
    "RoCE port rocep1s0f1/1 is 1: DOWN (the cluster file names it)",
    "RoCE HCA roceP2p1s0f1 is missing (it was active at 2026-12-01T10:00:00Z)",
    "0 RoCE port(s) up, 4 were at 2026-12-01T10:00:00Z",
  ]);
  assert.ok(f.every((x) => x.severity === "warning" && x.kind === "fabric"));
  assert.deepEqual(portFindings(bare("s1"), [link("a", true)], {}), [], "nothing recorded: nothing to compare");
  const rates = rateFindings(new Map([["s1", [link("a", true, 200), link("b", true, 100)]], ["s2", [link("a", true, 200), link("b", false, 40)]]]));
  assert.deepEqual(rates.map((x) => [x.node, x.message]), [["s1", "RoCE port b/1 runs at 100 Gb/sec (4X), slower than the 200 Gb/sec of the cluster's other ports"]]);
});

test("drift reference: only a strict majority, never a tie", () => {
  assert.deepEqual(reference(new Map([["a", "1"], ["b", "1"], ["c", "2"]])), { value: "1", nodes: ["a", "b"] });
  assert.equal(reference(new Map([["a", "1"], ["b", "2"]])), undefined, "a tie names no side");
  assert.equal(reference(new Map([["a", "1"], ["b", "1"]])), undefined, "all agree");
});

test("drift: the node that differs from the majority is named with its value and the others'; a silent Docker is not compared", () => {
  const row = (node: string, values: DriftRow["values"], mtus: DriftRow["mtus"] = {}): DriftRow => ({ node, values, mtus });
  const three = driftFindings([row("s1", { kernel: "6.11.0-1016", docker: "28.3.3" }), row("s2", { kernel: "6.11.0-1016", docker: "28.3.3" }), row("s3", { kernel: "6.11.0-1014" })]);
  assert.deepEqual(three.map((f) => [f.severity, f.kind, f.node, f.message]), [["warning", "drift", "s3", "kernel 6.11.0-1014 differs from 6.11.0-1016 on s1, s2 (the majority: 2 of 3 nodes)"]]);
  assert.deepEqual(driftFindings([row("s1", {}), row("s2", {})]), []);
});

test("drift: a missing value is never the reference: nodes without it are 'not read', the others compared among themselves", () => {
  const row = (node: string, values: DriftRow["values"], mtus: DriftRow["mtus"] = {}): DriftRow => ({ node, values, mtus });
  // Two nodes lack the driver, one has it: 'none' (the most common) must not be the majority.
  const f = driftFindings([row("s1", { nvidia_driver: "580.95.05" }), row("s2", {}), row("s3", {})]);
  assert.deepEqual(f.map((x) => [x.node, x.message]), [
    ["s2", "NVIDIA driver not read on s2, while s1 said one"],
    ["s3", "NVIDIA driver not read on s3, while s1 said one"],
  ]);
  assert.ok(f.every((x) => !/differs/.test(x.message)));
  // The head lacks it and two others differ: the tie is still said, with every node that has a value.
  const tie = driftFindings([row("s1", {}), row("s2", { nvidia_driver: "580.95.05" }), row("s3", { nvidia_driver: "575.57.08" })]);
  assert.deepEqual(tie.map((x) => [x.node, x.message]), [
    ["s2, s3", "NVIDIA driver differs across 2 nodes with no majority: s2 580.95.05, s3 575.57.08"],
    ["s1", "NVIDIA driver not read on s1, while s2, s3 said one"],
  ]);
});

test("drift: with no majority (a 2-node tie) one finding lists every node and its value and names no culprit", () => {
  const row = (node: string, values: DriftRow["values"], mtus: DriftRow["mtus"] = {}): DriftRow => ({ node, values, mtus });
  const two = driftFindings([row("s1", { nvidia_driver: "580.95.05", cuda: "13.0" }, { enp1s0f0np0: 9000 }), row("s2", { nvidia_driver: "575.57.08", cuda: "13.0" }, { enp1s0f0np0: 1500 })]);
  assert.deepEqual(two.map((f) => [f.node, f.message]), [
    ["s1, s2", "NVIDIA driver differs across 2 nodes with no majority: s1 580.95.05, s2 575.57.08"],
    ["s1, s2", "MTU of enp1s0f0np0 differs across 2 nodes with no majority: s1 9000, s2 1500"],
  ]);
  assert.equal(two[0]?.fix, "choose one NVIDIA driver, install it on every node and reboot them");
  assert.match(two[1]?.fix ?? "", /ip link set enp1s0f0np0 mtu N/);
});

const probe = (node: string, text = HEALTH_TEXT): NodeProbe => ({ ...readProbe(bare(node), "/hf", text), ssh: true });

test("doctor's own findings over a report: the fabric interface's MTU is left to crossNodeFindings, the HCAs' other interfaces drift", () => {
  const s2text = HEALTH_TEXT.replace("driver 580.95.05", "driver 575.57.08").replace("mtu 1500 qdisc mq state DOWN", "mtu 9000 qdisc mq state DOWN").replace("mtu 9000 qdisc mq state UP", "mtu 1500 qdisc mq state UP");
  const report = { nodes: [probe("s1"), probe("s2", s2text)], findings: [] };
  const cluster = { nodes: [bare("s1", 0), bare("s2", 1)] } as unknown as Cluster;
  const drift = healthFindings(report, cluster, new Map()).filter((f) => f.kind === "drift");
  assert.deepEqual(drift.map((f) => [f.node, f.message]), [
    ["s1, s2", "NVIDIA driver differs across 2 nodes with no majority: s1 580.95.05, s2 575.57.08"],
    ["s1, s2", "MTU of enP2p1s0f1np1 differs across 2 nodes with no majority: s1 1500, s2 9000"],
  ]);
});

test("doctor --json: a node with the health facts keeps snake_case keys", () => {
  const SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
  const keys: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === "object" && v !== null) for (const [k, x] of Object.entries(v)) (keys.push(k), k === "peers" || walk(x));
  };
  walk(doctorNodeJson(probe("s1"), "alice"));
  for (const k of ["system", "nvidia_driver", "protection", "oom_score_adj", "oom_helpers", "swap_total_kib", "links", "rate_gbps"]) assert.ok(keys.includes(k), k);
  assert.deepEqual(keys.filter((k) => !SNAKE.test(k)), []);
});
