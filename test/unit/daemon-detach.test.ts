import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { RemoteError } from "../../src/config/errors.js";
import type { Interrupted } from "../../src/config/abort.js";
import { BOOT_PHASES } from "../../src/contract/deployment.js";
import type { UpEvent, UpOutcome } from "../../src/boot/up-events.js";
import { BootRegistry, type BootRun } from "../../src/supervise/boots.js";
import { controlApi, type ControlOptions } from "../../src/daemon/control.js";
import { listenControlSocket, type ControlSocket } from "../../src/daemon/control-socket.js";

// `up --detach`, a client that detaches on SIGHUP, `attach` and `down NAME` through a daemon: the
// CLI run as a process (its signals, its exit status, its lines) against the daemon's own control
// API and boot registry in this process, whose boots are fake: they say their phases, then wait
// to be released (ready) or cancelled (rolled back, as the real one says it).

type Submission = Parameters<ControlOptions["submit"]>[0];

const MAIN = path.resolve("src/cli/main.ts");
const home = mkdtempSync(path.join(tmpdir(), "launcher-detach-"));
/** A home of its own: only the daemon advertised below is found, no store or cluster of this user. */
const { LAUNCHER_DAEMON: _ignored, ...inherited } = process.env;
const ENV = { ...inherited, NODE_OPTIONS: "", HOME: home, XDG_STATE_HOME: path.join(home, "state"), XDG_RUNTIME_DIR: path.join(home, "run"), XDG_CONFIG_HOME: path.join(home, "config"), CI: "true" };

interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Every CLI process started: one a failed check left running is killed at the end. */
const children = new Set<ReturnType<typeof spawn>>();

