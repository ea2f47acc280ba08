import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { launcher, onHostRun, practiceSuite, RIG_DIR } from "../practice-cluster.js";

// Doctor's drift and protection checks, and `nodes protect`, on 2 practice hosts. Fresh hosts: the
// file changes n2's fabric MTU and puts fake nvidia-smi and docker programs on the hosts' PATH.
practiceSuite(2, "launcher-drift-");

/**
 * A fake nvidia-smi in host i's bin folder, first on its SSH sessions' PATH (test/rig/rig.sh):
 * it reports a driver version and no GPU, so that no GPU finding changes.
 */
function fakeNvidiaSmi(i: number, driver: string): () => void {
  const file = path.join(RIG_DIR, "hosts", `n${i}`, "bin", "nvidia-smi");
  writeFileSync(
    file,
    `#!/bin/sh\ncase "$*" in\n  *driver_version*) echo "${driver}" ;;\n  *--query*) ;;\n  *) echo "| NVIDIA-SMI ${driver}   Driver Version: ${driver}   CUDA Version: 13.0 |" ;;\nesac\n`,
  );
  chmodSync(file, 0o755);
  return () => rmSync(file, { force: true });
}

/**
 * A docker wrapper in host i's bin folder that reports another server version to the probe's
 * `docker version --format {{.Server.Version}}` and passes every other command to the real CLI.
 */
function fakeDockerVersion(i: number, version: string): () => void {
  const real = onHostRun(i, ["sh", "-c", "command -v docker"]).stdout.trim();
  assert.match(real, /^\/[\w/.-]+$/);
  const file = path.join(RIG_DIR, "hosts", `n${i}`, "bin", "docker");
  writeFileSync(file, `#!/bin/sh\nif [ "$1" = version ] && [ "$3" = "{{.Server.Version}}" ]; then echo "${version}"; exit 0; fi\nexec ${real} "$@"\n`);
  chmodSync(file, 0o755);
  return () => rmSync(file, { force: true });
}

const mtu = (i: number, value: number) => spawnSync("ip", ["netns", "exec", `lnch-n${i}`, "ip", "link", "set", "enp1s0f1np1", "mtu", String(value)], { encoding: "utf8" });

interface Finding {
  severity: string;
  kind: string;
  node: string;
  message: string;
  fix: string;
}

