import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { chooseCluster, configDirs, namedClusterFile, type ClusterLookup } from "../../src/cluster/locate.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { renderClusterToml, type DetectedCluster } from "../../src/cluster/write.js";
import { nodeNames, parseHostArg } from "../../src/setup/cluster-init.js";
import { useCluster, writeClusterFile } from "../../src/setup/cluster-config.js";
import { UserError } from "../../src/config/errors.js";
import { clusterPath, optionalClusterPath } from "../../src/app/this-process.js";

const dirs = configDirs({ XDG_CONFIG_HOME: "/cfg" }, "/home/u");
const lookup = (files: string[], rest: Partial<ClusterLookup> = {}): ClusterLookup => ({ dirs, exists: (f) => files.includes(f), trust: () => undefined, ...rest });

describe("where a command finds its cluster file", () => {
  test("the config folder follows XDG, ignoring a relative $XDG_CONFIG_HOME", () => {
    assert.equal(dirs.clusters, "/cfg/launcher/clusters");
    assert.equal(configDirs({}, "/home/u").root, "/home/u/.config/launcher");
    assert.equal(configDirs({ XDG_CONFIG_HOME: "rel" }, "/home/u").root, "/home/u/.config/launcher");
  });

  test("--cluster, then $LAUNCHER_CLUSTER, then ./cluster.toml, then the default cluster", () => {
    const all = ["a.toml", "e.toml", "cluster.toml", namedClusterFile(dirs, "home"), namedClusterFile(dirs, "lab")];
    const pick = (rest: Partial<ClusterLookup>) => {
      const c = chooseCluster(lookup(all, rest));
      return c.found ? [c.file, c.source] : [c.message];
    };
    assert.deepEqual(pick({ option: "a.toml", env: "e.toml", defaultName: "home" }), ["a.toml", "option"]);
    assert.deepEqual(pick({ env: "e.toml", defaultName: "home" }), ["e.toml", "env"]);
    assert.deepEqual(pick({ env: "", defaultName: "home" }), ["cluster.toml", "cwd"], "an empty $LAUNCHER_CLUSTER is unset");
    assert.deepEqual(pick({ defaultName: "home" }), ["cluster.toml", "cwd"]);
    const noCwd = (rest: Partial<ClusterLookup>) => chooseCluster(lookup(all.filter((f) => f !== "cluster.toml"), rest));
    assert.deepEqual(noCwd({ defaultName: "home" }), { found: true, file: "/cfg/launcher/clusters/home.toml", source: "default", name: "home" });
  });

  test("--cluster and $LAUNCHER_CLUSTER take a path or a name of the config folder", () => {
    const files = [namedClusterFile(dirs, "lab"), "lab"];
    assert.deepEqual(chooseCluster(lookup(files.slice(0, 1), { option: "lab" })), { found: true, file: "/cfg/launcher/clusters/lab.toml", source: "option", name: "lab" });
    assert.deepEqual(chooseCluster(lookup(files.slice(0, 1), { env: "lab" })), { found: true, file: "/cfg/launcher/clusters/lab.toml", source: "env", name: "lab" });
    // A file of that name in the current folder is what the user means.
    const c = chooseCluster(lookup(files, { option: "lab" }));
    assert.ok(c.found && c.file === "lab");
  });

  test("nothing found says how to make one; a missing named or default cluster says which", () => {
    const none = chooseCluster(lookup([]));
    assert.ok(!none.found && none.source === undefined && /cluster init/.test(none.hint));
    const missing = chooseCluster(lookup([], { option: "lab" }));
    assert.ok(!missing.found && missing.source === "option" && /no cluster named lab/.test(missing.message) && /cluster list/.test(missing.hint));
    const path_ = chooseCluster(lookup([], { env: "x/y.toml" }));
    assert.ok(!path_.found && /cluster file x\/y.toml not found/.test(path_.message) && /LAUNCHER_CLUSTER/.test(path_.hint));
    const dangling = chooseCluster(lookup([], { defaultName: "gone" }));
    assert.ok(!dangling.found && /default cluster gone/.test(dangling.message) && /cluster use/.test(dangling.hint));
  });

  test("commands read the default cluster from the config folder when nothing else names one (fails before: they needed --cluster)", () => {
    const tmp = mkdtempSync(path.join(tmpdir(), "launcher-cfg-"));
    const saved = { cwd: process.cwd(), xdg: process.env.XDG_CONFIG_HOME, env: process.env.LAUNCHER_CLUSTER };
    try {
      process.chdir(tmp);
      process.env.XDG_CONFIG_HOME = path.join(tmp, "config");
      delete process.env.LAUNCHER_CLUSTER;
      assert.equal(optionalClusterPath(undefined), undefined, "nothing anywhere: commands that can do without go on");
      const d = configDirs(process.env, "/nowhere");
      mkdirSync(d.clusters, { recursive: true });
      writeFileSync(namedClusterFile(d, "lab"), 'name = "lab"\n[[nodes]]\nname = "s1"\nhost = "s1"\n');
      assert.throws(() => clusterPath(undefined), (e: unknown) => e instanceof UserError && /cluster init/.test(e.hint ?? ""));
      useCluster(d, "lab");
      assert.equal(clusterPath(undefined), namedClusterFile(d, "lab"));
      assert.equal(clusterPath("lab"), namedClusterFile(d, "lab"));
      assert.throws(() => useCluster(d, "nope"), (e: unknown) => e instanceof UserError && /the named clusters are lab/.test(e.hint ?? ""));
    } finally {
      process.chdir(saved.cwd);
      if (saved.xdg === undefined) delete process.env.XDG_CONFIG_HOME;
      else process.env.XDG_CONFIG_HOME = saved.xdg;
      if (saved.env !== undefined) process.env.LAUNCHER_CLUSTER = saved.env;
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

const spark = (name: string, ip: string, gid: number): DetectedCluster["nodes"][number] => ({
  name,
  host: `${name}.lan`,
  user: "ai",
  port: 22,
  facts: { fabric_iface: "enp1s0f1np1", fabric_ip: ip, mtu: 9000, hca: ["rocep1s0f1"], gid_index: gid, ports_up: 2 },
  gpus: ["NVIDIA GB10 128 GiB"],
  findings: [],
});

describe("the cluster file cluster init writes", () => {
  test("every detected value, in the hosts' order, parses back to the same cluster", () => {
    const text = renderClusterToml({ name: "lab", ssh: { config: "/etc/lab/ssh_config" }, at: "2026-01-01T00:00:00Z", nodes: [spark("spark1", "192.168.100.11", 3), spark("spark2", "192.168.100.12", 4)] });
    const parsed = parseCluster("/x/lab.toml", text);
    assert.deepEqual(parsed.diagnostics, []);
    const c = parsed.cluster;
    assert.equal(c?.name, "lab");
    assert.equal(c?.ssh.config, "/etc/lab/ssh_config");
    assert.deepEqual(
      c?.nodes.map((n) => [n.rank, n.name, n.host, n.user, n.port, n.fabric_iface, n.fabric_ip, n.hca, n.gid_index, n.gpus]),
      [
        [0, "spark1", "spark1.lan", "ai", 22, "enp1s0f1np1", "192.168.100.11", ["rocep1s0f1"], 3, 1],
        [1, "spark2", "spark2.lan", "ai", 22, "enp1s0f1np1", "192.168.100.12", ["rocep1s0f1"], 4, 1],
      ],
    );
    assert.match(text, /# detected: enp1s0f1np1 holds the fabric IP 192\.168\.100\.12 \(MTU 9000\)/);
    assert.match(text, /# detected: active RoCE HCA rocep1s0f1, 2 port\(s\) up; GID index 4 is the RoCE v2 GID of the fabric IP/);
    assert.match(text, /the first is the head/);
  });

  test("what was not detected is left out with a comment, and findings become lines to check", () => {
    const text = renderClusterToml({
      name: "bare",
      ssh: {},
      at: "2026-01-01T00:00:00Z",
      nodes: [{ name: "n1", host: "10.0.0.5", facts: { hca: [], ports_up: 0 }, findings: [{ severity: "warning", kind: "fabric", node: "n1", message: "no RoCE HCA found\n(/sys/class/infiniband is empty)", fix: "check the cable" }] }],
    });
    const c = parseCluster("/x/bare.toml", text).cluster;
    assert.deepEqual([c?.nodes[0]?.fabric_ip, c?.nodes[0]?.fabric_iface, c?.nodes[0]?.hca, c?.nodes[0]?.gid_index, c?.nodes[0]?.user], [undefined, undefined, [], undefined, undefined]);
    assert.match(text, /# not detected: the fabric interface and IP/);
    assert.match(text, /# not detected: no GPU/);
    assert.match(text, /^# check \(warning\): no RoCE HCA found \(\/sys\/class\/infiniband is empty\); fix: check the cable$/m);
    assert.doesNotMatch(text, /\[ssh\]/);
  });

  test("an existing file is not replaced without force", () => {
    const tmp = mkdtempSync(path.join(tmpdir(), "launcher-cw-"));
    try {
      const file = path.join(tmp, "sub", "c.toml");
      const text = 'name = "c"\n[[nodes]]\nname = "s1"\nhost = "s1"\n';
      writeClusterFile(file, text, false);
      assert.throws(() => writeClusterFile(file, text.replace("s1", "s2"), false), (e: unknown) => e instanceof UserError && /exists; nothing was written/.test(e.message));
      writeClusterFile(file, text, true);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe("cluster init's host arguments", () => {
  test("[user@]host[:port], each part checked", () => {
    assert.deepEqual(parseHostArg("spark1"), { host: "spark1" });
    assert.deepEqual(parseHostArg("ai@spark1.lan:2222"), { host: "spark1.lan", user: "ai", port: 2222 });
    assert.deepEqual(parseHostArg("fe80::1"), { host: "fe80::1" });
    assert.throws(() => parseHostArg("-oProxyCommand=x"), UserError);
    assert.throws(() => parseHostArg("a b@spark1"), UserError);
    assert.throws(() => parseHostArg("spark1:70000"), /port 70000/);
  });

  test("node names from host names; addresses and repeats get numbers", () => {
    assert.deepEqual(nodeNames(["spark1.lan", "spark2.lan", "10.0.0.3", "spark1.other"]), ["spark1", "spark2", "node3", "spark1-4"]);
  });
});

describe("the example cluster files", () => {
  test("each parses; the minimal one has only names and hosts, everything else found by launcher", () => {
    const files = readdirSync("examples/clusters").filter((f) => f.endsWith(".toml"));
    assert.ok(files.includes("minimal.toml"));
    for (const f of files) {
      const file = path.join("examples/clusters", f);
      assert.deepEqual(parseCluster(file, readFileSync(file, "utf8")).diagnostics, [], file);
    }
    const minimal = parseCluster("examples/clusters/minimal.toml", readFileSync("examples/clusters/minimal.toml", "utf8")).cluster;
    assert.deepEqual(minimal?.nodes.map((n) => Object.keys(n).sort()), [["gpus", "hca", "host", "name", "rank"], ["gpus", "hca", "host", "name", "rank"]]);
  });
});
