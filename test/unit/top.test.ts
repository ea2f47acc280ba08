import assert from "node:assert/strict";
import { test } from "node:test";
import { applyEvent, checkCluster, clusterToShow, MAX_ITEMS, pictureJson, pictureOf, type TopAnswers, type TopPicture } from "../../src/app/top.js";
import { UserError } from "../../src/config/errors.js";
import type { DeploymentView, LaneView, ReadEvent } from "../../src/contract/read-api.js";
import { fit, renderTop, span } from "../../src/cli/top-view.js";
import { retryDelay, Screen, type Terminal } from "../../src/cli/top.js";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import { createLogUpdate } from "log-update";
import { until } from "../support/until.js";
import { encodeError } from "../../src/boot/up-events.js";

// launcher top's pure part: the picture made from the read API's answers and then its events
// (src/app/top.ts), and that picture drawn as lines of a given width (src/cli/top-view.ts).

const GIB = 1024 * 1024;
const NOW = Date.parse("2026-12-05T03:00:00Z");

function deployment(name: string, over: Partial<DeploymentView> = {}): DeploymentView {
  return {
    deployment: name,
    cluster: "home",
    recipe: name,
    recipe_hash: "abc123",
    served_model: `${name}-model`,
    endpoint: "http://10.0.0.1:8000",
    status: "serving",
    phase: "serving",
    missing: [],
    unreachable: [],
    ranks: [
      { rank: 0, node: "s1", container: `launcher-${name}-r0`, state: "running" },
      { rank: 1, node: "s2", container: `launcher-${name}-r1`, state: "running" },
    ],
    ...over,
  };
}

const lane = (name: string, over: Partial<LaneView> = {}): LaneView => ({ name, cluster: "home", state: "serving", deployment: "chat-a", recipe: "chat-a", served_model: "chat", since: "2026-12-05T02:00:00.000Z", swaps: [], ...over });

function answers(over: Partial<{ [K in keyof TopAnswers]: TopAnswers[K] }> = {}): TopAnswers {
  return {
    clusters: {
      clusters: [
        {
          name: "home",
          nodes: [
            { name: "s1", rank: 0, reachable: true, memory: { total_kib: 120 * GIB, available_kib: 40 * GIB, floor_gib: 8, source: "guard", deployment: "chat-a", read_at: "2026-12-05T02:59:59Z" } },
            { name: "s2", rank: 1, reachable: true, memory: { total_kib: 120 * GIB, available_kib: 6 * GIB, floor_gib: 8, source: "doctor", read_at: "2026-12-05T02:00:00Z" } },
          ],
        },
      ],
    },
    deployments: { deployments: [deployment("chat-a")], strangers: [], unreachable: [] },
    lanes: { lanes: [lane("chat")] },
    boots: { boots: [] },
    metrics: { windows: [{ cluster: "home", deployment: "chat-a", points: [{ t: NOW - 10_000, generation_tps: 10 }, { t: NOW - 5000, generation_tps: 42.25, kv_cache_usage: 0.3 }] }] },
    ...over,
  };
}

const view = (p: TopPicture, width?: number): string[] => renderTop(p, { daemon: "http://spark1:8080", now: NOW, ...(width === undefined ? {} : { width }) });

test("top's picture: nodes with memory against the floor, a lane and what serves it, a deployment with the newest point's tok/s", () => {
  const lines = view(pictureOf(answers()));
  assert.equal(lines[0], "launcher top  http://spark1:8080  at 03:00:00 UTC");
  assert.deepEqual(lines.slice(1), [
    "NODES of home",
    "  s1  up  memory 40.0 / 120.0 GiB available, floor 8 GiB: 32.0 GiB over the floor  (guard of chat-a)",
    "  s2  up  memory 6.0 / 120.0 GiB available, floor 8 GiB: 2.0 GiB under the floor  (doctor)",
    "LANES",
    "  chat  serving chat-a  serving  recipe chat-a, model chat  since 2026-12-05 02:00:00",
    "DEPLOYMENTS",
    "  chat-a  serving  42.3 tok/s  on s1,s2",
    "BOOTS",
    "  no boot in progress",
  ]);
});

