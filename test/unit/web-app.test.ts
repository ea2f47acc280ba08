import assert from "node:assert/strict";
import { test } from "node:test";
import type { ActivityRecord, DeploymentView, HistoryBoot, LogLine, ReadEvent } from "../../src/contract/read-api.js";
import { CONTROL_PATHS } from "../../src/contract/control-api.js";
import { actionRequest, outcomeOfAnswer, outcomeOfEvents, refusalMessage } from "../../web/src/actions.js";
import { ago, headroom } from "../../web/src/format.js";
import { actionsFor, mayAct } from "../../web/src/gate.js";
import { appendLog, filterLog, followQuery, logNodes, MAX_LOG_LINES } from "../../web/src/logs.js";
import { navOf, parseRoute, routeHref, type Route } from "../../web/src/route.js";
import { applyAnswer, applyEvent, EMPTY_STATE, historyByRecipe, MAX_ACTIVITY, METRICS_WINDOW_MS, rereadsAfter, type BootView, type PageState } from "../../web/src/state.js";

// The page's pure parts (web/src/), under node: its routes, the state the events stream keeps
// current, what a read session may do, its actions' requests and outcomes. The DOM is the browser
// tests' (test/integration/dashboard.test.ts).

test("routes: each view's hash reads back as itself; anything else is the overview; a name is decoded and bounded", () => {
  const routes: Route[] = [{ view: "overview" }, { view: "activity" }, { view: "history" }, { view: "runs" }, { view: "deployment", name: "chat-a" }, { view: "boot", name: "x y/z" }, { view: "logs", name: "n" }];
  for (const r of routes) assert.deepEqual(parseRoute(routeHref(r)), r, routeHref(r));
  assert.equal(routeHref({ view: "deployment", name: "a/b" }), "#/deployments/a%2Fb");
  assert.equal(routeHref({ view: "overview" }), "#/");
  for (const other of ["", "#", "#/", "#/nope", "#/deployments", "#/deployments/", "#/deployments/a/b", "#/boots/%E0%A4%A", `#/logs/${"x".repeat(300)}`, "#/constructor", "#/__proto__"]) assert.deepEqual(parseRoute(other), { view: "overview" }, other);
  assert.equal(navOf({ view: "deployment", name: "a" }), "overview");
  assert.equal(navOf({ view: "runs" }), "runs");
});

test("a read session is shown no action; an admin session every one", () => {
  assert.equal(actionsFor("read").size, 0);
  assert.deepEqual([...actionsFor("admin")].sort(), ["cancel", "start", "stop", "swap"]);
  assert.equal(mayAct("read", "stop"), false);
  assert.equal(mayAct(undefined, "stop"), false);
  assert.equal(mayAct("admin", "cancel"), true);
});

const deployment = (name: string, status: DeploymentView["status"] = "serving"): DeploymentView => ({
  deployment: name, cluster: "c", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://n1:8000", status, phase: status === "serving" ? "serving" : "loading", missing: [], unreachable: [], ranks: [{ rank: 0, node: "n1", container: `launcher-${name}-r0`, state: "running" }],
});
const activity = (t: number, extra: Partial<ActivityRecord> = {}): ActivityRecord => ({ t, model: "m", status: 200, ...extra });
const ev = (e: ReadEvent): ReadEvent => e;

test("the state: routes' answers replace, and each event of the stream changes only what it names", () => {
  let s: PageState = applyAnswer(EMPTY_STATE, "deployments", { deployments: [deployment("a"), deployment("b")], strangers: [], unreachable: [] });
  s = applyAnswer(s, "clusters", { clusters: [{ name: "c", nodes: [{ name: "n1", rank: 0, reachable: true }, { name: "n2", rank: 1 }] }] });
  assert.deepEqual([...s.loaded].sort(), ["clusters", "deployments"]);
  s = applyEvent(s, ev({ event: "deployment", data: deployment("a", "degraded") }));
  s = applyEvent(s, ev({ event: "deployment", data: { ...deployment("c"), cluster: "other" } }));
  assert.deepEqual(s.deployments.map((d) => `${d.deployment}:${d.status}`), ["a:degraded", "b:serving", "c:serving"]);
  s = applyEvent(s, ev({ event: "deployment_removed", data: { cluster: "c", deployment: "b" } }));
  s = applyEvent(s, ev({ event: "deployment_removed", data: { cluster: "c", deployment: "c" } }));
  assert.deepEqual(s.deployments.map((d) => d.deployment), ["a", "c"], "only the named cluster's deployment leaves");
  s = applyEvent(s, ev({ event: "node", data: { cluster: "c", node: "n2", reachable: false } }));
  assert.deepEqual(s.clusters[0]?.nodes.map((n) => n.reachable), [true, false]);
  const lane = { name: "chat", cluster: "c", state: "serving" as const, deployment: "a", since: "2026-12-05T00:00:00Z", swaps: [] };
  s = applyEvent(s, ev({ event: "lane", data: lane }));
  s = applyEvent(s, ev({ event: "lane", data: { ...lane, state: "switching", switching_to: "b" } }));
  assert.deepEqual(s.lanes.map((l) => l.state), ["switching"]);
  s = applyEvent(s, ev({ event: "lane_removed", data: { name: "chat" } }));
  assert.equal(s.lanes.length, 0);
  const logLine = applyEvent(s, ev({ event: "log", data: { node: "n1", rank: 0, text: "x" } }));
  assert.equal(logLine, s, "a log line is the logs view's, not the state's");
});

