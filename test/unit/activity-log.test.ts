import assert from "node:assert/strict";
import { test } from "node:test";
import type { ActivityRecord, ReadEvent } from "../../src/contract/read-api.js";
import { ACTIVITY_BODY_BYTES, activityRows, liveSources, scrapeTargets } from "../../src/daemon/live-sources.js";
import type { ReadSources } from "../../src/daemon/read-api.js";
import { ActivityLog } from "../../src/gateway/activity-log.js";
import { Store } from "../../src/store/store.js";
import { deployment } from "./gateway-fixture.js";

const rec = (i: number): ActivityRecord => ({ t: 1_000 + i, lane: "main", deployment: "d", model: "m", key_id: "0123abcd", status: 200, tokens_out: i });

test("the store keeps the newest rows only, newest first, across batches", () => {
  const s = new Store(":memory:");
  s.saveActivity([rec(1), rec(2), rec(3), rec(4)], 5);
  s.saveActivity([rec(5), rec(6), rec(7)], 5);
  assert.deepEqual(s.activity(100).map((r) => r.t), [1007, 1006, 1005, 1004, 1003]);
  s.saveActivity([rec(8)], 2);
  assert.deepEqual(s.activity(100).map((r) => r.t), [1008, 1007]);
  assert.deepEqual(s.activity(1), [rec(8)], "a record comes back as it went in");
  s.close();
});

/** A store that counts its writes. */
function countingStore(): { store: Store; writes: number[] } {
  const store = new Store(":memory:");
  const writes: number[] = [];
  const save = store.saveActivity.bind(store);
  store.saveActivity = (records, keep) => {
    writes.push(records.length);
    return save(records, keep);
  };
  return { store, writes };
}

test("adding a record writes nothing: records reach the store in one batch per flush", () => {
  const { store, writes } = countingStore();
  const log = new ActivityLog({ store, ringSize: 100, keepRows: 1000, flushMs: 1000 });
  for (let i = 0; i < 50; i++) log.add(rec(i));
  assert.deepEqual(writes, [], "no write on the request path");
  log.flush();
  assert.deepEqual(writes, [50]);
  log.flush();
  assert.deepEqual(writes, [50], "nothing new, nothing written");
  assert.equal(store.activity(1000).length, 50);
});

test("the ring answers the newest records, newest first, never more than its size; the records waiting for the store are bounded", () => {
  const { store, writes } = countingStore();
  const log = new ActivityLog({ store, ringSize: 3, keepRows: 10, flushMs: 1000 });
  for (let i = 0; i < 100; i++) log.add(rec(i));
  assert.deepEqual(log.recent(500).map((r) => r.t), [1099, 1098, 1097]);
  assert.deepEqual(log.recent(2).map((r) => r.t), [1099, 1098]);
  log.flush();
  assert.deepEqual(writes, [10], "only the newest keepRows wait for the store");
});

test("a new log starts with the store's newest records (a daemon restarted keeps its activity)", () => {
  const store = new Store(":memory:");
  store.saveActivity([rec(1), rec(2), rec(3)], 100);
  const log = new ActivityLog({ store, ringSize: 2, keepRows: 100, flushMs: 1000 });
  assert.deepEqual(log.recent(10).map((r) => r.t), [1003, 1002]);
});

test("scrape targets: the serving deployments, with their engines and the keys their engines demand", () => {
  const snapshot = { deployments: [deployment("http://h1:8000", { deployment: "a", engine: "vllm" }), deployment("http://h2:8000", { deployment: "b", status: "booting", phase: "loading" }), deployment("http://h3:8000", { deployment: "c" })] };
  assert.deepEqual(scrapeTargets(snapshot, (_c, d) => (d === "a" ? "sk-a" : undefined)), [
    { cluster: "c", deployment: "a", endpoint: "http://h1:8000", engine: "vllm", apiKey: "sk-a" },
    { cluster: "c", deployment: "c", endpoint: "http://h3:8000" },
  ]);
});

test("the live sources: activity (bounded by the read API's limit) and metrics, both on one stream", async () => {
  const store = new Store(":memory:");
  const page = 'vllm:num_requests_running{model_name="m"} 2.0\nvllm:kv_cache_usage_perc{model_name="m"} 0.5\n';
  const live = liveSources({ snapshot: () => ({ deployments: [deployment("http://h1:8000")] }), store, fetchText: async () => page, intervalMs: 60_000 });
  // What the daemon hands the read API (src/daemon/read-api.ts) as its sources.
  const sources: ReadSources = live;
  assert.equal(sources.metrics().length, 0, "nothing scraped before start");
  const heard: ReadEvent[] = [];
  const off = live.subscribe((e) => heard.push(e));
  for (let i = 0; i < 600; i++) live.record(rec(i));
  assert.equal(live.activity(10_000).length, 500, "MAX_READ_LIMIT");
  live.start();
  await live.stop();
  assert.equal(store.activity(10_000).length, 600, "stop writes what is left");
  assert.equal(heard.filter((e) => e.event === "activity").length, 600);
  const metrics = heard.filter((e) => e.event === "metrics");
  assert.equal(metrics.length, 1, "start scrapes at once");
  assert.deepEqual(live.metrics(), [{ cluster: "c", deployment: "practice-2x", points: [metrics[0]?.data.point] }]);
  assert.deepEqual({ ...metrics[0]?.data.point, t: 0 }, { t: 0, kv_cache_usage: 0.5, requests_running: 2 });
  off();
});

test("with body capture the store keeps fewer rows: their bodies stay within their bound", () => {
  assert.equal(activityRows(undefined), 100_000);
  assert.equal(activityRows(0), 100_000);
  assert.equal(activityRows(16 * 1024), ACTIVITY_BODY_BYTES / (32 * 1024));
  assert.equal(activityRows(1 << 30), ACTIVITY_BODY_BYTES / (32 * 1024), "a capture is at most MAX_CAPTURE_BYTES");
  assert.equal(activityRows(16), 100_000, "small captures: the usual rows");
});

test("a store another process holds for writing: the flush returns at once and keeps its batch for the next one", async () => {
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const path = await import("node:path");
  const Database = (await import("better-sqlite3")).default;
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-activity-busy-"));
  const store = new Store(path.join(dir, "state.db"));
  const other = new Database(path.join(dir, "state.db"));
  try {
    const log = new ActivityLog({ store, ringSize: 100, keepRows: 1000, flushMs: 1000 });
    log.add(rec(1));
    log.add(rec(2));
    other.prepare("BEGIN IMMEDIATE").run();
    assert.equal(store.saveActivity([rec(9)], 10), false, "busy: no wait, no fault");
    log.flush();
    assert.deepEqual(store.activity(10), [], "nothing written while the other holds the lock");
    other.prepare("COMMIT").run();
    log.flush();
    assert.deepEqual(store.activity(10).map((r) => r.t), [1002, 1001], "the kept batch is written by the next flush");
  } finally {
    other.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