test("top with nothing running: no deployments, no lanes, no boot; a node never read and one not polled yet", () => {
  const empty = answers({
    clusters: { clusters: [{ name: "home", nodes: [{ name: "s1", rank: 0 }] }] },
    deployments: { deployments: [], strangers: [], unreachable: [] },
    lanes: { lanes: [] },
    metrics: { windows: [] },
  });
  assert.deepEqual(view(pictureOf(empty)).slice(1), ["NODES of home", "  s1  not polled yet  memory not read yet (launcher doctor reads it)", "LANES", "  no lanes", "DEPLOYMENTS", "  no deployments", "BOOTS", "  no boot in progress"]);
  assert.deepEqual(view(pictureOf(answers({ clusters: { clusters: [] } }))).slice(1, 3), ["NODES", "  the daemon watches no cluster"]);
});

test("top at a narrow width: every line at most that wide, cut with an ellipsis, never inside a character", () => {
  const p = pictureOf(answers());
  for (const width of [1, 8, 20, 40]) {
    for (const line of view(p, width)) assert.ok([...line].length <= width, `${width}: ${JSON.stringify(line)}`);
  }
  assert.equal(view(p, 20)[5], "  chat  serving cha…");
  assert.equal(fit(["ab", "😀😀😀"], 4), "ab😀…");
  assert.equal(fit(["abcd"], 4), "abcd");
  // A name with control characters cannot move the cursor: they are escaped, then counted.
  assert.equal(fit(["\u001b[2Jx"], 40), "\\x1b[2Jx");
});

test("a boot in progress shows each node's phase as its events come; its end shows for a while, a failure with its cause", () => {
  let p = pictureOf(answers({ deployments: { deployments: [], strangers: [], unreachable: [] } }));
  const boot = (event: Record<string, unknown>): ReadEvent => ({ event: "boot", data: { deployment: "big", cluster: "home", lane: "chat", event: event as { type: string; t: number } } });
  const node = (n: string, phase: string, t: number): ReadEvent => boot({ type: "node", node: n, state: { phase, figures: {}, ready: false, lastLines: [] }, t });
  p = applyEvent(p, boot({ type: "accepted", deployment: "big", cluster: "home", lane: "chat", t: NOW - 75_000 }));
  assert.deepEqual(view(p).slice(-2), ["  big  booting for 1m15s  cluster home  lane chat", "    no node started yet"]);
  p = applyEvent(p, node("s1", "loading", NOW - 60_000));
  p = applyEvent(p, node("s2", "starting", NOW - 59_000));
  p = applyEvent(p, node("s2", "kv-cache", NOW - 1000));
  p = applyEvent(p, boot({ type: "memory", node: "s2", sample: { totalKiB: 120 * GIB, availableKiB: 50 * GIB }, t: NOW - 500 }));
  const lines = view(p);
  assert.deepEqual(lines.slice(-3), ["  big  booting for 1m15s  cluster home  lane chat", "    s1  loading", "    s2  kv-cache"]);
  assert.match(lines.find((l) => l.startsWith("  s2")) ?? "", /memory 50\.0 \/ 120\.0 GiB available, floor 8 GiB: 42\.0 GiB over the floor  \(guard of big\)/);
  // An event this launcher cannot read is dropped, not shown half.
  assert.deepEqual(applyEvent(p, boot({ type: "node", node: "s1", t: NOW })), p);

  const failed = applyEvent(p, boot({ type: "error", error: encodeError(new UserError("s2 ran out of memory\nmore lines")), t: NOW - 30_000 }));
  assert.deepEqual(view(failed).slice(-1), ["  big  failed 30s ago  cluster home  lane chat: s2 ran out of memory"]);
  const ready = applyEvent(p, boot({ type: "result", outcome: { status: "ready", deployment: "big", endpoint: "x", served_model: "m", seconds: 70 }, t: NOW - 5000 }));
  assert.deepEqual(view(ready).slice(-1), ["  big  ready in 1m10s 5s ago  cluster home  lane chat"]);
  const later = renderTop(ready, { daemon: "d", now: NOW + 11 * 60_000 });
  assert.equal(later.at(-1), "  no boot in progress");
  // A new boot of the deployment starts over.
  const again = applyEvent(ready, boot({ type: "accepted", deployment: "big", cluster: "home", t: NOW }));
  assert.deepEqual(view(again).slice(-2), ["  big  booting for 0s  cluster home  lane chat", "    no node started yet"]);
});

