import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { after, before } from "node:test";
import path from "node:path";
import { shellJoin } from "../../src/config/shell-words.js";
import { cliArgs } from "../built-cli.js";
import { runLocal } from "../../src/remote/transport.js";
import { Store, type RestartRecord } from "../../src/store/store.js";
import { SUPERVISOR_PHASES, type SupervisorPhase } from "../../src/supervise/supervise.js";

/** The practice cluster (test/rig/): real hosts in network namespaces, each with sshd and dockerd. */
export const RIG_DIR = process.env.LAUNCHER_TEST_RIG_DIR ?? "/tmp/launcher-test-rig";
export const CLUSTER = path.join(RIG_DIR, "cluster.toml");
const RIG = path.resolve("test/rig/rig.sh");
const rigEnv = { ...process.env, RIG_DIR };

function sh(args: string[], what: string): void {
  const r = spawnSync("bash", args, { env: rigEnv, encoding: "utf8", timeout: 240_000 });
  if (r.status !== 0) throw new Error(`${what} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

export const PRACTICE_REVISION = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";

/** Puts the practice recipes' model (practice/tiny-moe), or another repo, into host i's Hugging Face cache. */
export function seedModel(i: number, bytes: number, repo = "models--practice--tiny-moe"): void {
  sh([path.resolve("test/rig/seed-model.sh"), String(i), String(bytes), repo, PRACTICE_REVISION], `seed-model n${i}`);
}

/**
 * `npm run test:rig` sets LAUNCHER_RIG_REUSE=1: its files then share one rig of REUSE_HOSTS hosts,
 * made by the first file that wants it and reset between files, and every rig of the run gets the
 * practice image from IMAGE_ARCHIVE (test/rig-suite.ts removes both when the run ends). Unset, as
 * when a file runs alone, each file makes its hosts and removes them.
 */
const REUSE = process.env.LAUNCHER_RIG_REUSE === "1";

/**
 * Under LAUNCHER_RIG_REUSE=1, the practice engine's image as the run's first rig built it (a
 * `docker save` of n1's): later rigs load it on each host instead of building and pushing it
 * again; the files that test `images build` and `push` still do both themselves. Beside RIG_DIR,
 * not in it: `rig.sh up` and `down` remove RIG_DIR.
 */
export const IMAGE_ARCHIVE = `${RIG_DIR}-practice-engine.tar`;

const launcherStep = async (step: string[]): Promise<void> => {
  const r = await launcher(step, 240_000);
  if (r.code !== 0) throw new Error(`launcher ${step.join(" ")} failed (${r.code}):\n${r.stderr}`);
};

/**
 * Makes the practice hosts, then, as a user would: builds the practice engine on the head and
 * pushes it (or loads this run's archive of it on each host), and copies the practice model from
 * the head to the others. `sshOptions`: put in the cluster file's [ssh] section before any of
 * that, so every ssh connection launcher opens to the hosts has them (SuiteOptions.sshOptions).
 */
export async function rigUp(nodes: number, sshOptions?: readonly string[]): Promise<void> {
  sh([RIG, "up", String(nodes)], `rig up ${nodes}`);
  if (sshOptions !== undefined) writeFileSync(CLUSTER, withSshOptions(readFileSync(CLUSTER, "utf8"), sshOptions));
  seedModel(1, 1 << 20);
  const archived = REUSE && existsSync(IMAGE_ARCHIVE);
  if (archived) await Promise.all(hostIndexes(nodes).map((i) => sshFile(i, ["docker", "load", "--quiet"], { stdin: IMAGE_ARCHIVE })));
  else for (const step of [["images", "build", "practice-2x"], ["images", "push", "practice-2x"]]) await launcherStep(step);
  await launcherStep(["models", "sync", "practice-2x"]);
  if (REUSE && !archived) {
    // Written aside and renamed: a run killed mid-save leaves no partial archive for the next rig.
    await sshFile(1, ["docker", "save", "practice-engine:local"], { stdout: `${IMAGE_ARCHIVE}.part` });
    renameSync(`${IMAGE_ARCHIVE}.part`, IMAGE_ARCHIVE);
  }
}

const hostIndexes = (n: number): number[] => Array.from({ length: n }, (_, k) => k + 1);

/** `ssh lnch-n<i> COMMAND` with its stdin read from, or its stdout written to, a local file; bounded (4 min). */
function sshFile(i: number, command: string[], io: { readonly stdin?: string; readonly stdout?: string }): Promise<void> {
  const input = io.stdin === undefined ? "ignore" : openSync(io.stdin, "r");
  const output = io.stdout === undefined ? "ignore" : openSync(io.stdout, "w");
  const child = spawn("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), `lnch-n${i}`, "--", shellJoin(command)], { stdio: [input, output, "pipe"] });
  // The child has its own copies of the descriptors.
  for (const fd of [input, output]) if (typeof fd === "number") closeSync(fd);
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 240_000);
  return new Promise((resolve, reject) => {
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`ssh lnch-n${i} ${command.join(" ")}: exit ${code}: ${stderr}`));
    });
  });
}

export function rigDown(): void {
  spawnSync("bash", [RIG, "down"], { env: rigEnv, encoding: "utf8", timeout: 240_000 });
}

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}


// Each test run keeps its own state store, inside the rig's folder.
export const STATE_HOME = path.join(RIG_DIR, "state");
// `practice: false`: neither, for a test that needs no practice host.
const cliEnv = (practice = true): NodeJS.ProcessEnv => ({ ...process.env, ...(practice ? { LAUNCHER_CLUSTER: CLUSTER, XDG_STATE_HOME: STATE_HOME } : {}), NODE_OPTIONS: "", CI: "true" });

export interface LauncherOptions {
  /** Where it runs; default this process's folder. */
  readonly cwd?: string;
  /** false: not pointed at the practice cluster nor this run's state store (default true). */
  readonly practice?: boolean;
}

/** Runs the real CLI as a user would, bounded in time. */
export function launcher(args: string[], timeoutMs = 120_000, env: NodeJS.ProcessEnv = {}, options: LauncherOptions = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...cliArgs(), ...args], { env: { ...cliEnv(options.practice), ...env }, ...(options.cwd === undefined ? {} : { cwd: options.cwd }) });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Starts the CLI and hands back the process, for tests that signal it. With `hostname`, it runs as
 * another machine would: in its own UTS namespace under that name (unshare(1) without --fork
 * execs, so the pid is the CLI's), so a claim it leaves is not one this machine can check by pid.
 */
export function launcherProcess(args: string[], env: NodeJS.ProcessEnv = {}, hostname?: string, main?: string) {
  const argv = [process.execPath, ...(main === undefined ? cliArgs() : [main]), ...args];
  const [command, ...rest] = hostname === undefined ? argv : ["unshare", "--uts", "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh", hostname, ...argv];
  return spawn(command as string, rest, { env: { ...cliEnv(), ...env } });
}

/** Starts `launcher ARGS` and resolves once its stderr matches `ready`; the caller signals it. */
export async function launcherUntil(args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}) {
  const child = launcherProcess(args, env);
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
  try {
    await within(60_000, `launcher ${args.join(" ")} printing ${ready}`, async () => (ready.test(stderr) ? true : undefined));
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${(e as Error).message}\n${stderr}`);
  }
  return { child, closed, stderr: () => stderr };
}

