import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { ActivityRecord, ReadEvent } from "../../src/contract/read-api.js";
import { liveSources } from "../../src/daemon/live-sources.js";
import { launcherApi, ReadFeed, type ReadParts } from "../../src/daemon/read-api.js";
import { readAnswer } from "../../src/daemon/read-client.js";
import { keyChecker } from "../../src/gateway/auth.js";
import { Store } from "../../src/store/store.js";
import { BootRegistry } from "../../src/supervise/boots.js";

// Captured bodies (launcher serve --capture-bodies) hold what other clients asked: the activity
// route gives them to an admin only, and the event stream, which every reader gets, never carries them.
const ADMIN = "ADMIN-key-0123";
const INFERENCE = "INFER-key-0123";
const RECORD: ActivityRecord = { t: 1, lane: "chat", model: "m", status: 200, request_body: '{"messages":"secret plans"}', response_body: '{"choices":[]}' };

test("the activity route: an admin key reads the captured bodies, an inference key the record without them", async () => {
  const parts: ReadParts = {
    discovery: { snapshot: () => ({ deployments: [], strangers: [], unreachable: [] }), subscribe: () => () => undefined } as unknown as ReadParts["discovery"],
    supervision: () => ({}) as ReturnType<ReadParts["supervision"]>,
    clusters: async () => [],
    session: async () => undefined,
    store: new Store(":memory:"),
    registry: new BootRegistry(Date.now),
    sources: { metrics: () => [], activity: () => [RECORD], subscribe: () => () => undefined },
    log: () => undefined,
  };
  const api = launcherApi(parts, new ReadFeed(parts), { checkRead: keyChecker([ADMIN, INFERENCE]), checkAdmin: keyChecker([ADMIN]) }, undefined);
  const server = createServer((req, res) => void api(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const admin = await readAnswer({ url, key: ADMIN }, "activity");
    assert.deepEqual(admin.requests, [RECORD]);
    const reader = await readAnswer({ url, key: INFERENCE }, "activity");
    assert.deepEqual(reader.requests, [{ t: 1, lane: "chat", model: "m", status: 200 }]);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test("the event stream's activity events never carry the captured bodies", async () => {
  const store = new Store(":memory:");
  const live = liveSources({ snapshot: () => ({ deployments: [], strangers: [], unreachable: [] }), store, captureBodies: 4096 });
  const pushed: ReadEvent[] = [];
  const off = live.subscribe((e) => void pushed.push(e));
  try {
    live.record(RECORD);
    assert.deepEqual(pushed, [{ event: "activity", data: { t: 1, lane: "chat", model: "m", status: 200 } }]);
    // The log itself keeps them, for the admin's reads.
    assert.equal(live.activity(10)[0]?.request_body, RECORD.request_body);
  } finally {
    off();
    await live.stop();
    store.close();
  }
});
