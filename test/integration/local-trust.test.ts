import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { launcher, type Run } from "./practice-cluster.js";

// Local trust (issue 24, slice A): folders and files on this machine that another local user
// could make first. No practice hosts are needed: what is proven is that ssh never reaches (or
// never runs the ProxyCommand of) what another uid planted. Another uid is `nobody`, through
// setpriv, as the test runs as root.
// Short: ssh's control folder goes in TMPDIR only while its sockets' paths fit (MAX_RUNTIME_DIR).
const dir = mkdtempSync(path.join(tmpdir(), "lt-"));
chmodSync(dir, 0o755);
after(() => rmSync(dir, { recursive: true, force: true }));

const isRoot = process.getuid?.() === 0;
const skip = isRoot ? false : "needs root, to plant files as another uid";
const asNobody = (argv: string[], cwd?: string): void => {
  const r = spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", ...argv], { encoding: "utf8", ...(cwd === undefined ? {} : { cwd }) });
  assert.equal(r.status, 0, `${argv.join(" ")}: ${r.stderr}`);
};

/** A fresh folder like /tmp: root's, sticky and writable by all, so that nobody can plant in it. */
function stickyFolder(name: string, parent = dir): string {
  const d = path.join(parent, name);
  mkdirSync(d);
  chmodSync(d, 0o1777);
  return d;
}

/** The CLI as a user runs it, in `cwd`, with no cluster of the test rig and no runtime folder but `tmp`. */
const cli = (args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<Run> =>
  launcher(args, timeoutMs, { LAUNCHER_CLUSTER: "", XDG_RUNTIME_DIR: "", ...env }, { cwd, practice: false });

/** A one-node cluster file; `proxy` makes ssh run `touch MARKER` as the user before it connects. */
const clusterToml = (name: string, marker?: string): string =>
  `name = "${name}"\n${marker === undefined ? "" : `[ssh]\noptions = ["ProxyCommand=sh -c 'touch ${marker}'"]\n`}[[nodes]]\nname = "n1"\nhost = "192.0.2.1"\n`;

/** An `ssh` first in PATH that records each argv (one per line) and fails as an unreachable host does. */
function sshShim(name: string): { env: NodeJS.ProcessEnv; calls: () => string[] } {
  const bin = path.join(dir, name);
  mkdirSync(bin);
  const log = path.join(bin, "calls");
  writeFileSync(path.join(bin, "ssh"), `#!/bin/sh\necho "$*" >> ${log}\nexit 255\n`, { mode: 0o755 });
  return { env: { PATH: `${bin}:${process.env.PATH ?? ""}` }, calls: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean) : []) };
}

describe("ssh's connection-sharing folder is this user's own", { concurrency: false, skip }, () => {
  const controlArg = (calls: string[]): string[] => calls.flatMap((c) => c.split(" ").filter((w) => w.startsWith("ControlPath=")));

  test("made fresh: 0700, root's, and ssh is given it", async () => {
    const tmp = stickyFolder("t-fresh");
    const cluster = path.join(dir, "fresh.toml");
    writeFileSync(cluster, clusterToml("fresh"));
    const shim = sshShim("bin-fresh");
    const r = await cli(["status", "--cluster", cluster], dir, { ...shim.env, TMPDIR: tmp });
    const control = path.join(tmp, "launcher-ssh-0");
    assert.deepEqual([...new Set(controlArg(shim.calls()))], [`ControlPath=${control}/%C`], r.stderr);
    const st = lstatSync(control);
    assert.ok(st.isDirectory() && st.uid === 0 && (st.mode & 0o777) === 0o700);
  });

  for (const [what, plant] of [
    ["a folder another uid made first", (p: string) => asNobody(["mkdir", "-m", "777", p])],
    ["a link another uid put in its place", (p: string) => (asNobody(["mkdir", "-m", "777", `${p}.real`]), asNobody(["ln", "-s", `${p}.real`, p]))],
  ] as const) {
    test(`${what} is refused, named with its owner, and ssh never runs with it (fails before: mkdir -p took it)`, async () => {
      const tmp = stickyFolder(`t-${what.split(" ")[1]}`);
      const control = path.join(tmp, "launcher-ssh-0");
      plant(control);
      const cluster = path.join(dir, "planted.toml");
      writeFileSync(cluster, clusterToml("planted"));
      const shim = sshShim(`bin-${what.split(" ")[1]}`);
      const r = await cli(["status", "--cluster", cluster], dir, { ...shim.env, TMPDIR: tmp });
      assert.equal(r.code, 1, r.stderr);
      assert.ok(r.stderr.includes(control), r.stderr);
      assert.match(r.stderr, /owned by uid 65534|symbolic link/);
      assert.match(r.stderr, /rm -r/);
      assert.deepEqual(controlArg(shim.calls()), [], "no ssh was given the planted folder");
      const real = lstatSync(control).isSymbolicLink() ? `${control}.real` : control;
      assert.deepEqual(readdirSync(real), [], "no socket appeared in it");
    });
  }
});

