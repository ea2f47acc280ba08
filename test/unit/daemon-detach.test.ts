import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import type { Cluster } from "../../src/cluster/cluster.js";
import { BOOT_PHASES, LABELS } from "../../src/contract/deployment.js";
import { environmentOf, type Environment } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { Store } from "../../src/store/store.js";
import { bootSubmitter } from "../../src/daemon/boots-host.js";
import { controlApi, type ControlOptions } from "../../src/daemon/control.js";
import { listenControlSocket, type ControlSocket } from "../../src/daemon/control-socket.js";
import { until } from "../support/until.js";
import { FakeCluster, HEAD_WAITING, RECIPE, WORKER_CONNECTED } from "../support/fake-cluster.js";
import { cliArgs } from "../built-cli.js";

// `up --detach`, a client that detaches on SIGHUP, `attach` and `down NAME` through a daemon: the
// CLI run as a process (its signals, its exit status, its lines) against the daemon's own parts in
// this process: its control API and socket, its boot registry, and its side of `up` as the daemon
// wires it (src/daemon/boots-host.ts bootSubmitter: prepareUp, then the use case of
// src/app/up-use-case.ts) over the fake nodes of test/support (FakeCluster), with the recipes and
// cluster of a folder of its own. A boot's head waits for its gate before it serves; one never
// released is cancelled by `down`, rolled back for real, and its containers are gone.

type Submission = Parameters<ControlOptions["submit"]>[0];

const home = mkdtempSync(path.join(tmpdir(), "launcher-detach-"));
/** The recipe both sides read: the fake nodes' two-rank recipe, image img:local. */
const RECIPE_REF = "fake-2x";
const RECIPES = path.join(home, "recipes");
/** A home of its own: only the daemon advertised below is found, no store or cluster of this user. */
const { LAUNCHER_DAEMON: _ignored, LAUNCHER_CLAIM_LEASE: _lease, LAUNCHER_CLUSTER: _cluster, ...inherited } = process.env;
const ENV = { ...inherited, NODE_OPTIONS: "", HOME: home, XDG_STATE_HOME: path.join(home, "state"), XDG_RUNTIME_DIR: path.join(home, "run"), XDG_CONFIG_HOME: path.join(home, "config"), CI: "true", LAUNCHER_RECIPES: RECIPES };

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
  const child = spawn(process.execPath, [...cliArgs(), ...args], { env: ENV, cwd: home });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Run>((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, stderr: () => stderr, done };
}

/** A condition of the CLI's output or the fake nodes, bounded by the test's own wait. */
const waitFor = (what: string, check: () => boolean): Promise<void> => until(what, check, 30_000);

const quiet: Output = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };

/** The boots' gates, by deployment: release(name) lets that boot's head serve. */
const gates = new Map<string, () => void>();

/** FakeCluster.start's cluster, as the file the daemon reads (test/support/fake-cluster.ts writes the same). */
const clusterText = (c: Cluster): string =>
  `name = "${c.name}"\napi_port = ${c.api_port}\n\n${c.nodes.map((n) => `[[nodes]]\nname = "${n.name}"\nhost = "${n.host}"\nfabric_ip = "${n.fabric_ip ?? ""}"\nfabric_iface = "${n.fabric_iface ?? ""}"\n`).join("")}`;

/**
 * The daemon's environment over this test's folder (its recipes, its cluster, no variable of this
 * process), whose sessions are the fake nodes' (`vars`: more variables).
 */
function daemonEnvironment(fc: FakeCluster, vars: Record<string, string> = {}): Environment {
  const places = { vars: { LAUNCHER_RECIPES: RECIPES, LAUNCHER_CLUSTER: path.join(home, "cluster.toml"), XDG_CONFIG_HOME: path.join(home, "config"), XDG_STATE_HOME: path.join(home, "state"), ...vars }, home };
  return { ...environmentOf(places, quiet), openSession: async (cluster) => ({ ...fc.session, cluster }) };
}

/** The daemon's side of `up` (src/daemon/daemon.ts wires it so), on `env`, its own cluster the fake one. */
function submitterOf(env: Environment, registry: BootRegistry, store: Store): ReturnType<typeof bootSubmitter> {
  const cluster = env.loadCluster(undefined);
  const scope = { own: [cluster], catalogue: env.recipeCatalogue(() => undefined), ownTexts: new Map([[cluster.name, clusterText(cluster)]]), load: (option: string) => env.loadCluster(option) };
  return bootSubmitter(registry, store, env, scope, () => undefined);
}

