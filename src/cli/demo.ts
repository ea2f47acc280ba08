import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, existsSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
import { runUp } from "./up.js";
import { runImagesBuild, runImagesPush } from "./images.js";
import { runModelsSync } from "./models.js";

/**
 * The demo's folder: root's, and writable by nobody else (src/config/private-dir.ts), since root
 * reads a cluster file, a pid to signal and a log from it. Readable by others: the practice
 * hosts' login users reach their Docker sockets below it (test/rig/rig.sh chmods RIG_DIR 755).
 * The practice cluster lives in rig/ inside it: rig.sh removes and makes RIG_DIR again, which
 * must happen where nobody else can make that folder first.
 */
const DEMO_DIR = "/tmp/launcher-demo";
const RIG_DIR = path.join(DEMO_DIR, "rig");
const CLUSTER = path.join(RIG_DIR, "cluster.toml");
const GATEWAY_PID = path.join(DEMO_DIR, "serve.pid");
const GATEWAY_LOG = path.join(DEMO_DIR, "serve.log");
const LANE = "chat";
const WHAT = "the demo";

/** The argv the demo starts its gateway with, after the program: what tells that gateway from any other process. */
export const gatewayArgs = (listen: string, cluster: string): string[] => ["serve", "--listen", listen, "--cluster", cluster];

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

/**
 * Whether process `pid` is the gateway this demo started, so that signalling it is safe: it must
 * be this user's alone (every uid /proc/PID/status lists) and its argv must end as the demo's
 * gateway's does. A pid reused by another process, or a planted one, is left alone.
 */