describe("a cluster file in the current folder is read only when it is the user's (ssh's rule)", { concurrency: false, skip }, () => {
  // Where nobody makes the folders that are theirs.
  const pub = isRoot ? stickyFolder("pub") : dir;
  /** A config folder whose default cluster runs `touch good` through its ProxyCommand: the next source in the order. */
  function config(name: string): { env: NodeJS.ProcessEnv; good: string } {
    const cfg = path.join(dir, `cfg-${name}`);
    const good = path.join(dir, `good-${name}`);
    mkdirSync(path.join(cfg, "launcher", "clusters"), { recursive: true });
    writeFileSync(path.join(cfg, "launcher", "clusters", "home.toml"), clusterToml("home", good));
    writeFileSync(path.join(cfg, "launcher", "default-cluster"), "home\n");
    return { env: { XDG_CONFIG_HOME: cfg, TMPDIR: stickyFolder(`tmp-${name}`) }, good };
  }

  test("./cluster.toml of another uid, in a folder of theirs: its ProxyCommand never runs, the warning says why, the default cluster is used", async () => {
    const work = path.join(pub, "theirs");
    asNobody(["mkdir", "-m", "755", work]);
    const evil = path.join(dir, "evil-theirs");
    asNobody(["sh", "-c", `printf '%s' "$1" > cluster.toml`, "sh", clusterToml("evil", evil)], work);
    const c = config("theirs");
    const r = await cli(["status"], work, c.env);
    assert.equal(existsSync(evil), false, `the planted ProxyCommand ran:\n${r.stderr}`);
    assert.match(r.stderr, /\.\/cluster\.toml is not read: it is owned by uid 65534, neither you \(uid 0\) nor root; .*ssh's rule/);
    assert.equal(existsSync(c.good), true, `the default cluster was not used next:\n${r.stderr}`);
  });

  test("./cluster.toml writable by others is passed over too; made the user's alone (0644), it is read", async () => {
    const work = path.join(dir, "open");
    mkdirSync(work);
    const mark = path.join(dir, "mark-open");
    writeFileSync(path.join(work, "cluster.toml"), clusterToml("open", mark));
    chmodSync(path.join(work, "cluster.toml"), 0o666);
    const c = config("open");
    const r = await cli(["cluster", "show"], work, c.env);
    assert.match(r.stderr, /\.\/cluster\.toml is not read: it is writable by group or others \(mode 0666\)/);
    assert.match(r.stdout, /home: .*home\.toml \(from the default cluster\)/);
    const s = await cli(["status"], work, c.env);
    assert.equal(existsSync(mark), false, s.stderr);
    // The same file, the user's alone: read, and its ProxyCommand runs (this test can see it run).
    chmodSync(path.join(work, "cluster.toml"), 0o644);
    const t = await cli(["status"], work, c.env);
    assert.equal(existsSync(mark), true, `a trusted ./cluster.toml was not read:\n${t.stderr}`);
  });

  test("a bare NAME that is another uid's file here does not shadow the named cluster", async () => {
    const work = path.join(pub, "shadow");
    asNobody(["mkdir", "-m", "755", work]);
    const evil = path.join(dir, "evil-shadow");
    asNobody(["sh", "-c", `printf '%s' "$1" > home`, "sh", clusterToml("evil", evil)], work);
    const c = config("shadow");
    const r = await cli(["status", "--cluster", "home"], work, c.env);
    assert.equal(existsSync(evil), false, r.stderr);
    assert.match(r.stderr, /\.\/home is not read: it is owned by uid 65534/);
    assert.equal(existsSync(c.good), true, r.stderr);
  });
});

describe("launcher demo refuses a demo folder another uid made", { concurrency: false, skip }, () => {
  const DEMO = "/tmp/launcher-demo";
  const busy = existsSync(DEMO) ? "a demo folder is already here (a real demo?): left alone" : false;

  test("demo --down reads no pid from it and signals nothing (fails before: it killed the pid in serve.pid)", { skip: busy }, async () => {
    let victim: ChildProcess | undefined;
    try {
      victim = spawn("sleep", ["300"], { stdio: "ignore" });
      asNobody(["mkdir", "-m", "777", DEMO]);
      asNobody(["sh", "-c", `echo ${victim.pid} > serve.pid && ln -s /etc/passwd serve.log`], DEMO);
      const r = await cli(["demo", "--down"], dir, {}, 120_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /the demo: the folder \/tmp\/launcher-demo is owned by uid 65534/);
      // Alive, not a zombie waiting to be reaped (/proc/PID/stat's third field, proc(5)).
      const state = readFileSync(`/proc/${victim.pid}/stat`, "utf8").split(") ")[1]?.[0];
      assert.ok(state !== undefined && state !== "Z", `the planted pid was signalled (state ${state})`);
      assert.equal(victim.signalCode, null);
    } finally {
      victim?.kill("SIGKILL");
      rmSync(DEMO, { recursive: true, force: true });
    }
  });
});