let fc: FakeCluster;
const store = new Store(":memory:");
const registry = new BootRegistry(Date.now);
const submitted: (Submission & { caller: string })[] = [];
let server: Server;
let socket: ControlSocket;
let url: string;

/** Every container of `deployment` on the fake nodes, as `node:name:state`. */
const containersOf = (deployment: string): string[] => fc.containers().filter((c) => c.includes(`:launcher-${deployment}-r`));

before(async () => {
  // Four nodes: the lane's boot keeps n1 and n2 once ready; the others boot on n3 and n4.
  fc = await FakeCluster.start({ nodes: 4 });
  // A head says it waits for its workers, then serves once its deployment's gate is released.
  fc.script = (c, n) => {
    if (c.labels[LABELS.rank] !== "0") return n.say(c.name, ...WORKER_CONNECTED);
    n.say(c.name, ...HEAD_WAITING);
    gates.set(c.labels[LABELS.deployment] ?? "", () => void fc.serve(c, n));
  };
  mkdirSync(path.join(RECIPES, RECIPE_REF), { recursive: true });
  writeFileSync(path.join(RECIPES, RECIPE_REF, "recipe.toml"), RECIPE);
  writeFileSync(path.join(home, "cluster.toml"), clusterText(fc.cluster));
  const submit = submitterOf(daemonEnvironment(fc), registry, store);
  const handler = controlApi({
    // The owner's socket asks no key: here the same handler is also served on loopback TCP, as the unit tests of the API do.
    ownerSocket: true,
    registry,
    submit: (s, caller) => {
      submitted.push({ ...s, caller });
      return submit(s, caller);
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
  await fc.close();
  store.close();
  await socket.close();
  server.close();
  server.closeAllConnections();
  rmSync(home, { recursive: true, force: true });
});

test("a client killed with SIGHUP mid-boot detaches (129); the boot (a lane's) goes on and becomes ready; attach shows it from its start", { timeout: 60_000 }, async () => {
  // No --daemon and no LAUNCHER_DAEMON: the CLI finds this user's daemon on this machine by itself.
  const client = cli(["up", RECIPE_REF, "--name", "hup", "--lane", "hup-lane"]);
  try {
    await waitFor("the client shows the boot's first phase", () => new RegExp(`\\] n1 +${BOOT_PHASES[0]}\\b`).test(client.stderr()));
    client.child.kill("SIGHUP");
    const r = await client.done;
    assert.equal(r.code, 129, r.stderr);
    assert.match(r.stderr, /detached from the boot of hup; it goes on in the daemon at http:\/\/127\.0\.0\.1:\d+ \(launcher attach hup follows it/);
    assert.equal(registry.find("hup")?.running, true, "the boot goes on");
    assert.deepEqual([submitted.at(-1)?.lane, submitted.at(-1)?.caller], ["hup-lane", "owner"], "through the owner's socket");

    const attach = cli(["attach", "hup"]);
    await waitFor("attach replays the boot", () => new RegExp(`launcher: putting ${RECIPE_REF} in lane hup-lane`).test(attach.stderr()));
    gates.get("hup")?.();
    const attached = await attach.done;
    assert.equal(attached.code, 0, attached.stderr);
    assert.match(attached.stdout, new RegExp(`^hup is ready in \\d+\\.\\d s: http://127\\.0\\.0\\.1:${fc.cluster.api_port}/v1 \\(model "served"\\); lane hup-lane serves it\\n$`));
    // From its start: the line said before anything started, and the phases up to the last.
    for (const phase of [BOOT_PHASES[0], BOOT_PHASES.at(-1)]) assert.match(attached.stderr, new RegExp(`\\] n1 +${phase as string}\\b`));
    const json = JSON.parse((await cli(["attach", "hup", "--json"]).done).stdout) as { status: string; deployment: string };
    assert.deepEqual([json.status, json.deployment], ["ready", "hup"]);
    assert.deepEqual(containersOf("hup"), ["n1:launcher-hup-r0:running", "n2:launcher-hup-r1:running"], "the lane's nodes, the first free ones");
  } finally {
    client.child.kill("SIGKILL");
  }
});

test("up --detach prints the name and returns once accepted; down NAME cancels the boot in the daemon, and a follower sees up's failure", { timeout: 60_000 }, async () => {
  const r = await cli(["up", RECIPE_REF, "--name", "gone", "--nodes", "n3,n4", "--detach", "--daemon", url]).done;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "gone\n");
  // The URL named is the local daemon's: reached through its socket, as its owner (no key asked).
  assert.equal(submitted.at(-1)?.caller, "owner");
  assert.ok((submitted.at(-1)?.recipes?.length ?? 0) > 0, "the recipe's files were sent");
  assert.equal(registry.find("gone")?.running, true, "the boot goes on in the daemon");

  const following = cli(["attach", "gone", "--daemon", url]);
  await waitFor("attach follows gone", () => /\] n3 +starting/.test(following.stderr()));
  assert.deepEqual(containersOf("gone"), ["n3:launcher-gone-r0:running", "n4:launcher-gone-r1:running"], "its containers run, its head waiting for its gate");
  const down = await cli(["down", "gone", "--daemon", url]).done;
  assert.equal(down.code, 0, down.stderr);
  assert.match(down.stdout, /^cancelled the boot of gone in the daemon at http:\/\/127\.0\.0\.1:\d+: boot of gone failed: interrupted \(launcher down\)\n/);
  assert.match(down.stdout, /^rolled back: removed 2 containers \(n3\/launcher-gone-r0, n4\/launcher-gone-r1\)$/m);
  assert.equal(registry.find("gone")?.running, false);
  // Rolled back for real: the boot's own containers are gone from its nodes, the lane's are left.
  assert.deepEqual(containersOf("gone"), []);
  assert.deepEqual(containersOf("hup"), ["n1:launcher-hup-r0:running", "n2:launcher-hup-r1:running"]);
  const f = await following.done;
  assert.equal(f.code, 1, f.stderr);
  // One "launcher: " on the line: the failure is launcher's own, not a node's.
  assert.match(f.stderr, /^launcher: boot of gone failed: interrupted \(launcher down\)/m);
  assert.doesNotMatch(f.stderr, /launcher: launcher:/);

  // down --all: every boot in progress in the daemon is cancelled (and rolled back there) before
  // the nodes are cleared from here (which this test's home, with no cluster file, cannot do).
  ok(await cli(["up", RECIPE_REF, "--name", "gone-too", "--nodes", "n3,n4", "--detach", "--daemon", url]).done, "up --detach gone-too");
  await waitFor("gone-too's containers run", () => containersOf("gone-too").length === 2);
  const all = await cli(["down", "--all", "--daemon", url]).done;
  assert.match(all.stderr, /^launcher: cancelled the boot of gone-too in the daemon at http:\/\/127\.0\.0\.1:\d+$/m);
  assert.equal(registry.find("gone-too")?.running, false);
  assert.deepEqual(containersOf("gone-too"), [], "rolled back in the daemon before down --all returned");
});

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);
  return r;
}