export function gatewayToStop(pid: number, proc: ProcFacts | undefined, me: number, cluster: string): { readonly pid: number } | { readonly leave: string } {
  if (proc === undefined) return { leave: `process ${pid} is gone` };
  if (proc.uids.length === 0 || proc.uids.some((u) => u !== me)) return { leave: `process ${pid} is not yours alone (uids ${proc.uids.join(" ")})` };
  const tail = proc.argv.slice(-5);
  const want = gatewayArgs("", cluster);
  const same = tail.length === 5 && tail.every((a, i) => (i === 2 ? /^127\.0\.0\.1:[0-9]{1,5}$/.test(a) : a === want[i]));
  if (!same) return { leave: `process ${pid} is not the demo's launcher serve` };
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

function stopGateway(io: Output): void {
  const text = readSmall(GATEWAY_PID, 32);
  if (text === undefined) return;
  const pid = parsePid(text);
  const verdict = pid === undefined ? { leave: "it does not hold a process id" } : gatewayToStop(pid, procFacts(pid), process.getuid?.() ?? -1, CLUSTER);
  if ("leave" in verdict) io.err(`${WHAT}: not stopping the gateway of ${GATEWAY_PID}: ${verdict.leave}`);
  else {
    try {
      process.kill(verdict.pid, "SIGTERM");
    } catch {
      // gone since /proc was read
    }
  }
  rmSync(GATEWAY_PID, { force: true });
}

/** The gateway's log, emptied or made: a link in its place is refused (O_NOFOLLOW), never written through. */
export function openGatewayLog(file: string): number {
  try {
    return openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(`${WHAT}: ${file} cannot be written (${code === "ELOOP" ? "it is a symbolic link" : code})`, `remove it (rm ${file}) and run again`);
  }
}

/** `launcher serve` in the background, so that the demo's endpoint outlives the demo command. */
async function startGateway(port: number, io: Output): Promise<string> {
  stopGateway(io);
  const log = openGatewayLog(GATEWAY_LOG);
  const [program, ...args] = selfArgv(gatewayArgs(`127.0.0.1:${port}`, CLUSTER));
  const child = spawn(program as string, args, { detached: true, stdio: ["ignore", log, log] });
  closeSync(log);
  child.unref();
  writeFileSync(GATEWAY_PID, String(child.pid), { flag: "wx", mode: 0o600 });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const models = await fetch(`${url}/v1/models`).then((r) => r.json() as Promise<{ data?: { id: string; status: string }[] }>, () => undefined);
    if (models?.data?.some((m) => m.id === LANE && m.status === "serving")) return url;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new UserError("demo: the gateway did not come up", readFileSync(GATEWAY_LOG, "utf8").trim().split("\n").slice(-10).join("\n"));
}

function step(io: Output, what: string, program: string, args: string[]): void {
  io.err(`demo: ${what} ...`);
  const r = spawnSync(program, args, { cwd: PACKAGE_ROOT, env: { ...process.env, RIG_DIR }, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new UserError(`demo: ${what} failed`, (r.stderr || r.stdout).trim().split("\n").slice(-10).join("\n"));
}

async function demoDown(io: Output): Promise<void> {
  // Nothing is read from a folder that is not root's own: rig.sh too would signal pids found in it.
  const dir = checkFolder(DEMO_DIR, WHAT, "readable");
  if (dir !== undefined) stopGateway(io);
  if (dir !== undefined && existsSync(CLUSTER)) {
    for (const line of formatRemoval(await removeContainers(await openSession(loadCluster(CLUSTER)), () => true, 5, true), "./scripts/demo --down", "per-container")) io.out(line);
  }
  step(io, "removing the practice cluster", "bash", ["test/rig/rig.sh", "down"]);
  io.out("the demo is gone: practice hosts, daemons, users and files removed");
}

export function registerDemo(program: Command, io: Output): void {
  program
    .command("demo")
    .description("make a 2-node practice cluster on this machine, launch practice-2x in a lane, answer a chat request through the gateway (root)")
    .option("--down", "remove the demo and its practice cluster")
    .action(async (opts: { down?: boolean }) => {
      if (process.getuid?.() !== 0) throw new UserError("the demo makes network namespaces, users and Docker daemons: run it as root");
      if (opts.down) return demoDown(io);
      ensureFolder(DEMO_DIR, WHAT, "readable");
      step(io, "checking dockerd, sshd and iproute2 (installing them if missing)", "bash", ["scripts/install-deps"]);
      step(io, "making 2 practice hosts (network namespaces with sshd and dockerd)", "bash", ["test/rig/rig.sh", "up", "2"]);
      io.err("demo: building the practice engine image (a stand-in for vLLM) on the head and pushing it to the other host ...");
      const practice = path.join(PACKAGE_ROOT, "recipes", "practice-2x");
      await runImagesBuild(practice, { cluster: CLUSTER }, io);
      await runImagesPush(practice, { cluster: CLUSTER }, io);
      step(io, "putting a small practice model into n1's Hugging Face cache", "bash", ["test/rig/seed-model.sh", "1", String(4 << 20)]);
      io.err("demo: copying it to the other host (launcher models sync) ...");
      await runModelsSync(practice, { cluster: CLUSTER }, io);
      const cluster = loadCluster(CLUSTER);
      const session = await openSession(cluster);
      await removeContainers(session, () => true, 2);
      await runUp(practice, { cluster: CLUSTER, lane: LANE }, io);
      io.err("demo: starting the gateway (launcher serve) in the background ...");
      const gateway = await startGateway(await freePort(8080), io);
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
      io.out("next, try:");
      // scripts/node-env fetched the Node this runs on: the shell these lines go to has an older one first.
      const fetchedNode = process.env.LAUNCHER_NODE_PREFIX;
      if (fetchedNode !== undefined && fetchedNode !== "") io.out(`  export PATH=${shellQuote(path.join(fetchedNode, "bin"))}:"$PATH"`);
      io.out(`  export LAUNCHER_CLUSTER=${CLUSTER}`);
      io.out("  npx launcher status");
      io.out("  npx launcher lanes");
      io.out("  npx launcher history");
      io.out("  npx launcher logs practice-2x --tail 20");
      io.out(`  curl -s ${endpoint}/models`);
      io.out(`  curl -sN ${endpoint}/chat/completions -H 'content-type: application/json' -d '{"model":"${LANE}","stream":true,"messages":[{"role":"user","content":"hi"}]}'`);
      io.out(`  curl -s ${gateway}/metrics | grep launcher_gateway_requests`);
      io.out("  npx launcher down practice-2x");
      io.out("  ./scripts/demo --down          # remove the practice cluster");
    });
}