test("the boots route's answer is the same picture its events make", () => {
  const p = pictureOf(answers({ boots: { boots: [{ deployment: "big", cluster: "home", running: true, state: "booting", started_at: new Date(NOW - 5000).toISOString(), nodes: { s1: "loading" }, events: [{ type: "accepted", t: NOW - 5000 }] }] } }));
  assert.deepEqual(view(p).slice(-2), ["  big  booting for 5s  cluster home", "    s1  loading"]);
});

test("an unreachable node, a deployment changed, removed and added, a lane switching, and metrics applied from the stream", () => {
  let p = pictureOf(answers());
  p = applyEvent(p, { event: "node", data: { cluster: "home", node: "s2", reachable: false } });
  assert.deepEqual(p.unreachable, ["home/s2"]);
  p = applyEvent(p, { event: "deployment", data: deployment("chat-a", { status: "degraded", phase: "-", missing: ["rank 1 on s2 (exited, exit 137)"], supervision: "restarting", restarts: 2 }) });
  p = applyEvent(p, { event: "deployment", data: deployment("chat-b", { status: "booting", phase: "loading", lane: "chat" }) });
  p = applyEvent(p, { event: "lane", data: lane("chat", { state: "switching", switching_to: "chat-b" }) });
  p = applyEvent(p, { event: "metrics", data: { cluster: "home", deployment: "chat-a", point: { t: NOW - 1000, generation_tps: 7 } } });
  // An older point than the one shown is not newer news.
  p = applyEvent(p, { event: "metrics", data: { cluster: "home", deployment: "chat-a", point: { t: NOW - 9000, generation_tps: 99 } } });
  // Another cluster's events do not reach a picture of one cluster.
  const only = applyEvent(pictureOf(answers(), "home"), { event: "deployment", data: deployment("x", { cluster: "lab" }) }, "home");
  assert.equal(only.deployments.size, 1);
  assert.deepEqual(view(p).slice(2), [
    "  s1  up  memory 40.0 / 120.0 GiB available, floor 8 GiB: 32.0 GiB over the floor  (guard of chat-a)",
    "  s2  unreachable  memory 6.0 / 120.0 GiB available, floor 8 GiB: 2.0 GiB under the floor  (doctor)",
    "LANES",
    "  chat  switching to chat-b (from chat-a)  degraded  recipe chat-a, model chat  since 2026-12-05 02:00:00",
    "DEPLOYMENTS",
    "  chat-a  degraded (-)  7.0 tok/s  on s1,s2  supervised: restarting  restarts 2  missing: rank 1 on s2 (exited, exit 137)",
    "  chat-b  booting (loading)  lane chat  on s1,s2",
    "BOOTS",
    "  no boot in progress",
  ]);
  p = applyEvent(p, { event: "deployment_removed", data: { cluster: "home", deployment: "chat-a" } });
  p = applyEvent(p, { event: "lane_removed", data: { name: "chat" } });
  p = applyEvent(p, { event: "node", data: { cluster: "home", node: "s2", reachable: true } });
  assert.deepEqual([...p.deployments.keys()], ["home/chat-b"]);
  assert.equal(p.metrics.size, 0);
  assert.equal(p.lanes.size, 0);
  assert.deepEqual(p.unreachable, []);
});

test("the picture holds at most MAX_ITEMS of a kind, whatever the daemon sends", () => {
  let p = pictureOf(answers());
  for (let i = 0; i < MAX_ITEMS + 50; i++) p = applyEvent(p, { event: "deployment", data: deployment(`d${i}`) });
  assert.equal(p.deployments.size, MAX_ITEMS);
  // The one it already has still changes.
  p = applyEvent(p, { event: "deployment", data: deployment("chat-a", { status: "degraded" }) });
  assert.equal(p.deployments.get("home/chat-a")?.status, "degraded");
});

test("--cluster: a file's name, a name the daemon has; one it does not watch is a user error naming those it does", () => {
  const found = { found: true, file: "/x/home.toml", source: "option" } as const;
  assert.equal(clusterToShow("home", found, () => "home-from-file"), "home-from-file");
  assert.equal(clusterToShow("remote", { found: false, source: "option", message: "no cluster", hint: "h" }, () => "never"), "remote");
  assert.equal(clusterToShow(undefined, { found: false, message: "no cluster file", hint: "h" }, () => "never"), undefined);
  assert.throws(() => clusterToShow("./missing.toml", { found: false, source: "option", message: "cluster file ./missing.toml not found", hint: "h" }, () => "never"), /cluster file \.\/missing\.toml not found/);
  checkCluster(answers(), "home", "http://d");
  checkCluster(answers(), undefined, "http://d");
  assert.throws(() => checkCluster(answers(), "lab", "http://d"), (e: Error) => e instanceof UserError && e.message === "the daemon at http://d watches no cluster lab: it watches home");
});

