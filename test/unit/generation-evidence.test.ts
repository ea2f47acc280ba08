import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { PROGRESS_EVERY_MS } from "../../src/contract/generation.js";
import { progressOf } from "../../src/gateway/activity.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import { routeTable } from "../../src/gateway/routes.js";
import { createGateway } from "../../src/gateway/server.js";
import { generationFromMetrics, generationWatchFor } from "../../src/daemon/supervision.js";
import type { LiveEvent } from "../../src/daemon/live-sources.js";
import type { Discovery, Snapshot } from "../../src/daemon/discovery.js";
import { FORGET_AFTER_POLLS, GenerationWatch, probeWithin, type GenerationWatchDeps, type ProbeOutcome, type Watched } from "../../src/supervise/generation-watch.js";
import type { Supervisor } from "../../src/supervise/supervisor.js";
import type { StateStore, StoredWedge } from "../../src/store/store.js";
import { within } from "../integration/practice-cluster.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";

// What counts as generation (a stream's chunks, the engine's own token counter), and what must
// never make a wedge: the watch's own stop, a busy engine, one odd discovery poll, a record a former
// daemon left. Time is the watch's monotonic `now`; `wall` only shows when.

const T = { probeEveryMs: 60_000, boundMs: 30_000 };
const at0 = Date.parse("2026-01-01T00:00:00Z");

const watched = (boot = "b1", status: Watched["status"] = "serving"): Watched => ({
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://e:8000", status, phase: status === "serving" ? "serving" : "-", missing: [], unreachable: [], boot,
  ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" }],
});

/** An engine that never answers a probe: its signal (the watch's stop, the probe's bound) ends it as fetch would. */
function hangingProbe(): { probe: GenerationWatchDeps["probe"]; started: number } {
  const m = {
    started: 0,
    probe: (_t: unknown, signal: AbortSignal) =>
      new Promise<ProbeOutcome>((_resolve, reject) => {
        m.started++;
        signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      }),
  };
  return m;
}

/** The probe's bound in these tests, on real timers (the probe's own); the watch's clock is the test's. */
const BOUND_MS = 50;

/** A watch on a hand-moved clock, recording what it hands on. */
function watchOn(probe: GenerationWatchDeps["probe"], over: Partial<GenerationWatchDeps> = {}): { w: GenerationWatch; events: string[]; clock: { mono: number; wall: number } } {
  const clock = { mono: 1_000, wall: at0 };
  const events: string[] = [];
  const w = new GenerationWatch({
    probe,
    engineKey: () => undefined,
    timing: { probeEveryMs: T.probeEveryMs, boundMs: BOUND_MS },
    now: () => clock.mono,
    wall: () => clock.wall,
    log: () => undefined,
    onWedged: (seen) => events.push(`wedged ${seen.boot ?? "-"}`),
    onConfirmed: (seen) => events.push(`confirmed ${seen.boot ?? "-"}`),
    onCleared: (seen) => events.push(`cleared ${seen.boot ?? "-"}`),
    ...over,
  });
  return { w, events, clock };
}

const move = (clock: { mono: number; wall: number }, ms: number): void => {
  clock.mono += ms;
  clock.wall += ms;
};

test("gateway: a stream's progress is told on its first chunk, then at most once per PROGRESS_EVERY_MS", () => {
  let t = 0;
  const told: string[] = [];
  const chunk = progressOf({ cluster: "c", deployment: "d" }, (c, d) => told.push(`${c}/${d}@${t}`), () => t);
  chunk();
  t = PROGRESS_EVERY_MS - 1;
  chunk();
  t = PROGRESS_EVERY_MS;
  chunk();
  t = PROGRESS_EVERY_MS + 10;
  chunk();
  assert.deepEqual(told, ["c/d@0", `c/d@${PROGRESS_EVERY_MS}`]);
});

test("gateway: a 200 stream tells the watch on its first chunk, long before it ends", async () => {
  let finish: () => void = () => undefined;
  const engine = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n');
      finish = () => res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const d = deployment(`http://127.0.0.1:${(engine.address() as AddressInfo).port}`);
  const heard: string[] = [];
  const gw = createGateway(gatewayOptions({ routes: () => routeTable([d], []), generated: (c, dep) => heard.push(`${c}/${dep}`) }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  try {
    const res = await fetch(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "main", messages: [], stream: true }), signal: AbortSignal.timeout(10_000) });
    assert.equal(res.status, 200);
    await within(5000, "the first chunk told", async () => (heard.length > 0 ? true : undefined));
    assert.deepEqual(heard, ["c/practice-2x"], "told while the stream is still open");
    finish();
    await res.text();
  } finally {
    gw.server.closeAllConnections();
    gw.server.close();
    await gw.close();
    engine.closeAllConnections();
    engine.close();
  }
});

