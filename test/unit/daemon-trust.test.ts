import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { UserError } from "../../src/config/errors.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { findDaemon } from "../../src/cli/daemon-target.js";
import { bootSubmitter } from "../../src/daemon/boots-host.js";
import { processEnvironment } from "../../src/app/environment.js";
import { composeUploaded, submissionPathProblem, type DaemonScope } from "../../src/app/admit.js";
import { localDaemonVerdict, type LocalDaemonFacts } from "../../src/daemon/local-daemon.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import type { UpSubmission } from "../../src/app/up-submission.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { decodeError, decodeEvent, type UpEvent } from "../../src/boot/up-events.js";
import { catalogueSource } from "../../src/recipe/uploaded-source.js";
import type { StateStore } from "../../src/store/store.js";
import { within } from "../integration/practice-cluster.js";
import { BASE } from "../support/memory-source.js";
import { cliArgs } from "../built-cli.js";

// Issue 24, the daemon's side: nothing a client submits runs as the daemon's user, reads its
// files or sets how its SSH and Docker run; and only the daemon's own user is "this user".

const NODES = '[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n';
const quietLog = (): void => undefined;

/** The daemon's own cluster "home" (with [ssh] and [docker] of its own) and recipe folders `recipesDir`. */
function scopeOf(recipesDir: string): DaemonScope {
  const home = parseCluster("/etc/launcher/home.toml", `name = "home"\n[ssh]\nconfig = "ssh_config"\noptions = ["ConnectTimeout=5"]\n[docker]\nrun_args = ["--network", "host"]\n${NODES}`).cluster as Cluster;
  return { own: [home], catalogue: catalogueSource([recipesDir]) };
}

/** The submission's refusal: its error event, decoded (fails when the boot was accepted instead). */
function refusal(result: ReturnType<ReturnType<typeof bootSubmitter>>): Error {
  assert.ok(Array.isArray(result), "refused before any boot starts");
  const last = (result as readonly UpEvent[]).at(-1);
  assert.equal(last?.type, "error");
  return decodeError((last as Extract<UpEvent, { type: "error" }>).error);
}

