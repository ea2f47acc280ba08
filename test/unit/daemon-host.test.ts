import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { environmentOf, type Environment } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import { daemonConfig } from "../../src/daemon/config.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { keepUploadedCluster, uploadedClustersDir } from "../../src/daemon/uploaded-clusters.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";

// The daemon started in this process on an environment of a folder of its own: its store, its
// uploaded clusters and its socket are where that environment says, its lines go to its console,
// and discovery's watchers are the command line it gives (here a stand-in that prints one empty
// poll a second). The one node refuses SSH at once: nothing leaves this machine. Its stop is heard
// step by step: through what it takes (its console, its store from the environment, the
// advertisement's take-back) and, for the parts it makes itself, by wrapping them once it runs.

const NODES = '[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n';

/** A discovery watcher: an empty poll now and every second, until its stdin closes (--exit-with-stdin). */
const WATCHER = `const poll = () => console.log(JSON.stringify({ deployments: [], unreachable: [], at: new Date().toISOString() }));
poll(); setInterval(poll, 1000); process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`;

/**
 * The environment of a folder: its config folder holds the default cluster "home", its state
 * folder the store and the uploaded clusters. Only the watchers' command line is a stand-in.
 */
function folderEnvironment(dir: string, lines: string[], watchers: string[][]): Environment {
  const said = (text: string): void => void lines.push(text);
  const console: Output = { out: said, err: said, warn: said, json: (v) => said(JSON.stringify(v)), diagnostics: () => undefined };
  const places = { vars: { XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_RECIPES: path.join(dir, "recipes") }, home: dir };
  return {
    ...environmentOf(places, console),
    selfArgv: (args) => {
      watchers.push([...args]);
      return [process.execPath, "-e", WATCHER];
    },
  };
}

/**
 * The parts a running Daemon stops, as it names them (private to it: reached by name here, so a
 * rename fails this test loudly rather than hearing nothing).
 */
interface StoppedParts {
  readonly parts: {
    readonly registry: { detachAll(by: string, ms: number): Promise<void> };
    readonly gateway: { readonly server: { close(cb?: (e?: Error) => void): unknown }; close(): Promise<void> };
    readonly supervisor: { stop(): Promise<void> };
    readonly discovery: { stop(): Promise<void> };
  };
  readonly running: { readonly supervising: { stop(): void }; readonly socket: { close(): Promise<void> } | undefined };
}

/** Has `method` of `o` push `step` on `steps` each time it is called (then do what it did). */
function hear<O extends object, K extends keyof O>(o: O, method: K, step: string, steps: string[]): void {
  const original = o[method] as (...args: unknown[]) => unknown;
  o[method] = ((...args: unknown[]) => {
    steps.push(step);
    return original.apply(o, args);
  }) as O[K];
}

/** Each step of the daemon's stop that it makes itself, heard on `steps` as it is taken. */
function hearStop(daemon: Daemon, steps: string[]): void {
  const { parts, running } = daemon as unknown as StoppedParts;
  hear(parts.registry, "detachAll", "detach the boots", steps);
  hear(parts.gateway.server, "close", "close the server", steps);
  hear(running.supervising, "stop", "stop following discovery", steps);
  hear(parts.supervisor, "stop", "stop the supervisor", steps);
  assert.ok(running.socket !== undefined, "--control: a socket to close");
  hear(running.socket, "close", "close the control socket", steps);
  hear(parts.discovery, "stop", "stop discovery", steps);
  hear(parts.gateway, "close", "close the gateway", steps);
}

/** A GET over TCP or over a Unix socket: its status and body. */
function get(target: { port: number } | { socketPath: string }, urlPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ ...target, ...("port" in target ? { host: "127.0.0.1" } : {}), path: urlPath, method: "GET", timeout: 10_000 }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