/** The CLI as a process: what it printed so far, and its end. */
function cli(args: readonly string[]): { child: ReturnType<typeof spawn>; stderr: () => string; done: Promise<Run> } {
  const child = spawn(process.execPath, ["--import", import.meta.resolve("tsx"), MAIN, ...args], { env: ENV });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Run>((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, stderr: () => stderr, done };
}

/** Resolves once `check` holds, polled every 20 ms; fails after `ms` naming `what`. */
async function until(what: string, check: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The boots' gates: release(name) makes that boot ready. */
const gates = new Map<string, () => void>();

/** A fake boot of `name`: it says what up says, each phase on n1 but the last, then waits. */
function fakeBoot(name: string, lane: string | undefined): BootRun {
  return async (emit: (e: UpEvent) => void, signal: AbortSignal): Promise<UpOutcome> => {
    if (lane !== undefined) emit({ type: "say", text: `launcher: putting ${name} in lane ${lane}`, t: Date.now() });
    for (const phase of BOOT_PHASES.slice(0, -1)) emit({ type: "node", node: "n1", state: { phase, figures: {}, ready: false, lastLines: [] }, t: Date.now() });
    await new Promise<void>((resolve, reject) => {
      gates.set(name, () => {
        emit({ type: "node", node: "n1", state: { phase: "serving", figures: {}, ready: true, lastLines: [] }, t: Date.now() });
        resolve();
      });
      // Cancelled: rolled back, in the words of a real boot's failure (src/boot/up.ts).
      signal.addEventListener("abort", () => reject(new RemoteError("launcher", `boot of ${name} failed: ${(signal.reason as Interrupted).message}`, `rolled back: removed 1 container (n1/launcher-${name}-r0)`)), { once: true });
    });
    return { status: "ready", deployment: name, endpoint: "http://10.0.0.1:8000", served_model: "practice", seconds: 2.5, boot: "0123456789ab" };
  };
}

const registry = new BootRegistry(Date.now);
const submitted: (Submission & { caller: string })[] = [];
let server: Server;
let socket: ControlSocket;
let url: string;

before(async () => {
  const handler = controlApi({
    // The owner's socket asks no key: here the same handler is also served on loopback TCP, as the unit tests of the API do.
    ownerSocket: true,
    registry,
    submit: (s, caller) => {
      submitted.push({ ...s, caller });
      const name = s.name ?? path.basename(s.ref);
      return registry.start({ deployment: name, cluster: "c", ...(s.lane === undefined ? {} : { lane: s.lane }) }, fakeBoot(name, s.lane));
    },
    maxBodyBytes: 1 << 20,
  });
  server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // This user's own daemon on this machine, as `launcher serve --control` advertises it: its
  // socket in a private runtime folder, and daemon.json in the state folder naming it.
  process.env.XDG_RUNTIME_DIR = ENV.XDG_RUNTIME_DIR;
  const state = path.join(ENV.XDG_STATE_HOME, "launcher");
  socket = await listenControlSocket(state, handler, 60_000);
  mkdirSync(state, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(state, "daemon.json"), JSON.stringify({ url, pid: process.pid, host: hostname(), socket: socket.path }), { mode: 0o600 });
});

after(async () => {
  for (const c of children) c.kill("SIGKILL");
  await registry.cancelAll("test over");
  await socket.close();
  server.close();
  server.closeAllConnections();
  rmSync(home, { recursive: true, force: true });
});

test("a client killed with SIGHUP mid-boot detaches (129); the boot (a lane's) goes on and becomes ready; attach shows it from its start", { timeout: 60_000 }, async () => {
  // No --daemon and no LAUNCHER_DAEMON: the CLI finds this user's daemon on this machine by itself.
  const client = cli(["up", "practice-2x", "--name", "hup", "--lane", "hup-lane"]);
  try {
    await until("the client shows the boot's first phase", () => new RegExp(`\\] n1 +${BOOT_PHASES[0]}\\b`).test(client.stderr()));
    client.child.kill("SIGHUP");
    const r = await client.done;
    assert.equal(r.code, 129, r.stderr);
    assert.match(r.stderr, /detached from the boot of hup; it goes on in the daemon at http:\/\/127\.0\.0\.1:\d+ \(launcher attach hup follows it/);
    assert.equal(registry.find("hup")?.running, true, "the boot goes on");
    assert.deepEqual([submitted.at(-1)?.lane, submitted.at(-1)?.caller], ["hup-lane", "owner"], "through the owner's socket");

    const attach = cli(["attach", "hup"]);
    await until("attach replays the boot", () => /launcher: putting hup in lane hup-lane/.test(attach.stderr()));
    gates.get("hup")?.();
    const attached = await attach.done;
    assert.equal(attached.code, 0, attached.stderr);
    assert.match(attached.stdout, /^hup is ready in \d+\.\d s: http:\/\/10\.0\.0\.1:8000\/v1 \(model "practice"\); lane hup-lane serves it\n$/);
    // From its start: the line said before anything started, and the phases up to the last.
    for (const phase of [BOOT_PHASES[0], BOOT_PHASES.at(-1)]) assert.match(attached.stderr, new RegExp(`\\] n1 +${phase as string}\\b`));
    const json = JSON.parse((await cli(["attach", "hup", "--json"]).done).stdout) as { status: string; deployment: string };
    assert.deepEqual([json.status, json.deployment], ["ready", "hup"]);
  } finally {
    client.child.kill("SIGKILL");
  }
});

test("up --detach prints the name and returns once accepted; down NAME cancels the boot in the daemon, and a follower sees up's failure", { timeout: 60_000 }, async () => {
  const r = await cli(["up", "practice-2x", "--name", "gone", "--detach", "--daemon", url]).done;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "gone\n");
  // The URL named is the local daemon's: reached through its socket, as its owner (no key asked).
  assert.equal(submitted.at(-1)?.caller, "owner");
  assert.ok((submitted.at(-1)?.recipes?.length ?? 0) > 0, "the recipe's files were sent");
  assert.equal(registry.find("gone")?.running, true, "the boot goes on in the daemon");

  const following = cli(["attach", "gone", "--daemon", url]);
  await until("attach follows gone", () => /\] n1 +starting/.test(following.stderr()));
  const down = await cli(["down", "gone", "--daemon", url]).done;
  assert.equal(down.code, 0, down.stderr);
  assert.match(down.stdout, /^cancelled the boot of gone in the daemon at http:\/\/127\.0\.0\.1:\d+: boot of gone failed: interrupted \(launcher down\)\n/);
  assert.match(down.stdout, /^rolled back: removed 1 container \(n1\/launcher-gone-r0\)$/m);
  assert.equal(registry.find("gone")?.running, false);
  const f = await following.done;
  assert.equal(f.code, 1, f.stderr);
  // One "launcher: " on the line: the failure is launcher's own, not a node's.
  assert.match(f.stderr, /^launcher: boot of gone failed: interrupted \(launcher down\)/m);
  assert.doesNotMatch(f.stderr, /launcher: launcher:/);

  // down --all: every boot in progress in the daemon is cancelled (and rolled back there) before
  // the nodes are cleared from here (which this test's home, with no cluster file, cannot do).
  ok(await cli(["up", "practice-2x", "--name", "gone-too", "--detach", "--daemon", url]).done, "up --detach gone-too");
  const all = await cli(["down", "--all", "--daemon", url]).done;
  assert.match(all.stderr, /^launcher: cancelled the boot of gone-too in the daemon at http:\/\/127\.0\.0\.1:\d+$/m);
  assert.equal(registry.find("gone-too")?.running, false);
});

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);
  return r;
}

test("up --detach with no daemon (--daemon none) is refused, saying how to run one", async () => {
  const r = await cli(["up", "practice-2x", "--detach", "--daemon", "none"]).done;
  assert.equal(r.code, 1);
  assert.match(r.stderr, /up --detach needs a daemon to run the boot: none is configured or running here/);
  assert.match(r.stderr, /launcher serve --control/);
  assert.doesNotMatch(r.stderr, /\n\s+at .*\.ts:\d+/);
});
