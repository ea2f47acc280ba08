import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { READ_PATHS, type ReadEvent } from "../../src/contract/read-api.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { followEvents, readAnswer } from "../../src/daemon/read-client.js";
import { until } from "../support/until.js";
import { HOME_ADMIN_KEY, HOME_INFERENCE_KEY, startHomeDaemon } from "../support/home-daemon.js";

// The read API as `launcher serve --control` mounts it (src/daemon/daemon.ts): over TCP with an
// inference key or the admin key, through the owner socket with none, and its event stream ended
// by the daemon's stop before the server waits for its connections. The daemon runs in this
// process on a folder of its own; discovery's watcher is a stand-in that prints an empty poll a
// second; the one node refuses SSH at once (as in test/unit/daemon-host.test.ts).

const ADMIN = HOME_ADMIN_KEY;
const INFERENCE = HOME_INFERENCE_KEY;

/** The daemon's parts this test looks at, by the names it gives them (a rename fails here loudly). */
interface Inside {
  readonly parts: { readonly feed: { readonly hub: { readonly size: number } }; readonly gateway: { readonly server: { close(cb?: () => void): unknown } } };
  readonly running: { readonly socket: { readonly path: string } | undefined };
}

test("serve mounts the read API: an inference key and the admin key read over TCP, the owner socket without one, and a stop ends the event stream first", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-read-api-"));
  let daemon: Daemon | undefined;
  try {
    const lines: string[] = [];
    daemon = await startHomeDaemon(dir, lines);
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