test("the state: a boot is followed from its first event to its end, and a new boot of the same name starts over", () => {
  const boot = (event: Record<string, unknown> & { type: string; t: number }): ReadEvent => ({ event: "boot", data: { deployment: "slow", cluster: "c", event } });
  let s = applyEvent(EMPTY_STATE, boot({ type: "accepted", deployment: "slow", cluster: "c", t: 1000 }));
  assert.equal(s.boots.length, 1);
  assert.equal(s.boots[0]?.state, "booting");
  assert.equal(s.boots[0]?.started_at, new Date(1000).toISOString());
  s = applyEvent(s, boot({ type: "node", node: "n1", state: { phase: "loading", figures: {}, ready: false, lastLines: [] }, t: 2000 }));
  s = applyEvent(s, boot({ type: "node", node: "n2", state: { phase: "starting", figures: {}, ready: false, lastLines: [] }, t: 2100 }));
  s = applyEvent(s, boot({ type: "node", node: "n1", state: { phase: "kv-cache", figures: {}, ready: false, lastLines: [] }, t: 2200 }));
  assert.deepEqual(s.boots[0]?.nodes, { n1: "kv-cache", n2: "starting" });
  assert.equal(s.boots[0]?.events.length, 4);
  const failed = applyEvent(s, boot({ type: "error", error: { kind: "remote", node: "n2", message: "engine core init failed" }, t: 3000 }));
  assert.equal(failed.boots[0]?.state, "failed");
  assert.equal(failed.boots[0]?.running, false);
  assert.equal(failed.boots[0]?.error, "engine core init failed");
  assert.deepEqual(rereadsAfter(boot({ type: "error", error: { kind: "bug", message: "x" }, t: 3000 })), ["history"], "a boot's end is read again in history");
  assert.deepEqual(rereadsAfter(boot({ type: "say", text: "x", t: 3000 })), []);
  const ready = applyEvent(s, boot({ type: "result", outcome: {}, t: 3000 }));
  assert.equal(ready.boots[0]?.state, "ready");
  const again = applyEvent(failed, boot({ type: "accepted", deployment: "slow", cluster: "c", t: 9000 }));
  assert.equal(again.boots.length, 1);
  assert.equal(again.boots[0]?.state, "booting");
  assert.deepEqual(again.boots[0]?.nodes, {});
  assert.equal(again.boots[0]?.events.length, 1);
  // A boot read from the route goes on from its events.
  const held: BootView = { deployment: "slow", cluster: "c", running: true, state: "booting", started_at: "2026-12-05T00:00:00.000Z", nodes: { n1: "loading" }, events: [{ type: "accepted", t: 1 }] };
  const read = applyEvent(applyAnswer(EMPTY_STATE, "boots", { boots: [held] }), boot({ type: "node", node: "n1", state: { phase: "warmup", figures: {}, ready: false, lastLines: [] }, t: 5 }));
  assert.equal(read.boots[0]?.started_at, held.started_at);
  assert.deepEqual(read.boots[0]?.nodes, { n1: "warmup" });
  // An event the read already held (the routes are read once the stream is open) is not added twice.
  const twice = applyEvent(read, boot({ type: "node", node: "n1", state: { phase: "warmup", figures: {}, ready: false, lastLines: [] }, t: 5 }));
  assert.equal(twice.boots[0]?.events.length, 2);
});

