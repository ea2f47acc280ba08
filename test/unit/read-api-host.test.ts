import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { environmentOf, type Environment } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import { READ_PATHS, type ReadEvent } from "../../src/contract/read-api.js";
import { daemonConfig } from "../../src/daemon/config.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { followEvents, readAnswer } from "../../src/daemon/read-client.js";
import { until } from "../support/until.js";

// The read API as `launcher serve --control` mounts it (src/daemon/daemon.ts): over TCP with an
// inference key or the admin key, through the owner socket with none, and its event stream ended
// by the daemon's stop before the server waits for its connections. The daemon runs in this
// process on a folder of its own; discovery's watcher is a stand-in that prints an empty poll a
// second; the one node refuses SSH at once (as in test/unit/daemon-host.test.ts).

const ADMIN = "admin-key-0123456789";
const INFERENCE = "inference-key-0123456789";
const WATCHER = `const poll = () => console.log(JSON.stringify({ deployments: [], unreachable: [], at: new Date().toISOString() }));
poll(); setInterval(poll, 1000); process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`;

function folderEnvironment(dir: string, lines: string[]): Environment {
  const said = (text: string): void => void lines.push(text);
  const console: Output = { out: said, err: said, warn: said, json: (v) => said(JSON.stringify(v)), diagnostics: () => undefined };
  const places = { vars: { XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_RECIPES: path.join(dir, "recipes") }, home: dir };
  return { ...environmentOf(places, console), selfArgv: () => [process.execPath, "-e", WATCHER] };
}

/** The daemon's parts this test looks at, by the names it gives them (a rename fails here loudly). */
interface Inside {
  readonly parts: { readonly feed: { readonly hub: { readonly size: number } }; readonly gateway: { readonly server: { close(cb?: () => void): unknown } } };
  readonly running: { readonly socket: { readonly path: string } | undefined };
}

test("serve mounts the read API: an inference key and the admin key read over TCP, the owner socket without one, and a stop ends the event stream first", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-read-api-"));
  let daemon: Daemon | undefined;
  try {
    const home = path.join(dir, "config", "launcher", "clusters", "home.toml");
    mkdirSync(path.dirname(home), { recursive: true });
    writeFileSync(home, 'name = "home"\n[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n');
    writeFileSync(path.join(dir, "config", "launcher", "default-cluster"), "home\n");
    const lines: string[] = [];
    const env = folderEnvironment(dir, lines);
    const config = { ...daemonConfig({ listen: "127.0.0.1:0", control: true, poll: "1s" }, env.vars, { readFile: () => "", clusterPath: env.clusterPath }), apiKeys: [INFERENCE], adminKeys: [ADMIN] };
    daemon = await Daemon.start(config, env);
    const url = `http://127.0.0.1:${daemon.port}`;
    const inside = daemon as unknown as Inside;
    for (const key of [INFERENCE, ADMIN]) {
      const clusters = await readAnswer({ url, key }, "clusters");
      assert.deepEqual(clusters.clusters.map((c) => [c.name, c.nodes.map((n) => `${n.name} ${String(n.reachable)}`)]), [["home", ["s1 true"]]]);
      assert.deepEqual((await readAnswer({ url, key }, "deployments")).deployments, []);
    }
    assert.equal((await fetch(`${url}${READ_PATHS.lanes}`)).status, 401);
    const socket = inside.running.socket?.path;
    assert.ok(socket !== undefined);
    assert.deepEqual((await readAnswer({ url, socket }, "boots")).boots, []);

    const seen: ReadEvent[] = [];
    const stop = new AbortController();
    const following = followEvents({ url, key: INFERENCE }, (e) => void seen.push(e), stop.signal);
    await until("the stream's client", () => inside.parts.feed.hub.size === 1, 10_000);
    // What the server waits for once it closes: the stream must be over by then.
    let streamsAtClose = -1;
    const server = inside.parts.gateway.server;
    const close = server.close.bind(server);
    server.close = (cb?: () => void) => ((streamsAtClose = inside.parts.feed.hub.size), close(cb));
    await daemon.stop();
    await following;
    assert.equal(streamsAtClose, 0);
  } finally {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
