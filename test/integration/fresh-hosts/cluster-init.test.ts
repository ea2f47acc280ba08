import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { parseCluster } from "../../../src/cluster/parse.js";
import { CLUSTER_SOURCES } from "../../../src/cluster/locate.js";
import { CLUSTER, launcher, ok, RIG_DIR } from "../practice-cluster.js";

// `launcher cluster init` against one real practice host (sshd in a network namespace) and one
// host that refuses SSH, then commands that find the cluster it wrote without --cluster. The
// practice host needs no engine image: nothing boots here, so the rig is made bare.
const RIG = path.resolve("test/rig/rig.sh");
const dir = mkdtempSync(path.join(tmpdir(), "launcher-cinit-"));
const config = path.join(dir, "config");
const sshConfig = path.join(dir, "ssh_config");
const named = path.join(config, "launcher", "clusters", "rigged.toml");
// No $LAUNCHER_CLUSTER (the helper sets the rig's), a config folder of our own, and a working
// folder without ./cluster.toml: the default cluster is the only place left to find one.
const env = { LAUNCHER_CLUSTER: "", XDG_CONFIG_HOME: config };
const rig = (args: string[]): void => {
  const r = spawnSync("bash", [RIG, ...args], { env: { ...process.env, RIG_DIR }, encoding: "utf8", timeout: 240_000 });
  assert.equal(r.status, 0, `rig ${args.join(" ")}: ${r.stdout}\n${r.stderr}`);
};

before(() => {
  rig(["up", "1"]);
  // The rig's aliases, plus one whose sshd is not there (port 1 on loopback refuses at once).
  // The Include comes first: inside a Host block it would apply to that host only (ssh_config(5), Include).
  writeFileSync(sshConfig, `Include ${path.join(RIG_DIR, "ssh_config")}\n\nHost lnch-gone\n  HostName 127.0.0.1\n  Port 1\n  BatchMode yes\n`);
}, { timeout: 300_000 });
after(() => {
  rig(["down"]);
  rmSync(dir, { recursive: true, force: true });
}, { timeout: 300_000 });

const init = (hosts: string[], extra: string[] = []) => launcher(["cluster", "init", ...hosts, "--name", "rigged", "--ssh-config", sshConfig, ...extra], 120_000, env);

describe("cluster init, and commands without --cluster", { concurrency: false }, () => {
  test("an unreachable host is named with ssh's reason, exit 1, and nothing is written", async () => {
    const r = await init(["lnch-n1", "lnch-gone"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /lnch-gone: .*Connection refused/);
    assert.doesNotMatch(r.stderr, /lnch-n1:/, "the reachable host is not reported as unreachable");
    assert.match(r.stderr, /nothing was written/);
    assert.equal(existsSync(named), false);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack");
  });

  test("a reachable host: the file has its SSH user and port as ssh resolves them, is the default, and is not overwritten without --force", async () => {
    const written = ok(await init(["lnch-n1"]), "cluster init");
    assert.match(written.stdout, /is now the default cluster/);
    const text = readFileSync(named, "utf8");
    const parsed = parseCluster(named, text);
    assert.deepEqual(parsed.diagnostics, []);
    const rigNode = parseCluster(CLUSTER, readFileSync(CLUSTER, "utf8")).cluster?.nodes[0];
    const node = parsed.cluster?.nodes[0];
    assert.equal(node?.host, "lnch-n1");
    assert.equal(node?.user, rigNode?.user, "the user the rig's ssh_config gives lnch-n1");
    assert.equal(node?.port, 22);
    assert.equal(parsed.cluster?.ssh.config, sshConfig);
    // The practice host has no RDMA and no GPU: the file says what was not found, and why.
    assert.match(text, /# not detected: no active RoCE HCA/);
    assert.match(text, /# not detected: no GPU/);
    assert.equal(readFileSync(path.join(config, "launcher", "default-cluster"), "utf8").trim(), "rigged");

    const again = await init(["lnch-n1"]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists; nothing was written/);
    assert.match(again.stderr, /--force/);
    assert.equal(readFileSync(named, "utf8"), text, "untouched");
    ok(await init(["lnch-n1"], ["--force"]), "cluster init --force");
  });

  test("with the default cluster set, status, doctor and cluster show need no --cluster", async () => {
    if (!existsSync(named)) ok(await init(["lnch-n1"], ["--force"]), "cluster init");
    const show = ok(await launcher(["cluster", "show", "--json"], 30_000, env), "cluster show");
    const shown = JSON.parse(show.stdout) as { file: string; source: string; nodes: { host: string }[] };
    assert.ok(CLUSTER_SOURCES.includes(shown.source as (typeof CLUSTER_SOURCES)[number]));
    assert.deepEqual([shown.file, shown.source, shown.nodes.map((n) => n.host)], [named, "default", ["lnch-n1"]]);
    const status = ok(await launcher(["status", "--json"], 60_000, env), "status without --cluster");
    assert.deepEqual((JSON.parse(status.stdout) as { unreachable: string[] }).unreachable, []);
    const byName = ok(await launcher(["cluster", "show", "rigged", "--json"], 30_000, { ...env, XDG_CONFIG_HOME: config }), "cluster show NAME");
    assert.equal((JSON.parse(byName.stdout) as { source: string }).source, "option");
    const list = ok(await launcher(["cluster", "list"], 30_000, env), "cluster list");
    assert.match(list.stdout, /^\* rigged /m);
  });
});