test("the state: metrics keep an hour per deployment, activity is newest first and bounded", () => {
  let s = applyAnswer(EMPTY_STATE, "metrics", { windows: [{ cluster: "c", deployment: "a", points: [{ t: 1000, generation_tps: 1 }] }] });
  s = applyEvent(s, ev({ event: "metrics", data: { cluster: "c", deployment: "a", point: { t: 2000, generation_tps: 2 } } }));
  s = applyEvent(s, ev({ event: "metrics", data: { cluster: "c", deployment: "b", point: { t: 2000 } } }));
  assert.deepEqual(s.metrics.map((w) => [w.deployment, w.points.length]), [["a", 2], ["b", 1]]);
  s = applyEvent(s, ev({ event: "metrics", data: { cluster: "c", deployment: "a", point: { t: 1500 + METRICS_WINDOW_MS } } }));
  assert.deepEqual(s.metrics[0]?.points.map((p) => p.t), [2000, 1500 + METRICS_WINDOW_MS], "a point older than the hour is dropped");
  assert.equal(applyEvent(s, ev({ event: "metrics", data: { cluster: "c", deployment: "a", point: { t: 2000 } } })), s, "a sample the window held already");
  let a = applyAnswer(EMPTY_STATE, "activity", { requests: [activity(2), activity(1)] });
  a = applyEvent(a, ev({ event: "activity", data: activity(3, { status: 503, lane: "chat" }) }));
  assert.deepEqual(a.activity.map((r) => r.t), [3, 2, 1]);
  assert.equal(applyEvent(a, ev({ event: "activity", data: activity(2) })), a, "a request the read held already");
  for (let i = 0; i < MAX_ACTIVITY + 10; i++) a = applyEvent(a, ev({ event: "activity", data: activity(10 + i) }));
  assert.equal(a.activity.length, MAX_ACTIVITY);
  assert.equal(a.activity[0]?.t, 10 + MAX_ACTIVITY + 9);
});

test("history is grouped by recipe, each group's boots in the route's order", () => {
  const h = (id: number, recipe: string): HistoryBoot => ({ id, deployment: "d", recipe, recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "e", nodes: ["n1"], started_at: "2026-12-05T00:00:00Z", outcome: "ready", phases: [] });
  assert.deepEqual(historyByRecipe([h(3, "b"), h(2, "a"), h(1, "b")]).map((g) => [g.recipe, g.boots.map((b) => b.id)]), [["b", [3, 1]], ["a", [2]]]);
});

test("actions: each is the control API's request, as the CLI makes it; start and swap wait for a recipe", () => {
  assert.deepEqual(actionRequest({ kind: "stop", deployment: "a b" }), { method: "POST", path: CONTROL_PATHS.stop("a b"), streams: false });
  assert.deepEqual(actionRequest({ kind: "cancel", deployment: "a" }), { method: "DELETE", path: CONTROL_PATHS.boot("a"), streams: false });
  assert.equal(actionRequest({ kind: "swap", lane: "chat" }), undefined);
  assert.equal(actionRequest({ kind: "start", recipe: "" }), undefined);
  assert.deepEqual(actionRequest({ kind: "swap", lane: "chat", recipe: "r2" }), { method: "POST", path: CONTROL_PATHS.boots, body: { ref: "r2", lane: "chat" }, streams: true });
  assert.deepEqual(actionRequest({ kind: "start", recipe: "r", lane: "  " }), { method: "POST", path: CONTROL_PATHS.boots, body: { ref: "r" }, streams: true });
  assert.deepEqual(actionRequest({ kind: "start", recipe: "r", lane: "chat" })?.body, { ref: "r", lane: "chat" });
});