export interface Daemon {
  readonly url: string;
  /** Everything it printed on stderr so far. */
  log(): string;
  /** SIGTERM (SIGKILL 15 s later), or the signal given: SIGKILL is a `kill -9`, as a crash. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `launcher serve` on a free loopback port and waits until it listens. `main`: another
 * build's main.js (builtMain: a bench comparing two builds side by side); default this tree's.
 */
export function startGateway(args: string[] = [], env: NodeJS.ProcessEnv = {}, main?: string): Promise<Daemon> {
  const child = launcherProcess(["serve", "--listen", "127.0.0.1:0", "--poll", "1s", ...args], env, undefined, main);
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`launcher serve did not start in 30 s:\n${stderr}`));
    }, 30_000);
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      const m = /listening on http:\/\/([\d.]+):(\d+)\/v1/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({
          // Reached over loopback whatever it listens on.
          url: `http://127.0.0.1:${m[2] as string}`,
          log: () => stderr,
          stop: async (signal = "SIGTERM") => {
            if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
            child.kill(signal);
            const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
            const code = await exited;
            clearTimeout(t);
            return code;
          },
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`launcher serve exited with ${code}:\n${stderr}`));
    });
  });
}

/**
 * Slows this machine's side of host i's links (`m`: management, which SSH and the relay use;
 * `f`: the fabric, which node-to-node transfers use) with the tc qdisc given; returns the undo.
 * `replace`, not `add`: a qdisc left by a run killed before its undo would make `add` fail.
 */
