import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, constants, existsSync, openSync, readFileSync, rmdirSync, rmSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { createServer } from "node:net";
import path from "node:path";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { shellQuote } from "../config/shell-words.js";
import { checkFolder, ensureFolder, procUids, readSmallNoFollow } from "../config/private-dir.js";
import { formatRemoval, removeContainers } from "../nodes/down.js";
import { openSession } from "../nodes/session.js";
import { loadCluster } from "../app/this-process.js";
import { PACKAGE_ROOT } from "../config/package-info.js";
import { selfArgv } from "../app/environment.js";
import type { Output } from "../app/output.js";
import type { DaemonTarget } from "../daemon/client.js";
import { localDaemonFacts, localDaemonVerdict } from "../daemon/local-daemon.js";
import { runUp } from "./up.js";
import { runImagesBuild, runImagesPush } from "./images.js";
import { runModelsSync } from "./models.js";
import { askLink } from "./dashboard.js";
import { localDaemonFile } from "./daemon-target.js";

/**
 * The demo's folder: root's, and writable by nobody else (src/config/private-dir.ts), since root
 * reads a cluster file, a pid to signal and a log from it. Readable by others: the practice
 * hosts' login users reach their Docker sockets below it (test/rig/rig.sh chmods RIG_DIR 755).
 * The practice cluster lives in rig/ inside it: rig.sh removes and makes RIG_DIR again, which
 * must happen where nobody else can make that folder first. The daemon's admin key is in a
 * folder of its own inside it, closed to others (0700).
 */
const DEMO_DIR = "/tmp/launcher-demo";
const RIG_DIR = path.join(DEMO_DIR, "rig");
const CLUSTER = path.join(RIG_DIR, "cluster.toml");
const DAEMON_PID = path.join(DEMO_DIR, "serve.pid");
const DAEMON_LOG = path.join(DEMO_DIR, "serve.log");
const KEY_DIR = path.join(DEMO_DIR, "daemon");
const ADMIN_KEY_FILE = path.join(KEY_DIR, "admin.key");
const LANE = "chat";
const DEPLOYMENT = "practice-2x";
const WHAT = "the demo";
/** How long the daemon may take to start, and to stop once told (it stops its watchers and closes its store). */
const DAEMON_WAIT_MS = 30_000;
const POLL_MS = 200;

/**
 * The argv the demo starts its daemon with, after the program: what tells that daemon from any
 * other process. The admin key goes as its file's path, never itself (every user reads
 * /proc/PID/cmdline).
 */
export const daemonArgs = (listen: string, cluster: string, keyFile: string): string[] => ["serve", "--listen", listen, "--cluster", cluster, "--control", "--admin-key-file", keyFile];

/**
 * The argv tails that are the demo's daemon: today's, and the gateway without the control API
 * that a demo of an earlier launcher left running, which --down and a new demo must stop too.
 */
const DEMO_SHAPES = (cluster: string, keyFile: string): string[][] => [daemonArgs("", cluster, keyFile), ["serve", "--listen", "", "--cluster", cluster]];
const LISTEN_AT = 2;

/** What /proc says of a process: its uids (real, effective, saved, filesystem) and its argv. */
export interface ProcFacts {
  readonly uids: readonly number[];
  readonly argv: readonly string[];
}

// Linux's largest pid_max (proc(5) /proc/sys/kernel/pid_max: 2^22 on 64-bit systems).
const PID_MAX = 4_194_304;

/** serve.pid's text is untrusted: only a plain positive number is a pid (0 or -1 would signal a process group or every process). */
export function parsePid(text: string): number | undefined {
  const t = text.trim();
  if (!/^[1-9][0-9]{0,6}$/.test(t)) return undefined;
  const pid = Number(t);
  return pid <= PID_MAX ? pid : undefined;
}