test("a daemon on an environment of its own folder: it serves, keeps its store and socket there, watches its uploaded clusters, and stops in order", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-daemon-host-"));
  let daemon: Daemon | undefined;
  try {
    const home = path.join(dir, "config", "launcher", "clusters", "home.toml");
    mkdirSync(path.dirname(home), { recursive: true });
    writeFileSync(home, `name = "home"\n${NODES}`);
    writeFileSync(path.join(dir, "config", "launcher", "default-cluster"), "home\n");
    const lines: string[] = [];
    const watchers: string[][] = [];
    const steps: string[] = [];
    const folder = folderEnvironment(dir, lines, watchers);
    // Its console and its store are the environment's: each heard as a step of the stop.
    const env: Environment = {
      ...folder,
      console: { ...folder.console, err: (text) => (text.startsWith("launcher serve: stopping") && steps.push("say it stops"), folder.console.err(text)) },
      openStore: (warn, options) => {
        // The store may be a proxy (src/store/guarded.ts): its close is heard through another.
        const store = folder.openStore(warn, options);
        return new Proxy(store, { get: (t, k) => (k === "close" ? () => (steps.push("close the store"), t.close()) : (Reflect.get(t, k) as unknown)) });
      },
    };
    assert.equal(env.stateDir, path.join(dir, "state", "launcher"));
    keepUploadedCluster(uploadedClustersDir(env.stateDir), "lab", { file: "lab.toml", text: `name = "lab"\n${NODES}` });
    const config = daemonConfig({ listen: "127.0.0.1:0", control: true, poll: "1s" }, env.vars, { readFile: () => "", clusterPath: env.clusterPath });
    const advertised: string[] = [];
    daemon = await Daemon.start(config, env, {
      advertise: (host, port, socket) => {
        advertised.push(`${host}:${port} ${socket}`);
        return () => void (advertised.push("taken back"), steps.push("take back the advertisement"));
      },
    });
    assert.ok(daemon.port > 0);
    assert.ok(lines.includes(`launcher serve: listening on http://127.0.0.1:${daemon.port}/v1 (no API key: loopback only; clusters home, lab)`), lines.join("\n"));
    const control = lines.map((l) => /^launcher serve: control API on http:\/\/127\.0\.0\.1:\d+\/\S+ \(no admin key: refused over TCP\) and on (\S+) \(this user only\)$/.exec(l)).find((m) => m !== null);
    const socket = control?.[1] as string;
    assert.ok(socket !== undefined && existsSync(socket), lines.join("\n"));
    assert.deepEqual(advertised, [`127.0.0.1:${daemon.port} ${socket}`]);
    // The environment's places: its store, and one watcher per cluster reading the file it was given.
    assert.ok(existsSync(path.join(env.stateDir, "launcher.db")));
    assert.deepEqual(watchers.map((w) => w.slice(0, 3)), [["status", "--watch", "1000ms"], ["status", "--watch", "1000ms"]]);
    assert.equal(watchers[0]?.at(-1), home, "the default cluster of the environment's config folder");
    assert.ok(watchers[1]?.at(-1)?.startsWith(uploadedClustersDir(env.stateDir)));
    // It serves: the gateway over TCP, the control API through its socket (no admin key: not over TCP).
    assert.equal((await get({ port: daemon.port }, "/health")).status, 200);
    assert.deepEqual(JSON.parse((await get({ socketPath: socket }, CONTROL_PATHS.boots)).body), { boots: [] });
    assert.equal((await get({ port: daemon.port }, CONTROL_PATHS.boots)).status, 401);

    hearStop(daemon, steps);
    const stopped = daemon.stop();
    assert.equal(daemon.stop(), stopped, "a second stop is the first");
    await stopped;
    // The supervisor takes no death, snapshot or wedge once the stop began (a restart begun now
    // would take a group down and leave its boot undone); boots are let go while clients can
    // still hear so; this user's CLI stops being told of the socket before it goes; the store
    // goes last, after everything that writes to it.
    assert.deepEqual(steps, [
      "say it stops",
      "stop following discovery",
      "detach the boots",
      "close the server",
      "stop the supervisor",
      "take back the advertisement",
      "close the control socket",
      "stop discovery",
      "close the gateway",
      "close the store",
    ]);
    assert.ok(lines.includes("launcher serve: stopping (0 requests in flight get up to 10 s)"), lines.join("\n"));
    assert.deepEqual(advertised.at(-1), "taken back");
    assert.equal(existsSync(socket), false, "the socket is gone");
    await assert.rejects(get({ port: daemon.port }, "/health"), /ECONNREFUSED/);
  } finally {
    // A check that failed leaves it running: stopped all the same.
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
