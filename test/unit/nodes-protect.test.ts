import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { protectionText } from "../../src/cli/nodes.js";
import { actionable, APPLY_SCRIPT, applyArgs, dropinPath, earlyoomDropin, MARK, oomDropin, PROTECT_PROBE, protectPlan, readProtectProbe, UNITS, type ProtectFacts } from "../../src/nodes/protect.js";

const node: ClusterNode = { name: "s1", rank: 0, host: "s1", user: "alice", hca: [], gpus: 1 };
const ALL: ProtectFacts = { systemd: true, sudo: "yes", earlyoom_installed: true, earlyoom_active: true, units: ["ssh.service", "docker.service", "earlyoom.service"], files: {} };
const tmp = mkdtempSync(path.join(tmpdir(), "launcher-protect-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

test("the probe's answer: sshd's real unit (an alias is not one), sudo, earlyoom, launcher's files as they are", () => {
  const text = [
    "@@systemd", "yes", "@@sudo", "password", "@@earlyoom", "yes", "@@earlyoom-active", "inactive",
    "@@units", "ssh.service loaded ssh.service", "sshd.service loaded ssh.service", "docker.service loaded docker.service", "earlyoom.service not-found earlyoom.service",
    "@@files", `==> ${dropinPath("docker.service")} <==`, MARK, "[Service]", "OOMScoreAdjust=-1000", "",
  ].join("\n");
  const f = readProtectProbe(text);
  assert.deepEqual(f, { systemd: true, sudo: "password", earlyoom_installed: true, earlyoom_active: false, units: ["ssh.service", "docker.service"], files: { [dropinPath("docker.service")]: `${MARK}\n[Service]\nOOMScoreAdjust=-1000\n` } });
  assert.equal(readProtectProbe("@@sudo\n$(rm -rf /)\n").sudo, "password", "an answer that is none of the words counts as no sudo");
});

test("the plan: a drop-in per daemon under its real unit, earlyoom at the floor in KiB, what is there already left as is", () => {
  const plan = protectPlan(node, { ...ALL, files: { [dropinPath("docker.service")]: oomDropin("dockerd") } }, 4, { apply: false, undo: false });
  assert.deepEqual(plan.changes.map((c) => [c.action, c.path, c.now]), [
    ["write", "/etc/systemd/system/ssh.service.d/50-launcher-protect.conf", "absent"],
    ["write", "/etc/systemd/system/docker.service.d/50-launcher-protect.conf", "same"],
    ["write", "/etc/systemd/system/earlyoom.service.d/50-launcher-protect.conf", "absent"],
  ]);
  assert.equal(plan.changes[0]?.content, `${MARK}\n# sshd is never the OOM killer's pick (OOMScoreAdjust=, systemd.exec(5)); applies at the service's next start.\n[Service]\nOOMScoreAdjust=-1000\n`);
  assert.match(plan.changes[2]?.content ?? "", /^ExecStart=\nExecStart=\/usr\/bin\/earlyoom -M 4194304 -s 100 -r 60$/m);
  assert.match(earlyoomDropin(2.5), /-M 2621440 /);
  assert.deepEqual(plan.cannot, []);
  assert.match(plan.effect.join("\n"), /next start.*oom_score_adj, so they are protected now, without a restart/);
  // sshd.service where there is no ssh.service (Fedora, Arch).
  assert.equal(protectPlan(node, { ...ALL, units: ["sshd.service"] }, 4, { apply: false, undo: false }).changes[0]?.path, "/etc/systemd/system/sshd.service.d/50-launcher-protect.conf");
});

test("what it cannot do is said per cause: no systemd, no units, earlyoom not installed (with the apt command), no passwordless sudo", () => {
  const none = protectPlan(node, { ...ALL, systemd: false, units: [] }, 4, { apply: false, undo: false });
  assert.deepEqual(none.changes, []);
  assert.deepEqual(none.cannot.map((c) => c.why), ["systemd does not run on this node (/run/systemd/system is absent)"]);
  const bare = protectPlan(node, { ...ALL, units: [], earlyoom_installed: false, sudo: "password" }, 4, { apply: true, undo: false });
  assert.deepEqual(bare.cannot.map((c) => c.what), ["protect sshd", "protect dockerd", "set earlyoom to the memory floor", "change anything"]);
  assert.match(bare.cannot[2]?.fix ?? "", /^sudo apt-get install earlyoom/);
  assert.match(bare.cannot[3]?.why ?? "", /^sudo asks alice for a password here \(sudo -n true failed\)/);
  assert.equal(actionable(protectPlan(node, { ...ALL, sudo: "password" }, 4, { apply: true, undo: false }), { ...ALL, sudo: "password" }), false, "no sudo: nothing is run");
  assert.match(protectPlan(node, { ...ALL, sudo: "missing" }, 4, { apply: true, undo: false }).cannot[0]?.why ?? "", /no sudo command/);
});

test("undo removes only launcher's files; a file without its mark is named and left alone", () => {
  const foreign = "[Service]\nOOMScoreAdjust=-900\n";
  const facts = { ...ALL, files: { [dropinPath("ssh.service")]: oomDropin("sshd"), [dropinPath("docker.service")]: foreign } };
  const plan = protectPlan(node, facts, 4, { apply: true, undo: true });
  assert.deepEqual(plan.changes.map((c) => [c.action, c.unit, c.now]), [["remove", "ssh.service", "ours"], ["remove", "docker.service", "foreign"]]);
  assert.deepEqual(applyArgs(plan), [MARK, "remove", dropinPath("ssh.service")]);
  const text = protectionText({ node: "s1", plan, applied: true }, { apply: true, undo: true });
  assert.ok(text.includes(`  removed ${dropinPath("ssh.service")} (launcher's)`), text.join("\n"));
  assert.ok(text.includes(`  leaves ${dropinPath("docker.service")} (not launcher's: left alone)`), text.join("\n"));
});

/** A bin folder with fake systemctl and sudo, first on PATH: the scripts run here as they would on a node. */
function fakeBin(): string {
  const bin = path.join(tmp, "bin");
  mkdirSync(bin, { recursive: true });
  const put = (name: string, body: string): void => {
    writeFileSync(path.join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(path.join(bin, name), 0o755);
  };
  put("systemctl", `echo "$*" >> "${path.join(tmp, "systemctl.log")}"\ncase "$*" in\n  *"-p LoadState"*) echo loaded ;;\n  *"-p Id"*) echo "$5" ;;\n  *MainPID*) echo 0 ;;\n  is-active*) echo active ;;\nesac`);
  put("sudo", "exit 1");
  return bin;
}

test("the probe and apply scripts run in sh: the answer reads back, apply writes and removes only marked files, then reloads systemd", () => {
  const bin = fakeBin();
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
  const probe = spawnSync("sh", ["-c", PROTECT_PROBE, "sh", ...UNITS.map(dropinPath)], { encoding: "utf8", env });
  assert.equal(probe.status, 0, probe.stderr);
  const facts = readProtectProbe(probe.stdout);
  assert.equal(facts.sudo, "password");
  assert.equal(facts.earlyoom_active, true);
  assert.deepEqual(facts.units, [...UNITS]);

  const ours = path.join(tmp, "etc", "docker.service.d", "50-launcher-protect.conf");
  const theirs = path.join(tmp, "etc", "x.service.d", "override.conf");
  mkdirSync(path.dirname(theirs), { recursive: true });
  writeFileSync(theirs, "[Service]\n");
  const content = oomDropin("dockerd");
  const write = spawnSync("sh", ["-c", APPLY_SCRIPT, "sh", MARK, "write", ours, content, "adj", "docker.service"], { encoding: "utf8", env });
  assert.equal(write.status, 0, write.stderr);
  assert.equal(readFileSync(ours, "utf8"), content);
  const remove = spawnSync("sh", ["-c", APPLY_SCRIPT, "sh", MARK, "remove", ours, "remove", theirs], { encoding: "utf8", env });
  assert.equal(remove.status, 0, remove.stderr);
  assert.equal(existsSync(ours), false);
  assert.equal(existsSync(theirs), true, "a file without launcher's mark stays");
  const log = readFileSync(path.join(tmp, "systemctl.log"), "utf8");
  assert.match(log, /^show -p MainPID --value docker\.service$/m);
  assert.match(log, /^daemon-reload$/m);
  assert.match(log, /^try-restart earlyoom\.service$/m);
  assert.doesNotMatch(log, /restart (ssh|sshd|docker)\.service/, "nothing that carries SSH or the containers restarts");
});