test("metrics: a point whose generation rate is above 0 is evidence of generation, dated when the point before it was heard; 0 or none is not", () => {
  const heard: string[] = [];
  let mono = 1000;
  const feed = generationFromMetrics({ generated: (c, d, after) => heard.push(`${c}/${d} after ${after ?? "-"}`), now: () => mono });
  const point = (generation_tps?: number, deployment = "d"): LiveEvent => ({ event: "metrics", data: { cluster: "c", deployment, point: { t: at0, ...(generation_tps === undefined ? {} : { generation_tps }) } } }) as LiveEvent;
  // The first point heard of a deployment has no scrape before it to date its tokens after.
  feed(point(3));
  mono += 5000;
  feed(point(0));
  mono += 5000;
  feed(point(undefined));
  assert.deepEqual(heard, []);
  mono += 5000;
  feed(point(12.5));
  feed(point(4, "other"));
  assert.deepEqual(heard, ["c/d after 11000"]);
});

test("watch: tokens counted by the first scrape after a wedge was found, made before it, never end it; tokens after it do", async () => {
  const m = hangingProbe();
  const { w, events, clock } = watchOn(m.probe);
  const feed = generationFromMetrics(w);
  const scrape = (tps: number): void => feed({ event: "metrics", data: { cluster: "c", deployment: "d", point: { t: clock.wall, generation_tps: tps } } } as LiveEvent);
  w.observe([watched()]);
  scrape(0);
  move(clock, T.probeEveryMs);
  w.tick();
  assert.equal(m.started, 1);
  await within(2000, "the wedge said", async () => (events.includes("wedged b1") ? true : undefined));
  // The scrape after it counts tokens made before the wedge (between the scrape before and its
  // start); the wall clock set back meanwhile changes nothing.
  move(clock, 1000);
  clock.wall -= 120_000;
  scrape(9);
  assert.deepEqual(events, ["wedged b1"], "still wedged");
  assert.equal(w.wedged().length, 1);
  // The next one counts tokens made after this scrape, so after the wedge was found: it generates again.
  move(clock, 5000);
  scrape(9);
  assert.deepEqual(events, ["wedged b1", "cleared b1"]);
  await w.stop();
});

test("watch: a busy engine whose probe fails while its streams send chunks is never wedged; a quiet one is", async () => {
  for (const busy of [true, false]) {
    const m = hangingProbe();
    const reported: unknown[] = [];
    const { w, events, clock } = watchOn(m.probe, { onState: (_c, _d, st) => reported.push(st) });
    w.observe([watched()]);
    move(clock, T.probeEveryMs);
    w.tick();
    assert.equal(m.started, 1);
    // A long stream sends chunks while the probe waits its turn in the batch (its bound ends it).
    if (busy) for (let i = 0; i < 29; i++) {
      move(clock, 1000);
      w.generated("c", "d");
    }
    move(clock, 1000);
    const before = reported.length;
    await within(2000, "the probe's end noted", async () => (reported.length > before ? true : undefined));
    assert.deepEqual(events, busy ? [] : ["wedged b1"], busy ? "busy" : "quiet");
    await w.stop();
  }
});

test("watch: stopping it never declares a wedge: a probe it cut short is 'stopped', nothing is handed on", async () => {
  const m = hangingProbe();
  const { w, events, clock } = watchOn(m.probe);
  w.observe([watched()]);
  w.start();
  move(clock, T.probeEveryMs);
  w.tick();
  assert.equal(m.started, 1);
  await w.stop();
  assert.deepEqual(events, [], "no wedge, no confirmation, no clearing of one never said");
  assert.deepEqual(w.wedged(), []);
  w.generated("c", "d");
  w.tick();
  assert.equal(m.started, 1, "nothing probed after stop");
  const stop = new AbortController();
  const out = probeWithin(m.probe, { endpoint: "x", served_model: "m", apiKey: undefined }, 30_000, stop.signal);
  await new Promise((r) => setImmediate(r));
  stop.abort();
  assert.deepEqual(await out, { kind: "stopped" });
});

