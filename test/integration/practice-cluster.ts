import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { after, before } from "node:test";
import path from "node:path";
import { shellJoin } from "../../src/config/shell-words.js";
import { runLocal } from "../../src/remote/transport.js";
import { SUPERVISOR_PHASES, type SupervisorPhase } from "../../src/deploy/supervise.js";

/** The practice cluster (test/rig/): real hosts in network namespaces, each with sshd and dockerd. */
export const RIG_DIR = process.env.LAUNCHER_TEST_RIG_DIR ?? "/tmp/launcher-test-rig";
export const CLUSTER = path.join(RIG_DIR, "cluster.toml");
const RIG = path.resolve("test/rig/rig.sh");
const MAIN = path.resolve("src/cli/main.ts");
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
 * Makes the practice hosts, then, as a user would: builds the practice engine on the head and
 * pushes it, and copies the practice model from the head to the others.
 */
export async function rigUp(nodes: number): Promise<void> {
  sh([RIG, "up", String(nodes)], `rig up ${nodes}`);
  seedModel(1, 1 << 20);
  for (const step of [["images", "build", "practice-2x"], ["images", "push", "practice-2x"], ["models", "sync", "practice-2x"]]) {
    const r = await launcher(step, 240_000);
    if (r.code !== 0) throw new Error(`launcher ${step.join(" ")} failed (${r.code}):\n${r.stderr}`);
  }
}

export function rigDown(): void {
  spawnSync("bash", [RIG, "down"], { env: rigEnv, encoding: "utf8", timeout: 240_000 });
}

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

// Benchmarks time the built CLI, as `npx launcher` runs it; tests run the sources.
const cliArgs = (): string[] => (process.env.LAUNCHER_USE_DIST === "1" ? [path.resolve("dist/cli/main.js")] : ["--import", import.meta.resolve("tsx"), MAIN]);

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
 * build's dist/cli/main.js (a bench comparing two builds side by side); default this tree's.
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
 * A test file's practice cluster of `hosts` hosts: made before its first test, and after its last
 * every launcher container stopped, the hosts removed and the file's temp folder (returned) deleted.
 */
export function practiceSuite(hosts: number, tmpPrefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
  before(() => rigUp(hosts), { timeout: 300_000 });
  after(async () => {
    await launcher(["down", "--all", "--grace", "1"]);
    rigDown();
    rmSync(dir, { recursive: true, force: true });
  }, { timeout: 300_000 });
  return dir;
}

/**
 * The phase of a daemon's /health `supervision` value ("<phase>[ (N restarts)]", src/deploy/supervisor.ts),
 * matched whole against the contract's list: a prefix test would let "ready-x" pass for "ready".
 */
export function supervisorPhase(value: string | undefined): SupervisorPhase | undefined {
  const word = value?.split(" ")[0];
  return SUPERVISOR_PHASES.find((p) => p === word);
}

/** The run, once it is known to have exited 0 (else the test fails with what it printed). */
export function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);
  return r;
}