test("actions: a boot's stream says accepted, then its end; its last event's error is the refusal shown", () => {
  const accepted = JSON.stringify({ type: "accepted", deployment: "d", cluster: "c", t: 1 });
  assert.deepEqual(outcomeOfEvents([]), { outcome: "pending", message: "submitted" });
  assert.equal(outcomeOfEvents([accepted]).outcome, "ok");
  assert.equal(outcomeOfEvents([accepted]).deployment, "d");
  assert.equal(outcomeOfEvents([accepted, "", "not json", JSON.stringify({ type: "result", outcome: {}, t: 2 })]).message, "d serves");
  const refused = outcomeOfEvents([accepted, JSON.stringify({ type: "error", error: { kind: "user", message: "lane chat is busy", hint: "wait", diagnostics: [] }, t: 2 })]);
  assert.deepEqual(refused, { outcome: "error", message: "lane chat is busy (wait)", deployment: "d" });
  const diagnosed = outcomeOfEvents([JSON.stringify({ type: "error", error: { kind: "user", message: "cannot plan r", diagnostics: [{ severity: "error", loc: { file: "r/recipe.toml", line: 3, col: 1 }, message: "nnodes 2 > 1 node" }] }, t: 2 })]);
  assert.equal(diagnosed.message, "cannot plan r: r/recipe.toml:3: nnodes 2 > 1 node");
  assert.equal(outcomeOfAnswer({ kind: "stop", deployment: "d" }, 403, JSON.stringify({ error: { message: "no", type: "t", code: "c", hint: "sign in" } })).message, "no: sign in");
  assert.equal(refusalMessage(502, "<html>"), "the daemon answered HTTP 502");
  const stopped = { deployment: "d", cluster: "c", stopped: true, deployments: ["d"], nodes: [{ node: "n1", outcome: "nothing" }], lane: "chat" };
  assert.deepEqual(outcomeOfAnswer({ kind: "stop", deployment: "d" }, 200, JSON.stringify(stopped)), { outcome: "ok", message: "d was stopped; lane chat is empty" });
  const partly = { ...stopped, stopped: false, nodes: [{ node: "n2", outcome: "unreachable", reason: "ssh timed out" }], again: "launcher down deployment/d" };
  assert.deepEqual(outcomeOfAnswer({ kind: "stop", deployment: "d" }, 200, JSON.stringify(partly)), { outcome: "error", message: "d may still run on n2 (ssh timed out): run launcher down deployment/d once it answers" });
  assert.equal(outcomeOfAnswer({ kind: "stop", deployment: "d" }, 200, "{}").outcome, "error", "an answer it cannot read is not a success");
  assert.equal(outcomeOfAnswer({ kind: "cancel", deployment: "d" }, 200, JSON.stringify({ type: "error", error: { kind: "interrupted", signal: "cancel", what: "boot" }, t: 1 })).outcome, "ok");
});

test("logs: bounded, filtered by node, and a follow opened again asks from just after the newest line", () => {
  let lines = [{ node: "n2", rank: 1, text: "b" }, { node: "n1", rank: 0, text: "a" }];
  assert.deepEqual(filterLog(lines, "n1").map((l) => l.text), ["a"]);
  assert.equal(filterLog(lines, ""), lines);
  assert.deepEqual(logNodes(["n3"], lines), ["n1", "n2", "n3"]);
  let merged: LogLine[] = [];
  for (const [node, t] of [["n1", "01"], ["n1", "03"], ["n1", "05"], ["n2", "02"], ["n2", "04"], ["n2", undefined], ["n1", "06"]] as const) merged = appendLog(merged, { node, rank: 0, text: `${node}@${t}`, ...(t === undefined ? {} : { t: `2026-12-05T00:00:${t}.000000000Z` }) });
  assert.deepEqual(merged.map((l) => l.text), ["n1@01", "n2@02", "n1@03", "n2@04", "n1@05", "n2@undefined", "n1@06"], "the nodes' lines merged in time order as they come");
  for (let i = 0; i < MAX_LOG_LINES + 5; i++) lines = appendLog(lines, { node: "n1", rank: 0, text: String(i) });
  assert.equal(lines.length, MAX_LOG_LINES);
  assert.equal(lines.at(-1)?.text, String(MAX_LOG_LINES + 4));
  assert.equal(followQuery(undefined), "follow=1&tail=300");
  const again = new URLSearchParams(followQuery("2026-12-05T02:00:00.123456789Z"));
  assert.equal(again.get("since"), ((Date.parse("2026-12-05T02:00:00.123Z") + 1) / 1000).toFixed(3));
  assert.equal(again.get("tail"), "2000");
  assert.equal(followQuery("garbage"), "follow=1&tail=300");
});

test("format: relative times and memory against the floor, with units", () => {
  assert.equal(ago(0, 500), "just now");
  assert.equal(ago(0, 42_000), "42 s ago");
  assert.equal(ago(0, 3 * 60_000 + 5), "3 min ago");
  assert.equal(ago(0, 5 * 3600_000), "5 h ago");
  const kib = 1024 * 1024;
  assert.deepEqual(headroom({ available_kib: 40 * kib, total_kib: 120 * kib, floor_gib: 8 }), { text: "40.0 GiB available vs floor 8 GiB (of 120.0 GiB)", low: false });
  assert.equal(headroom({ available_kib: 4 * kib, total_kib: 120 * kib, floor_gib: 8 }).low, true);
  assert.equal(headroom(undefined).text, "not read yet");
});