export function slowLinks(i: number, links: readonly ("m" | "f")[], qdisc: readonly string[]): () => void {
  const devs = links.map((l) => `lnch${l}${i}`);
  const undo = (): void => {
    for (const dev of devs) spawnSync("tc", ["qdisc", "del", "dev", dev, "root"], { encoding: "utf8" });
  };
  for (const dev of devs) {
    const r = spawnSync("tc", ["qdisc", "replace", "dev", dev, "root", ...qdisc], { encoding: "utf8" });
    if (r.status !== 0) undo();
    assert.equal(r.status, 0, `tc qdisc replace dev ${dev}: ${r.stderr}`);
  }
  return undo;
}

/** Polls `check` every 100 ms until it returns a value, or fails after `ms`. */
export async function within<T>(ms: number, what: string, check: () => Promise<T | undefined>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  let last: unknown;
  for (let i = 0; i < Math.ceil(ms / 100) + 1; i++) {
    try {
      const v = await check();
      if (v !== undefined) return { value: v, ms: Date.now() - start };
    } catch (e) {
      last = e;
    }
    if (Date.now() - start > ms) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within ${ms} ms${last === undefined ? "" : ` (last error: ${String(last)})`}`);
}

/** Runs a command on practice host `n<i>` over the rig's SSH config (a plain login, as an operator would): its exit status and output, whatever they are. */
export function onHostRun(i: number, argv: string[], input = "", timeoutMs = 30_000): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), `lnch-n${i}`, "--", shellJoin(argv)], { encoding: "utf8", input, timeout: timeoutMs });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** onHostRun for a command that must succeed: its stdout. */
export function onHost(i: number, argv: string[]): string {
  const r = onHostRun(i, argv);
  if (r.code !== 0) throw new Error(`ssh lnch-n${i} ${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

/** onHost as a promise, for commands on several hosts at once (a bench timing them side by side). */
export async function onHostAsync(i: number, argv: string[], timeoutMs = 600_000): Promise<string> {
  const r = await runLocal("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), `lnch-n${i}`, "--", shellJoin(argv)], { timeoutMs });
  if (r.code !== 0) throw new Error(`ssh lnch-n${i} ${argv.slice(0, 3).join(" ")}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Every launcher container on every host, as `n<i>:name:state`. */
export function launcherContainers(hosts: number): string[] {
  const out: string[] = [];
  for (let i = 1; i <= hosts; i++) {
    for (const line of onHost(i, ["docker", "ps", "-a", "--filter", "label=launcher.deployment", "--format", "{{.Names}}:{{.State}}"]).split("\n")) {
      if (line.trim()) out.push(`n${i}:${line.trim()}`);
    }
  }
  return out.sort();
}

/** A variant recipe of a practice recipe, in a temp folder: "the same config plus ...". */
export function variant(dir: string, name: string, parent: string, body: string): string {
  const folder = path.join(dir, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "recipe.toml"), `extends = "${path.resolve("recipes", parent, "recipe.toml")}"\n${body}`);
  return folder;
}

/**
 * The folder of the rig files that get hosts of their own: each damages its hosts (cuts or slows
 * links, changes the MTU, removes the practice image), makes its own rig (a bare one), or needs
 * hosts made after its own set-up (a mount their sshd must see). Such a file gets hosts made for
 * it, removed after it, so the shared rig must be made again after it. Node's test runner runs
 * files in the order of their sorted paths (--test-concurrency=1), so the files of one folder run
 * one after another: the shared rig is made again once after them all, not once after each. A
 * reset checks for damage too and makes the hosts again if it finds some, but a file should not
 * count on it.
 */
export const FRESH_HOSTS_DIR = path.resolve("test/integration/fresh-hosts");

/**
 * Whether this process's test file (node --test runs each file as the program) is in
 * FRESH_HOSTS_DIR, and so gets hosts of its own rather than the shared rig.
 */
const inFreshHostsDir = (): boolean => process.argv[1] !== undefined && path.dirname(path.resolve(process.argv[1])) === FRESH_HOSTS_DIR;

/** How a test file uses the practice cluster. */
export interface SuiteOptions {
  /**
   * ssh -o options the file's cluster file adds in its [ssh] section (QUICK_SILENCE_SSH: a file
   * that cuts links, so that ssh gives up on a silent host in seconds rather than in 10-15).
   * The file then gets hosts made for it, as a file in FRESH_HOSTS_DIR does.
   */
  readonly sshOptions?: readonly string[];
}

/** Throws for sshOptions in a file outside FRESH_HOSTS_DIR: their connections would meet the shared rig's hosts. */
function refuseSharedSshOptions(options: SuiteOptions): void {
  if (options.sshOptions !== undefined && !inFreshHostsDir()) throw new Error(`practice cluster: a file with sshOptions gets hosts of its own; put it in ${path.relative(".", FRESH_HOSTS_DIR)}/`);
}

/**
 * How soon ssh gives up on a host gone silent, for a file that cuts management links: a new
 * connection after 3 s (ConnectTimeout), an open one after 3 unanswered keepalives 1 s apart
 * (ServerAliveInterval x ServerAliveCountMax; ssh_config(5)). With launcher's own, 10 s and 5 s x 3
 * (src/remote/ssh.ts), each SSH round that met a cut link cost the test 10-15 s. sshArgs passes a
 * cluster file's [ssh] options before its own, and ssh keeps the first value it obtains for each
 * (ssh_config(5): "the first obtained value will be used"). The rig's hosts are on this machine's
 * bridge: a host that answers does so well within these, also on a loaded machine.
 */
export const QUICK_SILENCE_SSH = ["ConnectTimeout=3", "ServerAliveInterval=1", "ServerAliveCountMax=3"] as const;

/** A cluster file's text with `options` set in its [ssh] section (the rig's file has one, without options). Pure. */
export function withSshOptions(toml: string, options: readonly string[]): string {
  if (!/^\[ssh\]$/m.test(toml) || /^options\s*=/m.test(toml)) throw new Error("practice cluster file: expected an [ssh] section without options");
  // JSON's string form of these plain ASCII words is also TOML's basic string.
  return toml.replace(/^\[ssh\]$/m, `[ssh]\noptions = [${options.map((o) => JSON.stringify(o)).join(", ")}]`);
}

/** The most hosts a reusing file asks for: one rig of this many serves them all. */
export const REUSE_HOSTS = 4;
/** What each host was once the rig was made; inside RIG_DIR, so `rig.sh up` and `down` remove it with the rig. */
const MADE = path.join(RIG_DIR, "suite-made.json");

/** A host as HOST_STATE reports it. */
export interface HostState {
  /** The practice image's ID, or "none". */
  readonly image: string;
  readonly containers: number;
  /** A digest of the home's paths, file sizes and mtimes and link targets (launcher's own cache excepted). */
  readonly home: string;
}

/** The rig as it was made: its hosts' states and the paths of each host's home. */
export interface MadeRig {
  readonly hosts: number;
  readonly states: readonly HostState[];
  readonly paths: readonly (readonly string[])[];
}

// Runs on a practice host as its user (`bash -c`; its $1 is the mode). `clean` first removes what
// the rig did not have when it was made: every container and volume, every image but the practice
// engine's, and every path of the home that is not in the sorted list on stdin (launcher's claims,
// caches and trust marks there included). Both modes then print the host's state; `look` also
// lists the home's paths. Contents are not read: a file written since has a new mtime. Files under
// ~/.cache/launcher/ are left out of the digest: launcher rewrites its own claims file there on every
// up, and a stale claim is one launcher takes over (src/claims/claims.ts).
const HOST_STATE = String.raw`set -u
export LC_ALL=C
cd "$HOME" || exit 1
if [ "$1" = clean ]; then
  docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1
  docker volume prune -f >/dev/null 2>&1
  docker images --format '{{.Repository}}:{{.Tag}}' | grep -vxF -e practice-engine:local -e '<none>:<none>' | xargs -r docker rmi >/dev/null 2>&1
  docker images -q --filter dangling=true | xargs -r docker rmi -f >/dev/null 2>&1
  comm -13 /dev/stdin <(find . -mindepth 1 -printf '%P\n' | sort) | xargs -r -d '\n' rm -rf --
fi
id=$(docker image inspect -f '{{.Id}}' practice-engine:local 2>/dev/null) || id=""
[ -n "$id" ] || id=none
echo "image $id"
echo "containers $(docker ps -aq | wc -l)"
echo "home $(find . -mindepth 1 -path ./.cache/launcher -prune -o \( -type l -printf 'l %P %l\n' \) -o \( -type f -printf 'f %P %s %T@\n' \) -o \( -type d -printf 'd %P\n' \) | sort | sha256sum | cut -c1-64)"
if [ "$1" = look ]; then echo paths; find . -mindepth 1 -printf '%P\n' | sort; fi
`;

/** HOST_STATE's output: the state, and the home's paths when it listed them. Pure. */
export function parseHostState(out: string): { state: HostState; paths: string[] } | undefined {
  const [head, list] = out.split(/^paths\n/m) as [string, string | undefined];
  const field = (name: string): string | undefined => new RegExp(`^${name} (\\S+)$`, "m").exec(head)?.[1];
  const [image, containers, home] = [field("image"), field("containers"), field("home")];
  if (image === undefined || containers === undefined || home === undefined) return undefined;
  return { state: { image, containers: Number(containers), home }, paths: (list ?? "").split("\n").filter((p) => p !== "") };
}

/**
 * Why the rig made as `made` cannot serve a file of `hosts` hosts, its hosts now being `now`
 * (undefined: not answering) and this machine's side of their links `links` (problems found);
 * undefined when it can. Pure.
 */
export function whyNotReuse(made: MadeRig | undefined, hosts: number, now: readonly (HostState | undefined)[], links: readonly string[]): string | undefined {
  if (made === undefined) return "none made for reuse";
  if (made.hosts < hosts) return `it has ${made.hosts} hosts, not ${hosts}`;
  if (links.length > 0) return links.join("; ");
  for (const [i, want] of made.states.entries()) {
    const got = now[i];
    if (got === undefined) return `n${i + 1} did not answer`;
    if (got.image !== want.image) return `n${i + 1}'s practice image is ${got.image}, not ${want.image}`;
    if (got.containers !== 0) return `n${i + 1} still has ${got.containers} containers`;
    if (got.home !== want.home) return `n${i + 1}'s home differs from when the rig was made`;
  }
  return undefined;
}

/** Problems of this machine's side of host i's links and of its fabric port: down, slowed, or an MTU other than the rig's. */
function linkProblems(i: number): string[] {
  const problems: string[] = [];
  const run = (argv: string[]): string => spawnSync(argv[0] as string, argv.slice(1), { encoding: "utf8", timeout: 10_000 }).stdout ?? "";
  for (const dev of [`lnchm${i}`, `lnchf${i}`]) {
    if (!/state UP/.test(run(["ip", "-o", "link", "show", "dev", dev]))) problems.push(`${dev} is not up`);
    if (/\b(tbf|netem|htb)\b/.test(run(["tc", "qdisc", "show", "dev", dev]))) problems.push(`${dev} is slowed`);
  }
  if (!/mtu 9000 .*state UP/.test(run(["ip", "-n", `lnch-n${i}`, "-o", "link", "show", "dev", "enp1s0f1np1"]))) problems.push(`n${i}'s fabric port is not up at MTU 9000`);
  return problems;
}

/** HOST_STATE on host i, bounded; undefined when the host does not answer. */
async function hostState(i: number, mode: "clean" | "look", paths: readonly string[] = []): Promise<{ state: HostState; paths: string[] } | undefined> {
  const script = ["bash", "-c", HOST_STATE, "bash", mode];
  const r = await runLocal("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), `lnch-n${i}`, "--", shellJoin(script)], { timeoutMs: 60_000, stdin: paths.map((p) => `${p}\n`).join("") });
  return r.code === 0 ? parseHostState(r.stdout) : undefined;
}

function readMade(): MadeRig | undefined {
  return existsSync(MADE) ? (JSON.parse(readFileSync(MADE, "utf8")) as MadeRig) : undefined;
}

/** Resets the shared rig for a file of `hosts` hosts; the reason when it cannot serve it. */
async function resetRig(hosts: number): Promise<string | undefined> {
  const made = readMade();
  if (made === undefined || made.hosts < hosts) return whyNotReuse(made, hosts, [], []);
  const links = hostIndexes(made.hosts).flatMap(linkProblems);
  const now = await Promise.all(hostIndexes(made.hosts).map((i) => hostState(i, "clean", made.paths[i - 1]).then((s) => s?.state)));
  rmSync(STATE_HOME, { recursive: true, force: true });
  return whyNotReuse(made, hosts, now, links);
}

/** Makes the shared rig and records what its hosts are. */
async function makeSharedRig(): Promise<void> {
  await rigUp(REUSE_HOSTS);
  const looks = await Promise.all(hostIndexes(REUSE_HOSTS).map((i) => hostState(i, "look")));
  const made = { hosts: REUSE_HOSTS, states: [] as HostState[], paths: [] as string[][] };
  for (const [k, look] of looks.entries()) {
    if (look === undefined) throw new Error(`practice cluster: n${k + 1} did not report its state once made`);
    made.states.push(look.state);
    made.paths.push(look.paths);
  }
  writeFileSync(MADE, JSON.stringify(made satisfies MadeRig));
}

/**
 * Gets the practice cluster ready for a test file of `hosts` hosts: under LAUNCHER_RIG_REUSE=1
 * (and unless it gets hosts of its own: inFreshHostsDir), the shared rig reset when it can be, else
 * made; otherwise made for this file alone. Either way its cluster file names the first `hosts`
 * hosts and the state folder is new.
 */
export async function suiteUp(hosts: number, options: SuiteOptions = {}): Promise<void> {
  // With sshOptions, fresh hosts too: ssh's shared connections to a reused rig's hosts, which
  // launcher keeps open 60 s past their last use (ControlPersist, src/remote/ssh.ts), were opened
  // without them, and a connection keeps the options it was opened with.
  refuseSharedSshOptions(options);
  if (!REUSE || inFreshHostsDir() || hosts > REUSE_HOSTS) return rigUp(hosts, options.sshOptions);
  const why = await resetRig(hosts);
  if (why !== undefined) {
    process.stderr.write(`practice cluster: making ${REUSE_HOSTS} hosts to share (not reused: ${why})\n`);
    await makeSharedRig();
  }
  sh([RIG, "cluster", String(hosts)], `rig cluster ${hosts}`);
}

/**
 * After a test file: no deployment left, and the hosts removed unless the next file may reuse
 * them. Under LAUNCHER_RIG_REUSE=1 the next file's reset or `rig.sh down` removes every container
 * anyway, so `launcher down --all` (a CLI start and an SSH round per host) is left out there.
 */
export async function suiteDown(): Promise<void> {
  if (!REUSE) await launcher(["down", "--all", "--grace", "1"]);
  if (!REUSE || inFreshHostsDir()) rigDown();
}

/**
 * A test file's practice cluster of `hosts` hosts (suiteUp) before its first test, and after its
 * last every launcher container stopped, the hosts removed or left to reuse (suiteDown) and the
 * file's temp folder (returned) deleted.
 */
export function practiceSuite(hosts: number, tmpPrefix: string, options: SuiteOptions = {}): string {
  refuseSharedSshOptions(options);
  const dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
  before(() => suiteUp(hosts, options), { timeout: 300_000 });
  after(async () => {
    await suiteDown();
    rmSync(dir, { recursive: true, force: true });
  }, { timeout: 300_000 });
  return dir;
}

/**
 * The phase of a daemon's /health `supervision` value ("<phase>[ (N restarts)]", src/supervise/supervisor.ts),
 * matched whole against the contract's list: a prefix test would let "ready-x" pass for "ready".
 */
export function supervisorPhase(value: string | undefined): SupervisorPhase | undefined {
  const word = value?.split(" ")[0];
  return SUPERVISOR_PHASES.find((p) => p === word);
}

/** A deployment as `launcher status --json` lists it. */
export interface ListedDeployment {
  readonly deployment: string;
  readonly engine?: string;
  readonly status: string;
  readonly phase: string;
  readonly fault?: string;
  readonly endpoint: string;
}
/** The deployment `deployment` as `launcher status --json` lists it now (with `env`), if it does. */
export async function listed(deployment: string, env: NodeJS.ProcessEnv = {}): Promise<ListedDeployment | undefined> {
  const r = ok(await launcher(["status", "--json"], 120_000, env), "status --json");
  return (JSON.parse(r.stdout) as { deployments: ListedDeployment[] }).deployments.find((d) => d.deployment === deployment);
}

/** The run, once it is known to have exited 0 (else the test fails with what it printed). */
export function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);
  return r;
}

/** A deployment's restarts, newest first (at most 20), as this run's state store holds them. */
export function storedRestarts(deployment: string): RestartRecord[] {
  const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
  try {
    return store.restarts(deployment, 20);
  } finally {
    store.close();
  }
}