test("a cluster file sent with a boot may not set [ssh] or [docker]: each key is refused at its line, nothing runs, nothing is read", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-trust-"));
  const marker = path.join(dir, "proxy-ran");
  try {
    const submit = bootSubmitter(new BootRegistry(Date.now), {} as StateStore, processEnvironment(), scopeOf(dir), quietLog);
    const text = [
      'name = "laptop"',
      "[ssh]",
      `options = ["ProxyCommand=sh -c 'touch ${marker}'"]`,
      'config = "/root/.ssh/config"',
      'identity = "/etc/ssh/ssh_host_ed25519_key"',
      'known_hosts = "/etc/shadow"',
      "[docker]",
      'run_args = ["--privileged", "-v", "/:/host"]',
      NODES,
    ].join("\n");
    const e = refusal(submit({ ref: "x", cluster_file: { file: "/home/me/laptop.toml", text } }));
    assert.ok(e instanceof UserError);
    assert.match(e.message, /cluster file \/home\/me\/laptop\.toml sets how the daemon's SSH or Docker run/);
    const said = e.diagnostics.map(formatDiagnostic);
    for (const [line, key] of [[3, "ssh.options"], [4, "ssh.config"], [5, "ssh.identity"], [6, "ssh.known_hosts"], [8, "docker.run_args"]] as const) {
      assert.ok(said.some((d) => d.startsWith(`/home/me/laptop.toml:${line}:1: error: ${key} is not accepted in a cluster file sent to a daemon`)), `${key} at line ${line}:\n${said.join("\n")}`);
    }
    assert.match(said[0] ?? "", /hint: leave \[ssh\] out of the file sent: a client cannot set how the daemon's SSH\/Docker run; configure the daemon's own cluster file/);
    // Dotted keys and inline tables are the same tables.
    const dotted = refusal(submit({ ref: "x", cluster_file: { file: "l.toml", text: `ssh.options = ["LocalCommand=id"]\ndocker = { extra_args = ["--privileged"] }\n${NODES}` } }));
    assert.deepEqual((dotted as UserError).diagnostics.map((d) => d.message.split(" ")[0]), ["ssh.options", "docker.extra_args"]);
    assert.equal(existsSync(marker), false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a cluster file sent without [ssh]/[docker] is booted with the daemon's own (its first --cluster's), each client line keeping its number", () => {
  const scope = scopeOf("/nonexistent");
  const own = scope.own[0] as Cluster;
  const composed = parseCluster("/state/laptop.toml", composeUploaded(`name = "laptop"\n${NODES}`, own)).cluster as Cluster;
  assert.deepEqual(composed.ssh, own.ssh);
  assert.deepEqual([composed.run_args, composed.extra_args], [own.run_args, own.extra_args]);
  assert.equal(composed.name, "laptop");
  // A path with a quote, a backslash and DEL is written back as TOML reads it.
  const odd = { ...own, ssh: { ...own.ssh, config: '/a "b"\\c\x7f' } };
  assert.equal(parseCluster("/x.toml", composeUploaded(NODES, odd)).cluster?.ssh.config, '/a "b"\\c\x7f');
});

test("a submission names no path of the daemon's machine: ref, cluster and every extends are refused without echoing a file", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-trust-"));
  try {
    // A file only the daemon's user may read, whose key names must not come back in an error.
    const secret = path.join(dir, "secret.toml");
    writeFileSync(secret, "secret_key_name_zq = 1\n", { mode: 0o600 });
    mkdirSync(path.join(dir, "client"));
    writeFileSync(path.join(dir, "client", "recipe.toml"), "secret_key_name_zq = 1\n", { mode: 0o600 });
    for (const ref of ["/etc/shadow", "../../x", "~/x", secret, "./x", ".."]) {
      assert.match(submissionPathProblem({ ref }) ?? "", /is a path, and a daemon reads no path of its machine for a client/, ref);
    }
    assert.match(submissionPathProblem({ ref: "chat", cluster: "/etc/shadow" }) ?? "", /^cluster "\/etc\/shadow" is a path/);
    assert.equal(submissionPathProblem({ ref: "chat", cluster: "home" }), undefined);
    // A path the client read and sent is content, not a path here.
    assert.equal(submissionPathProblem({ ref: "/home/me/r", recipes: [{ ref: "/home/me/r", file: "/home/me/r/recipe.toml", id: "r", text: BASE }] }), undefined);

    const submit = bootSubmitter(new BootRegistry(Date.now), {} as StateStore, processEnvironment(), scopeOf(path.join(dir, "recipes")), quietLog);
    // extends by path, and by a bare name that the CLI would look for beside the referring file
    // (here the client's file name, which the daemon's disk resolves to `dir/client`).
    for (const parent of [secret, "../secret.toml", "client"]) {
      const sent = { ref: "/home/me/r", file: path.join(dir, "mine", "recipe.toml"), id: "r", text: `extends = ${JSON.stringify(parent)}\nname = "r"\n` };
      const e = refusal(submit({ ref: "/home/me/r", recipes: [sent], cluster: "home" }));
      const all = [e.message, ...(e as UserError).diagnostics.map(formatDiagnostic)].join("\n");
      assert.doesNotMatch(all, /secret_key_name_zq/, `extends ${parent}`);
      assert.match(all, /extends: recipe .* (is a path the client did not send|is neither among the files the client sent nor one of the daemon's own recipes)/, all);
    }
    const named = refusal(submit({ ref: "chat", cluster: "elsewhere" }));
    assert.match(named.message, /^the daemon has no cluster named "elsewhere": its clusters are home$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a cluster file named as one of the daemon's own clusters is refused (it never silently becomes the daemon's)", () => {
  const submit = bootSubmitter(new BootRegistry(Date.now), {} as StateStore, processEnvironment(), scopeOf("/nonexistent"), quietLog);
  const e = refusal(submit({ ref: "chat", cluster_file: { file: "/home/me/home.toml", text: NODES } }));
  assert.match(e.message, /^cluster file \/home\/me\/home\.toml is named "home", as one of the daemon's own clusters is/);
});

const facts = (over: Partial<LocalDaemonFacts> = {}): LocalDaemonFacts => ({
  record: { url: "http://127.0.0.1:8080", pid: 42, host: "me", socket: "/run/user/1000/launcher-daemon/control-a.sock" },
  file: { kind: "file", uid: 1000, mode: 0o600 },
  pidUids: [1000, 1000],
  socket: { kind: "other", uid: 1000, mode: 0o600 },
  socketDir: { kind: "dir", uid: 1000, mode: 0o700 },
  ...over,
});

test("daemon.json is believed only when this user's, its pid this user's process, its socket this user's in a private folder", () => {
  const me = { uid: 1000, host: "me" };
  assert.deepEqual(localDaemonVerdict(facts(), me), { use: { url: "http://127.0.0.1:8080", socket: "/run/user/1000/launcher-daemon/control-a.sock" } });
  const skip = (over: Partial<LocalDaemonFacts>): string | undefined => {
    const v = localDaemonVerdict(facts(over), me);
    assert.ok("skip" in v, JSON.stringify(over));
    return v.skip;
  };
  // Gone, or another machine's: silently no daemon, as before.
  assert.equal(skip({ pidUids: undefined }), undefined);
  assert.equal(skip({ record: { ...facts().record, host: "other" } }), undefined);
  assert.match(skip({ file: { kind: "file", uid: 0, mode: 0o600 } }) ?? "", /owned by uid 0, not by you \(uid 1000\)/);
  assert.match(skip({ file: { kind: "file", uid: 1000, mode: 0o620 } }) ?? "", /group or others may write it \(mode 0620\)/);
  assert.match(skip({ file: { kind: "symlink", uid: 1000, mode: 0o777 } }) ?? "", /not a regular file/);
  assert.match(skip({ pidUids: [65534, 65534] }) ?? "", /its pid 42 is a process of uid 65534\/65534, not yours/);
  assert.match(skip({ pidUids: [1000, 0] }) ?? "", /not yours/);
  assert.match(skip({ record: { url: "http://127.0.0.1:8080", pid: 42, host: "me" } }) ?? "", /names no control socket/);
  assert.match(skip({ socketDir: { kind: "dir", uid: 1000, mode: 0o755 } }) ?? "", /the folder of its control socket .* has mode 0755/);
  assert.match(skip({ socketDir: { kind: "symlink", uid: 1000, mode: 0o777 } }) ?? "", /symbolic link/);
  assert.match(skip({ socket: { kind: "other", uid: 0, mode: 0o600 } }) ?? "", /is not a socket of yours/);
});

/** A listener that counts what reaches it (nothing may). */
async function counting(listenOn: (s: Server) => void): Promise<{ server: Server; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits += 1;
    req.resume();
    res.end("{}");
  });
  server.on("connection", () => (hits += 1));
  await new Promise<void>((resolve) => {
    server.once("listening", resolve);
    listenOn(server);
  });
  return { server, hits: () => hits };
}

const SETPRIV = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];

test("a daemon.json of ours whose pid is another uid's process is not believed: the CLI says why, runs here and sends it nothing", { skip: process.getuid?.() !== 0 ? "needs root (setpriv)" : false }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-trust-"));
  const saved = { state: process.env.XDG_STATE_HOME, daemon: process.env.LAUNCHER_DAEMON };
  const theirs: ChildProcess = spawn("setpriv", [...SETPRIV, "sleep", "60"], { stdio: "ignore" });
  const sockDir = path.join(dir, "run");
  mkdirSync(sockDir, { mode: 0o700 });
  const socket = path.join(sockDir, "control.sock");
  const tcp = await counting((s) => s.listen(0, "127.0.0.1"));
  const unix = await counting((s) => s.listen(socket));
  try {
    process.env.XDG_STATE_HOME = path.join(dir, "state");
    delete process.env.LAUNCHER_DAEMON;
    mkdirSync(path.join(dir, "state", "launcher"), { recursive: true, mode: 0o700 });
    const file = path.join(dir, "state", "launcher", "daemon.json");
    const url = `http://127.0.0.1:${(tcp.server.address() as { port: number }).port}`;
    const write = (pid: number): void => writeFileSync(file, JSON.stringify({ url, pid, host: hostname(), socket }), { mode: 0o600 });
    await within(10_000, "the other uid's process runs", async () => (theirs.pid !== undefined && spawnSync("ps", ["-o", "user=", "-p", String(theirs.pid)], { encoding: "utf8" }).stdout.trim() === "nobody" ? true : undefined));
    write(theirs.pid as number);
    const warned: string[] = [];
    assert.equal(findDaemon(undefined, (l) => warned.push(l)), undefined);
    assert.match(warned.join("\n"), new RegExp(`not using the daemon that .*daemon\\.json names: its pid ${theirs.pid} is a process of uid 65534/65534, not yours \\(uid 0\\).*; running in this process`));
    // Nor when the URL is given: it then goes over TCP, where only an admin key opens the door.
    assert.deepEqual(findDaemon(url, () => undefined), { url });
    // Our own live pid, the same file: the socket is used (proof that only the pid decided above).
    write(process.pid);
    assert.deepEqual(findDaemon(undefined, () => undefined), { url, socket });
    // A file others may write is not believed either.
    chmodSync(file, 0o666);
    assert.equal(findDaemon(undefined, (l) => warned.push(l)), undefined);
    assert.match(warned.at(-1) ?? "", /group or others may write it \(mode 0666\)/);
    assert.equal(tcp.hits() + unix.hits(), 0, "nothing was sent to either address");
  } finally {
    theirs.kill("SIGKILL");
    for (const [k, v] of [["XDG_STATE_HOME", saved.state], ["LAUNCHER_DAEMON", saved.daemon]] as const) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    tcp.server.close();
    unix.server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** This process's environment without any admin or API key. */
function withoutKeys(): NodeJS.ProcessEnv {
  const { LAUNCHER_ADMIN_KEY: _a, LAUNCHER_ADMIN_KEY_FILE: _f, LAUNCHER_API_KEY: _k, ...rest } = process.env;
  return rest;
}

/** `launcher serve --control` on a loopback port, one own cluster whose node refuses SSH at once. */
async function realDaemon(dir: string): Promise<{ port: string; socket: string; log: () => string; stop: () => Promise<void> }> {
  const cluster = path.join(dir, "home.toml");
  writeFileSync(cluster, `name = "home"\n${NODES}`);
  const child = spawn(process.execPath, [...cliArgs(), "serve", "--control", "--listen", "127.0.0.1:0", "--poll", "1s", "--cluster", cluster], {
    cwd: dir,
    env: { ...withoutKeys(), NODE_OPTIONS: "", XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_DAEMON: "none", XDG_RUNTIME_DIR: "" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const stop = async (): Promise<void> => {
    child.kill("SIGTERM");
    const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(t);
  };
  try {
    const { value } = await within(60_000, "the daemon's control API listens", async () => (child.exitCode !== null ? Promise.reject(new Error(log)) : /control API on http:\/\/127\.0\.0\.1:(\d+)\S* \(.*\) and on (\S+) \(this user only\)/.exec(log) ?? undefined));
    return { port: value[1] as string, socket: value[2] as string, log: () => log, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

test("a real daemon: TCP without a key is 401 to everyone; its socket refuses another uid; through it, a cluster file with ProxyCommand is refused and runs nothing", { timeout: 120_000, skip: process.getuid?.() !== 0 ? "needs root (setpriv)" : false }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-trust-"));
  chmodSync(dir, 0o755);
  const marker = path.join(dir, "proxy-ran");
  const daemon = await realDaemon(dir);
  try {
    const body = (s: UpSubmission): string => JSON.stringify(s);
    const curl = (user: "root" | "nobody", args: string[]) => {
      const argv = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "20", ...args];
      return spawnSync(user === "root" ? argv[0] as string : "setpriv", user === "root" ? argv.slice(1) : [...SETPRIV, ...argv], { encoding: "utf8", timeout: 30_000 });
    };
    // TCP loopback, no key: refused to another uid and to the daemon's own alike.
    for (const user of ["nobody", "root"] as const) {
      const r = curl(user, ["-X", "POST", "-H", "content-type: application/json", "--data", body({ ref: "x" }), `http://127.0.0.1:${daemon.port}${CONTROL_PATHS.boots}`]);
      assert.match(r.stdout, /needs an admin key, and serve has none[\s\S]*\n401$/, `${user}: ${r.stdout}${r.stderr}`);
    }
    // The socket: another uid cannot even connect (its folder is 0700, the socket 0600).
    const theirs = curl("nobody", ["--unix-socket", daemon.socket, `http://localhost${CONTROL_PATHS.boots}`]);
    assert.notEqual(theirs.status, 0);
    assert.match(theirs.stderr, /Permission denied|Couldn't connect/i, theirs.stderr);
    // The daemon's own user goes through, and a cluster file setting ssh is refused at its line.
    const proxy = `name = "laptop"\n[ssh]\noptions = ["ProxyCommand=sh -c 'touch ${marker}'"]\n${NODES}`;
    const mine = curl("root", ["--unix-socket", daemon.socket, "-X", "POST", "-H", "content-type: application/json", "--data", body({ ref: "x", cluster_file: { file: "/home/me/laptop.toml", text: proxy } }), `http://localhost${CONTROL_PATHS.boots}`]);
    const lines = mine.stdout.trim().split("\n");
    assert.equal(lines.at(-1), "200", mine.stdout + mine.stderr);
    const events = lines.slice(0, -1).map((l) => decodeEvent(l)).filter((e): e is UpEvent => e !== undefined);
    const last = events.at(-1);
    assert.equal(last?.type, "error", mine.stdout);
    const e = decodeError((last as Extract<UpEvent, { type: "error" }>).error) as UserError;
    assert.match(e.diagnostics.map(formatDiagnostic).join("\n"), /^\/home\/me\/laptop\.toml:3:1: error: ssh\.options is not accepted in a cluster file sent to a daemon/m);
    // A path as the recipe: 400, the reference quoted and nothing read.
    const shadow = curl("root", ["--unix-socket", daemon.socket, "-X", "POST", "--data", body({ ref: "/etc/shadow" }), `http://localhost${CONTROL_PATHS.boots}`]);
    assert.match(shadow.stdout, /"code":"path_refused"[\s\S]*\n400$/);
    assert.doesNotMatch(shadow.stdout, /root:/);
    assert.doesNotMatch(daemon.log(), /accepted/);
    assert.equal(existsSync(marker), false, "ProxyCommand never ran");
  } finally {
    await daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