describe("doctor's drift and protections, and nodes protect, on the practice cluster", { concurrency: false }, () => {
  test("doctor lists both hosts' driver and Docker versions when they differ with no majority, and names the host whose fabric MTU differs", async () => {
    const realDocker = onHostRun(1, ["docker", "version", "--format", "{{.Server.Version}}"]).stdout.trim();
    const undo = [fakeNvidiaSmi(1, "580.95.05"), fakeNvidiaSmi(2, "575.57.08"), fakeDockerVersion(2, "99.0.1")];
    assert.equal(mtu(2, 1500).status, 0);
    try {
      const r = await launcher(["doctor", "--json"]);
      assert.equal(r.code, 1, "the MTU is an error, as before");
      const report = JSON.parse(r.stdout) as { nodes: { node: string; system?: { kernel?: string; nvidia_driver?: string; cuda?: string }; protection?: { processes: { name: string }[]; oom_helpers: { name: string; active: boolean }[]; swap_total_kib?: number } }[]; findings: Finding[] };
      assert.deepEqual(report.nodes.map((n) => [n.node, n.system?.nvidia_driver, n.system?.cuda]), [["n1", "580.95.05", "13.0"], ["n2", "575.57.08", "13.0"]]);
      assert.ok(report.nodes.every((n) => (n.system?.kernel ?? "") !== "" && n.protection?.swap_total_kib !== undefined));
      const drift = report.findings.filter((f) => f.kind === "drift");
      // Two nodes that differ: no majority, so one finding lists both and blames neither.
      assert.deepEqual(drift.map((f) => [f.severity, f.node, f.message]), [
        ["warning", "n1, n2", "NVIDIA driver differs across 2 nodes with no majority: n1 580.95.05, n2 575.57.08"],
        ["warning", "n1, n2", `Docker differs across 2 nodes with no majority: n1 ${realDocker}, n2 99.0.1`],
      ]);
      assert.equal(drift[1]?.fix, "choose one Docker Engine version and install it on every node");
      const errors = report.findings.filter((f) => f.severity === "error");
      assert.deepEqual(errors.map((f) => [f.node, f.message]), [["n2", "fabric MTU 1500 differs from the other nodes' 9000"]]);
      // The practice hosts run no OOM helper: each is told so, as a warning.
      for (const node of ["n1", "n2"]) assert.ok(report.findings.some((f) => f.kind === "protection" && f.node === node && /^no OOM helper is active/.test(f.message)), node);

      const text = await launcher(["doctor"]);
      assert.match(text.stdout, /^ {2}n2 +kernel \S+ +driver 575\.57\.08 +cuda 13\.0 +sshd oom_score_adj -?\d+ +dockerd oom_score_adj -?\d+ +oom helper none +swap [\d.]+ GiB$/m);
      assert.match(text.stdout, /^warning: n1, n2: NVIDIA driver differs across 2 nodes with no majority: n1 580\.95\.05, n2 575\.57\.08$/m);
      assert.match(text.stdout, /^error: n2: fabric MTU 1500 differs/m);
    } finally {
      mtu(2, 9000);
      for (const u of undo) u();
    }
    // Back alike: no drift.
    const again = JSON.parse((await launcher(["doctor", "--json"])).stdout) as { findings: Finding[] };
    assert.deepEqual(again.findings.filter((f) => f.kind === "drift" || f.severity === "error"), []);
  });

  test("nodes protect: the plan per node; --apply without systemd or sudo says why per node and changes nothing", async () => {
    const plan = await launcher(["nodes", "protect", "--json"]);
    assert.equal(plan.code, 0, plan.stderr);
    const shown = JSON.parse(plan.stdout) as { apply: boolean; nodes: { node: string; facts: { systemd: boolean; sudo: string }; plan: { changes: unknown[]; cannot: { what: string; why: string }[] } }[] };
    assert.equal(shown.apply, false);
    assert.deepEqual(shown.nodes.map((n) => n.node), ["n1", "n2"]);
    // What the practice hosts are (namespaces of one machine without systemd; no sudo for their users) decides the words.
    const hostSudo = onHostRun(1, ["sh", "-c", "command -v sudo >/dev/null && (sudo -n true 2>/dev/null && echo yes || echo password) || echo missing"]).stdout.trim();
    for (const n of shown.nodes) {
      assert.equal(n.facts.sudo, hostSudo);
      assert.equal(n.facts.systemd, false);
      assert.deepEqual(n.plan.changes, [], "no drop-in without systemd");
      assert.match(n.plan.cannot[0]?.why ?? "", /systemd does not run on this node/);
    }
    const text = await launcher(["nodes", "protect"]);
    assert.match(text.stdout, /^n1:\n {2}nothing to write\n {2}cannot write systemd drop-ins: systemd does not run on this node/m);
    assert.match(text.stdout, /nothing was changed; `launcher nodes protect --apply` makes these changes/);

    const apply = await launcher(["nodes", "protect", "--apply", "--json"]);
    assert.equal(apply.code, 1, "a node where something could not be done fails --apply");
    const applied = JSON.parse(apply.stdout) as { nodes: { node: string; applied?: boolean; plan: { cannot: { what: string; why: string }[] } }[] };
    for (const n of applied.nodes) {
      assert.equal(n.applied, false, n.node);
      const sudo = n.plan.cannot.find((c) => c.what === "change anything");
      assert.match(sudo?.why ?? "", hostSudo === "missing" ? /there is no sudo command on this node/ : /sudo asks lnchu\d for a password here/);
    }
    for (const i of [1, 2]) assert.equal(onHostRun(i, ["sh", "-c", "ls /etc/systemd/system/*.d/50-launcher-protect.conf 2>/dev/null | wc -l"]).stdout.trim(), "0");
  });
});