/** Whether `argv` ends as one of the demo's daemons does, on a loopback port. */
function isDemoArgv(argv: readonly string[], cluster: string, keyFile: string): boolean {
  return DEMO_SHAPES(cluster, keyFile).some((want) => {
    const tail = argv.slice(-want.length);
    return tail.length === want.length && tail.every((a, i) => (i === LISTEN_AT ? /^127\.0\.0\.1:[0-9]{1,5}$/.test(a) : a === want[i]));
  });
}

/**
 * Whether process `pid` is the daemon this demo started, so that signalling it is safe: it must
 * be this user's alone (every uid /proc/PID/status lists) and its argv must end as the demo's
 * daemon's does. A pid reused by another process, or a planted one, is left alone.
 */
export function daemonToStop(pid: number, proc: ProcFacts | undefined, me: number, cluster: string, keyFile: string): { readonly pid: number } | { readonly leave: string } {
  if (proc === undefined) return { leave: `process ${pid} is gone` };
  if (proc.uids.length === 0 || proc.uids.some((u) => u !== me)) return { leave: `process ${pid} is not yours alone (uids ${proc.uids.join(" ")})` };
  if (!isDemoArgv(proc.argv, cluster, keyFile)) return { leave: `process ${pid} is not the demo's launcher serve` };
  return { pid };
}

/** Up to `max` bytes of a regular file, never through a symbolic link; undefined when there is none. */
function readSmall(file: string, max: number): string | undefined {
  let read: ReturnType<typeof readSmallNoFollow>;
  try {
    read = readSmallNoFollow(file, max);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`${WHAT}: ${file} cannot be opened (${code === "ELOOP" ? "it is a symbolic link" : code})`, `remove it (rm ${file}) and run again`);
  }
  if (read !== undefined && read.facts.kind !== "file") throw new UserError(`${WHAT}: ${file} is not a file`, `remove it and run again`);
  return read?.text;
}

/** /proc/PID's uids and argv, or undefined when there is no such process. */
function procFacts(pid: number): ProcFacts | undefined {
  const uids = procUids(pid);
  if (uids === undefined) return undefined;
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    if (argv.at(-1) === "") argv.pop();
    return { uids, argv };
  } catch {
    return undefined;
  }
}

/** 8080 when it is free, else any free loopback port. */
function freePort(preferred: number): Promise<number> {
  const attempt = (port: number): Promise<number | undefined> =>
    new Promise((resolve) => {
      const srv = createServer();
      srv.once("error", () => resolve(undefined));
      srv.listen(port, "127.0.0.1", () => {
        const addr = srv.address();
        srv.close(() => resolve(typeof addr === "object" && addr !== null ? addr.port : undefined));
      });
    });
  return attempt(preferred).then(async (p) => p ?? (await attempt(0)) ?? preferred);
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every POLL_MS until it gives a value or `ms` pass (undefined). */
async function until<T>(ms: number, check: () => Promise<T | undefined> | T | undefined): Promise<T | undefined> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined || Date.now() >= end) return v;
    await pause(POLL_MS);
  }
}

/**
 * Stops the daemon serve.pid names when it is the demo's, and waits (bounded) until it is gone:
 * its record of the local daemon and its control socket go with it. Its admin key goes too.
 */
async function stopDaemon(io: Output): Promise<void> {
  const text = readSmall(DAEMON_PID, 32);
  if (text !== undefined) {
    const pid = parsePid(text);
    const verdict = pid === undefined ? { leave: "it does not hold a process id" } : daemonToStop(pid, procFacts(pid), process.getuid?.() ?? -1, CLUSTER, ADMIN_KEY_FILE);
    if ("leave" in verdict) io.err(`${WHAT}: not stopping the daemon of ${DAEMON_PID}: ${verdict.leave}`);
    else await signalAndWait(verdict.pid, io);
    rmSync(DAEMON_PID, { force: true });
  }
  rmSync(KEY_DIR, { recursive: true, force: true });
}