test("watch: the first failed probe stops routing; only a second one in a row is handed to the supervisor", async () => {
  const m = hangingProbe();
  const { w, events, clock } = watchOn(m.probe);
  w.observe([watched()]);
  move(clock, T.probeEveryMs);
  w.tick();
  await within(2000, "wedged", async () => (events.length > 0 ? true : undefined));
  assert.deepEqual(events, ["wedged b1"]);
  assert.equal(w.wedged().length, 1, "not routed to from the first failure");
  w.tick();
  assert.equal(m.started, 2, "the confirmation is sent at once");
  await within(2000, "confirmed", async () => (events.length > 1 ? true : undefined));
  assert.deepEqual(events, ["wedged b1", "confirmed b1"]);
  await w.stop();
});

test("watch: timing is on the monotonic clock; the wall clock stepping moves neither probes nor bounds, and only shows since when", async () => {
  const m = hangingProbe();
  const { w, clock } = watchOn(m.probe);
  w.observe([watched()]);
  clock.wall += 3_600_000;
  w.tick();
  assert.equal(m.started, 0, "an hour's wall step is no time passed");
  clock.mono += T.probeEveryMs;
  clock.wall -= 7_200_000;
  w.tick();
  assert.equal(m.started, 1, "the period passed on the monotonic clock");
  await within(2000, "wedged", async () => w.wedged()[0]);
  // Seen serving T.probeEveryMs ago on the monotonic clock: shown as that long before the wall's now.
  const since = new Date(clock.wall - T.probeEveryMs).toISOString();
  assert.equal(w.wedged()[0]?.since, since);
  clock.wall += 3;
  assert.equal(w.wedged()[0]?.since, since, "worked out once: the read API sees no change where there is none");
  await w.stop();
});

test("watch: one poll that does not show it serving keeps its wedge; FORGET_AFTER_POLLS in a row, or a new launch, end it", async () => {
  const m = hangingProbe();
  const { w, events, clock } = watchOn(m.probe);
  w.observe([watched()]);
  move(clock, T.probeEveryMs);
  w.tick();
  await within(2000, "wedged", async () => (events.length > 0 ? true : undefined));
  w.observe([watched("b1", "degraded")]);
  assert.equal(w.wedged().length, 1, "one odd poll: still wedged, still not routed to");
  w.tick();
  assert.equal(m.started, 1, "not probed while missing from the serving ones");
  w.observe([watched()]);
  for (let i = 0; i < FORGET_AFTER_POLLS - 1; i++) w.observe([]);
  assert.equal(w.wedged().length, 1, "the count starts anew once it serves again");
  w.observe([]);
  assert.deepEqual(events, ["wedged b1", "cleared b1"]);
  assert.deepEqual(w.wedged(), []);
  // A new launch of the name ends the old one's wedge at once.
  w.observe([watched("b2")]);
  move(clock, T.probeEveryMs);
  w.tick();
  await within(2000, "b2 wedged", async () => (events.includes("wedged b2") ? true : undefined));
  w.observe([watched("b3")]);
  assert.deepEqual(events.slice(2), ["wedged b2", "cleared b2"]);
  await w.stop();
});

test("daemon's watch: a former daemon's wedge rows of its clusters go at start and a launch's own when it is first watched", async () => {
  const rows = new Map<string, StoredWedge>([["c/old", { boot: "b0", since: "s", message: "m", at: "a" }], ["c/d", { boot: "b1", since: "s", message: "m", at: "a" }], ["other/x", { boot: "b", since: "s", message: "m", at: "a" }]]);
  const store = {
    engineKey: () => undefined,
    wedges: (cluster: string) => new Map([...rows].filter(([k]) => k.startsWith(`${cluster}/`)).map(([k, v]) => [k.slice(cluster.length + 1), v])),
    saveWedge: (cluster: string, deployment: string, w: StoredWedge | undefined) => (w === undefined ? rows.delete(`${cluster}/${deployment}`) : rows.set(`${cluster}/${deployment}`, w)),
  } as unknown as StateStore;
  const handed: string[] = [];
  const supervisor = { wedged: (c: string, d: string) => handed.push(`${c}/${d}`) } as unknown as Supervisor;
  let listener: (s: Snapshot) => void = () => undefined;
  const discovery = { subscribe: (f: (s: Snapshot) => void) => (listener = f) } as unknown as Discovery;
  const w = generationWatchFor(store, supervisor, new GatewayMetrics(), discovery, T, () => undefined, ["c"]);
  listener({ deployments: [watched()] } as unknown as Snapshot);
  assert.deepEqual([...rows.keys()], ["c/old", "other/x"], "the launch now watched: its old row is void");
  w.start();
  assert.deepEqual([...rows.keys()], ["other/x"], "its clusters' rows go at start; another cluster's stay");
  await w.stop();
  assert.deepEqual(handed, []);
});