test("top --json: the picture's lists, each deployment with its newest metrics point", () => {
  const json = pictureJson(pictureOf(answers()), "http://d") as { daemon: string; deployments: { deployment: string; metrics?: { generation_tps?: number } }[]; lanes: unknown[]; boots: unknown[] };
  assert.equal(json.daemon, "http://d");
  assert.deepEqual(json.deployments.map((d) => [d.deployment, d.metrics?.generation_tps]), [["chat-a", 42.25]]);
  assert.equal(json.lanes.length, 1);
  assert.deepEqual(json.boots, []);
});

test("the header says the stream's state; reconnects back off, doubling to a bound", () => {
  const p = pictureOf(answers());
  assert.equal(renderTop(p, { daemon: "http://d", now: NOW, stream: { kind: "live" } })[0], "launcher top  http://d  live  03:00:00 UTC  (q quits)");
  const cut = renderTop(p, { daemon: "http://d", now: NOW, stream: { kind: "reconnecting", attempt: 3, why: "cannot reach the daemon at http://d: ECONNREFUSED", retry_at_ms: NOW + 2000 } })[0];
  assert.equal(cut, "launcher top  http://d  stream closed: cannot reach the daemon at http://d: ECONNREFUSED; reconnecting in 2s (attempt 3)  (q quits)");
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 50].map(retryDelay), [500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]);
  assert.deepEqual([0, 59_499, 61_000, 3_600_000 + 120_000].map(span), ["0s", "59s", "1m01s", "1h02m"]);
});

/** A terminal's stand-in: what top sets on it and writes to it. */
function fakeTerminal(): { term: Terminal; raw: boolean[]; written: () => string; stdin: EventEmitter & { paused: boolean } } {
  const raw: boolean[] = [];
  let text = "";
  const stdin = Object.assign(new EventEmitter(), {
    isTTY: true,
    paused: true,
    setRawMode(mode: boolean) {
      raw.push(mode);
      return stdin;
    },
    resume() {
      stdin.paused = false;
      return stdin;
    },
    pause() {
      stdin.paused = true;
      return stdin;
    },
  });
  const stdout = Object.assign(
    new Writable({
      write(chunk: Buffer, _enc, done) {
        text += chunk.toString("utf8");
        done();
      },
    }),
    { columns: 30, rows: 5, isTTY: true },
  );
  return { term: { stdin, stdout } as unknown as Terminal, raw, written: () => text, stdin };
}

test("top's screen: raw keys while it draws, frames cut to the terminal's width and rows, and end() gives the terminal back", async () => {
  const t = fakeTerminal();
  const keys: string[] = [];
  const render = (_p: TopPicture, _s: unknown, width: number | undefined): string[] => renderTop(pictureOf(answers()), { daemon: "http://d", now: NOW, ...(width === undefined ? {} : { width }) });
  const screen = new Screen(createLogUpdate, render, (b) => void keys.push(b.toString()), t.term);
  let ended = false;
  try {
    assert.deepEqual(t.raw, [true], "raw mode while top runs");
    assert.equal(t.stdin.paused, false);
    screen.show(pictureOf(answers()), { kind: "live" });
    await until("a frame", () => t.written().includes("NODES"), 5000);
    const frame = t.written().split("\n").filter((l) => l !== "");
    assert.equal(frame.length, 4, "the terminal's rows but one: the top of the picture");
    for (const line of frame) assert.ok([...line].length <= 30, line);
    t.stdin.emit("data", Buffer.from("q"));
    assert.deepEqual(keys, ["q"]);
    screen.end();
    ended = true;
  } finally {
    // A failed check must not leave the screen's timer holding the test process.
    if (!ended) screen.end();
  }
  assert.deepEqual(t.raw, [true, false], "raw mode off at the end");
  assert.equal(t.stdin.paused, true);
  assert.equal(t.stdin.listenerCount("data"), 0, "no key is read after the end");
});