async function signalAndWait(pid: number, io: Output): Promise<void> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return; // gone since /proc was read
  }
  const gone = await until(DAEMON_WAIT_MS, () => (procUids(pid) === undefined ? true : undefined));
  if (gone === undefined) io.err(`${WHAT}: the daemon (pid ${pid}) has not stopped ${DAEMON_WAIT_MS / 1000} s after SIGTERM; going on`);
}

/** The daemon's log, emptied or made: a link in its place is refused (O_NOFOLLOW), never written through. */
export function openDaemonLog(file: string): number {
  try {
    return openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`${WHAT}: ${file} cannot be written (${code === "ELOOP" ? "it is a symbolic link" : code})`, `remove it (rm ${file}) and run again`);
  }
}

/**
 * A new admin key (256 random bits, base64url) in a file made for it alone: mode 0600, and only
 * where nothing is (O_EXCL, O_NOFOLLOW), so neither a file nor a link planted there is written to.
 */
export function writeAdminKey(file: string): void {
  writeNewFile(file, `${randomBytes(32).toString("base64url")}\n`, "the admin key file");
}

/** `text` in a new file of mode 0600, made only where nothing is (O_EXCL, O_NOFOLLOW); its errors name it as `what`. */
function writeNewFile(file: string, text: string, what: string): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (e) {
    throw new UserError(`${WHAT}: ${what} ${file} cannot be made (${(e as NodeJS.ErrnoException).code})`, `remove it (rm ${file}) and run again`);
  }
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
}

/** Another daemon this user runs here, which the demo's would take the place of (its record and socket): refused. */
function refuseAnotherDaemon(): void {
  const facts = localDaemonFacts(localDaemonFile());
  if (facts === undefined || !("use" in localDaemonVerdict(facts, { uid: process.getuid?.() ?? -1, host: hostname() }))) return;
  throw new UserError(`${WHAT}: a launcher serve --control of yours already runs on this machine (pid ${facts.record.pid}, ${facts.record.url}); the demo's daemon would take its place`, `stop it (kill ${facts.record.pid}) and run the demo again`);
}

/** The demo's daemon as this user's CLI finds it (its record names the child's pid): through its socket. */
function advertisedBy(pid: number): { url: string; socket: string } | undefined {
  const facts = localDaemonFacts(localDaemonFile());
  if (facts?.record.pid !== pid) return undefined;
  const verdict = localDaemonVerdict(facts, { uid: process.getuid?.() ?? -1, host: hostname() });
  return "use" in verdict ? verdict.use : undefined;
}

const logTail = (): string => readFileSync(DAEMON_LOG, "utf8").trim().split("\n").slice(-10).join("\n");

/**
 * `launcher serve --control` in the background with a new admin key, so that the demo's boots
 * and its endpoint outlive the demo command; the target once it tells this user's CLI where it is.
 */
async function startDaemon(port: number): Promise<DaemonTarget> {
  ensureFolder(KEY_DIR, WHAT, "private");
  rmSync(ADMIN_KEY_FILE, { force: true });
  writeAdminKey(ADMIN_KEY_FILE);
  const log = openDaemonLog(DAEMON_LOG);
  const [program, ...args] = selfArgv(daemonArgs(`127.0.0.1:${port}`, CLUSTER, ADMIN_KEY_FILE));
  const child = spawn(program as string, args, { detached: true, stdio: ["ignore", log, log] });
  // A child that cannot be started has no pid and emits `error` (Node 24 docs, child_process,
  // subprocess.pid): the missing pid is said below, and the event must not end the demo unheard.
  child.once("error", () => undefined);
  closeSync(log);
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new UserError(`${WHAT}: launcher serve could not be started`, logTail());
  writeNewFile(DAEMON_PID, String(pid), "the daemon's pid file");
  const target = await until(DAEMON_WAIT_MS, () => (child.exitCode !== null ? null : advertisedBy(pid)));
  if (target === undefined || target === null) throw new UserError(`${WHAT}: the daemon did not come up`, logTail());
  return target;
}