test("up --detach with no daemon (--daemon none) is refused, saying how to run one", async () => {
  const r = await cli(["up", RECIPE_REF, "--detach", "--daemon", "none"]).done;
  assert.equal(r.code, 1);
  assert.match(r.stderr, /up --detach needs a daemon to run the boot: none is configured or running here/);
  assert.match(r.stderr, /launcher serve --control/);
  assert.doesNotMatch(r.stderr, /\n\s+at .*\.ts:\d+/);
});

test("the daemon's boots read $LAUNCHER_CLAIM_LEASE from the daemon's environment, never from this process's", { timeout: 30_000 }, async () => {
  const saved = process.env.LAUNCHER_CLAIM_LEASE;
  const own = new BootRegistry(Date.now);
  const ownStore = new Store(":memory:");
  const submission = { ref: RECIPE_REF, name: "leased", nodes: "n3,n4" };
  const errorOf = (r: ReturnType<ReturnType<typeof bootSubmitter>>): string => (Array.isArray(r) ? JSON.stringify(r.at(-1)) : "accepted");
  try {
    // Refused by the daemon's own value, while this process's is a good one.
    process.env.LAUNCHER_CLAIM_LEASE = "45s";
    const refused = submitterOf(daemonEnvironment(fc, { LAUNCHER_CLAIM_LEASE: "soon" }), own, ownStore)(submission);
    assert.match(errorOf(refused), /\$LAUNCHER_CLAIM_LEASE \\"soon\\" is not a duration/);
    // Taken when the daemon's is unset, whatever this process's says.
    process.env.LAUNCHER_CLAIM_LEASE = "soon";
    const taken = submitterOf(daemonEnvironment(fc), own, ownStore)(submission);
    assert.equal(errorOf(taken), "accepted");
    await own.cancelAll("test over");
    assert.deepEqual(containersOf("leased"), [], "its containers rolled back, if any had started");
  } finally {
    if (saved === undefined) delete process.env.LAUNCHER_CLAIM_LEASE;
    else process.env.LAUNCHER_CLAIM_LEASE = saved;
    await own.cancelAll("test over");
    ownStore.close();
  }
});