/** Waits (bounded) until the gateway lists the lane as serving. */
async function waitServing(gateway: string): Promise<void> {
  const serving = await until(20_000, async () => {
    const models = await fetch(`${gateway}/v1/models`).then((r) => r.json() as Promise<{ data?: { id: string; status: string }[] }>, () => undefined);
    return models?.data?.some((m) => m.id === LANE && m.status === "serving") === true ? true : undefined;
  });
  if (serving === undefined) throw new UserError(`${WHAT}: the gateway does not list the lane ${LANE} as serving`, logTail());
}

function step(io: Output, what: string, program: string, args: string[]): void {
  io.err(`demo: ${what} ...`);
  const r = spawnSync(program, args, { cwd: PACKAGE_ROOT, env: { ...process.env, RIG_DIR }, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new UserError(`demo: ${what} failed`, (r.stderr || r.stdout).trim().split("\n").slice(-10).join("\n"));
}

/** The demo's folder once its daemon and practice cluster are gone: the daemon's log, then the folder when nothing else is in it. */
function removeDemoFolder(): void {
  rmSync(DAEMON_LOG, { force: true });
  try {
    rmdirSync(DEMO_DIR);
  } catch {
    // Something else is in it (or it is gone already): left as it is.
  }
}

async function demoDown(io: Output): Promise<void> {
  // Nothing is read from a folder that is not root's own: rig.sh too would signal pids found in it.
  const dir = checkFolder(DEMO_DIR, WHAT, "readable");
  // The daemon first: it would restart or adopt what is being removed.
  if (dir !== undefined) await stopDaemon(io);
  if (dir !== undefined && existsSync(CLUSTER)) {
    for (const line of formatRemoval(await removeContainers(await openSession(loadCluster(CLUSTER)), () => true, 5, true), "./scripts/demo --down", "per-container")) io.out(line);
  }
  step(io, "removing the practice cluster", "bash", ["test/rig/rig.sh", "down"]);
  if (dir !== undefined) removeDemoFolder();
  io.out("the demo is gone: its daemon and admin key, practice hosts, their daemons, users and files removed");
}

/** What the demo ends with: the chat's answer is said before; these are the next steps and the dashboard's link. */
export interface DemoEnding {
  /** The daemon's origin (the gateway and the page). */
  readonly gateway: string;
  /** The dashboard's one-time link (src/cli/dashboard.ts askLink). */
  readonly link: { readonly url: string; readonly expires_at: string };
  /** The prefix of the Node scripts/node-env fetched, when it did. */
  readonly fetchedNode?: string;
}

/** The demo's last lines: the commands to try, then the dashboard's link and how to get another. */
export function demoEnding(e: DemoEnding): string[] {
  const endpoint = `${e.gateway}/v1`;
  const port = new URL(e.gateway).port;
  return [
    "next, try:",
    // scripts/node-env fetched the Node this runs on: the shell these lines go to has an older one first.
    ...(e.fetchedNode === undefined || e.fetchedNode === "" ? [] : [`  export PATH=${shellQuote(path.join(e.fetchedNode, "bin"))}:"$PATH"`]),
    `  export LAUNCHER_CLUSTER=${CLUSTER}`,
    "  npx launcher top                # the cluster, live, in this terminal (q ends it)",
    "  npx launcher status",
    "  npx launcher lanes",
    "  npx launcher history",
    `  npx launcher logs ${DEPLOYMENT} --tail 20`,
    `  curl -s ${endpoint}/models`,
    `  curl -sN ${endpoint}/chat/completions -H 'content-type: application/json' -d '{"model":"${LANE}","stream":true,"messages":[{"role":"user","content":"hi"}]}'`,
    `  curl -s ${e.gateway}/metrics | grep launcher_gateway_requests`,
    "  npx launcher dashboard          # a new sign-in link for the page",
    `  npx launcher down ${DEPLOYMENT}`,
    "  ./scripts/demo --down           # remove the demo: its daemon, key and practice cluster",
    "",
    `the dashboard, served by the demo's daemon (launcher serve --control, log ${DAEMON_LOG}): open this sign-in link in a browser on this machine`,
    `(from another one: ssh -L ${port}:127.0.0.1:${port} THIS-MACHINE, then open it there). It works once and expires within a minute (${e.link.expires_at});`,
    "`npx launcher dashboard` prints a new one:",
    `  ${e.link.url}`,
  ];
}

/** Asks the practice engine a question through the gateway, and says its answer. */
async function chat(gateway: string, io: Output): Promise<void> {
  const endpoint = `${gateway}/v1`;
  const question = "Say hello to the practice cluster.";
  const res = await fetch(`${endpoint}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: LANE, max_tokens: 12, messages: [{ role: "user", content: question }] }),
    signal: AbortSignal.timeout(30_000),
  });
  const body = (await res.json()) as { choices?: { message?: { content?: string } }[] };
  io.out(`\nthrough the gateway ${endpoint}, model "${LANE}" (the lane; the recipe serves "practice"):`);
  io.out(`you:       ${question}`);
  io.out(`practice:  ${body.choices?.[0]?.message?.content?.trim() ?? JSON.stringify(body)}`);
  io.out(`           (the practice engine is a stand-in for vLLM: its words are deterministic, not a model's)\n`);
}

async function demoUp(io: Output): Promise<void> {
  ensureFolder(DEMO_DIR, WHAT, "readable");
  // A demo already up: its daemon goes before its practice cluster is made again under it.
  await stopDaemon(io);
  refuseAnotherDaemon();
  step(io, "checking dockerd, sshd and iproute2 (installing them if missing)", "bash", ["scripts/install-deps"]);
  step(io, "making 2 practice hosts (network namespaces with sshd and dockerd)", "bash", ["test/rig/rig.sh", "up", "2"]);
  io.err("demo: building the practice engine image (a stand-in for vLLM) on the head and pushing it to the other host ...");
  const practice = path.join(PACKAGE_ROOT, "recipes", DEPLOYMENT);
  await runImagesBuild(practice, { cluster: CLUSTER }, io);
  await runImagesPush(practice, { cluster: CLUSTER }, io);
  step(io, "putting a small practice model into n1's Hugging Face cache", "bash", ["test/rig/seed-model.sh", "1", String(4 << 20)]);
  io.err("demo: copying it to the other host (launcher models sync) ...");
  await runModelsSync(practice, { cluster: CLUSTER }, io);
  await removeContainers(await openSession(loadCluster(CLUSTER)), () => true, 2);
  io.err("demo: starting the daemon (launcher serve --control: the gateway, the boots and the dashboard) in the background ...");
  const daemon = await startDaemon(await freePort(8080));
  // Submitted to the daemon as `launcher up --daemon URL` is: the boot is the daemon's, this shows its progress.
  await runUp(practice, { cluster: CLUSTER, lane: LANE, daemon: daemon.url }, io);
  await waitServing(daemon.url);
  await chat(daemon.url, io);
  // Asked last: the link's minute starts as it is printed.
  const link = await askLink(daemon);
  const fetchedNode = process.env.LAUNCHER_NODE_PREFIX;
  for (const line of demoEnding({ gateway: daemon.url, link, ...(fetchedNode === undefined ? {} : { fetchedNode }) })) io.out(line);
}

export function registerDemo(program: Command, io: Output): void {
  program
    .command("demo")
    .description("make a 2-node practice cluster on this machine, start launcher serve --control on it, launch practice-2x in a lane through it, answer a chat request through the gateway and print the dashboard's sign-in link (root)")
    .option("--down", "remove the demo, its daemon and its practice cluster")
    .action(async (opts: { down?: boolean }) => {
      if (process.getuid?.() !== 0) throw new UserError("the demo makes network namespaces, users and Docker daemons: run it as root");
      return opts.down ? demoDown(io) : demoUp(io);
    });
}
