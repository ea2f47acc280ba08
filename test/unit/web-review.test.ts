import assert from "node:assert/strict";
import { test } from "node:test";
import { CONTROL_PATHS, StopRequestSchema } from "../../src/contract/control-api.js";
import { MAX_READ_LIMIT, READ_PATHS, type ActivityRecord, type DeploymentView, type LogLine, type ReadEvent } from "../../src/contract/read-api.js";
import { actionRequest, outcomeOfAnswer } from "../../web/src/actions.js";
import { appendLog, filterLog, isResent, resumeFrom, withNewest, type HeldLine } from "../../web/src/logs.js";
import { parseRoute, routeHref, type Route } from "../../web/src/route.js";
import { applyAnswer, applyEvent, bootNamed, deploymentNamed, EMPTY_STATE, MAX_ENDED_BOOTS, othersNamed, readPath, type BootView, type PageState } from "../../web/src/state.js";

// What a hostile review of the page found: a cancel that lost the race to ready, a stop that did
// not name its cluster, activity read short and doubled, and a page left open that grew.

test("a cancel whose boot had become ready before it arrived says it serves, not that it was cancelled", () => {
  const ready = outcomeOfAnswer({ kind: "cancel", deployment: "d" }, 200, JSON.stringify({ type: "result", outcome: { deployment: "d" }, t: 5 }));
  assert.deepEqual(ready, { outcome: "ok", message: "the boot of d had become ready before the cancel reached it; it serves" });
  const cancelled = outcomeOfAnswer({ kind: "cancel", deployment: "d" }, 200, JSON.stringify({ type: "error", error: { kind: "interrupted", signal: "cancel", what: "boot" }, t: 1 }));
  assert.match(cancelled.message, /^the boot of d was cancelled/);
});

test("a stop names the cluster the page showed the deployment on, in the body the control API takes", () => {
  const req = actionRequest({ kind: "stop", deployment: "d", cluster: "east" });
  assert.deepEqual(req, { method: "POST", path: CONTROL_PATHS.stop("d"), body: { cluster: "east" }, streams: false });
  assert.equal(StopRequestSchema.safeParse(req?.body).success, true);
  assert.equal(actionRequest({ kind: "stop", deployment: "d" })?.body, undefined);
});

const deployment = (name: string, cluster: string, status: DeploymentView["status"]): DeploymentView => ({
  deployment: name, cluster, recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://n1:8000", status, phase: status === "serving" ? "serving" : "loading", missing: [], unreachable: [], ranks: [],
});

test("a name on two clusters: the route may name the cluster; without it the serving one is shown and the others listed", () => {
  const routes: Route[] = [{ view: "deployment", name: "d", cluster: "east" }, { view: "boot", name: "a b", cluster: "w/e?st&x" }, { view: "deployment", name: "d" }];
  for (const r of routes) assert.deepEqual(parseRoute(routeHref(r)), r, routeHref(r));
  assert.equal(routeHref({ view: "deployment", name: "d" }), "#/deployments/d", "the one-cluster address is unchanged");
  assert.deepEqual(parseRoute("#/deployments/d?cluster="), { view: "deployment", name: "d" });
  assert.deepEqual(parseRoute(`#/deployments/d?cluster=${"x".repeat(300)}`), { view: "deployment", name: "d" });
  const s = applyAnswer(EMPTY_STATE, "deployments", { deployments: [deployment("d", "west", "degraded"), deployment("d", "east", "serving"), deployment("e", "west", "serving")], strangers: [], unreachable: [] });
  assert.equal(deploymentNamed(s, "d")?.cluster, "east", "the serving one");
  assert.equal(deploymentNamed(s, "d", "west")?.cluster, "west");
  assert.equal(deploymentNamed(s, "d", "north"), undefined);
  assert.deepEqual(othersNamed(s, { deployment: "d", cluster: "east" }).map((d) => d.cluster), ["west"]);
  assert.deepEqual(othersNamed(s, { deployment: "e", cluster: "west" }), []);
  const boot = (cluster: string, running: boolean): BootView => ({ deployment: "d", cluster, running, state: running ? "booting" : "failed", started_at: "2026-12-05T00:00:00.000Z", nodes: {}, events: [] });
  const b = applyAnswer(EMPTY_STATE, "boots", { boots: [boot("west", false), boot("east", true)] });
  assert.equal(bootNamed(b, "d")?.cluster, "east", "the running one");
  assert.equal(bootNamed(b, "d", "west")?.cluster, "west");
});

const activity = (t: number, extra: Partial<ActivityRecord> = {}): ActivityRecord => ({ t, model: "m", status: 200, ...extra });

test("activity is read at the most a read holds, and a request an admin's read held with its bodies is not doubled by the stream's", () => {
  assert.equal(readPath("activity"), `${READ_PATHS.activity}?limit=${MAX_READ_LIMIT}`);
  assert.equal(readPath("deployments"), READ_PATHS.deployments);
  let s = applyAnswer(EMPTY_STATE, "activity", { requests: [activity(2, { request_body: "{\"q\":1}", response_body: "{}" }), activity(1)] });
  assert.equal(s.activity[0]?.request_body, undefined, "the page keeps no body: it never shows one");
  s = applyEvent(s, { event: "activity", data: activity(2) });
  assert.deepEqual(s.activity.map((r) => r.t), [2, 1]);
});

test("a page left open stays bounded: the running boots and the newest ended ones, and a removed deployment's metrics go", () => {
  const bootEvent = (name: string, type: string, t: number): ReadEvent => ({ event: "boot", data: { deployment: name, cluster: "c", event: { type, t, ...(type === "error" ? { error: { kind: "bug", message: "x" } } : type === "result" ? { outcome: {} } : {}) } } as ReadEvent["data"] } as ReadEvent);
  let s: PageState = applyEvent(EMPTY_STATE, bootEvent("long", "accepted", 1));
  for (let i = 0; i < MAX_ENDED_BOOTS + 15; i++) {
    s = applyEvent(s, bootEvent(`b${i}`, "accepted", 1000 + i * 10));
    s = applyEvent(s, bootEvent(`b${i}`, i % 2 === 0 ? "result" : "error", 1000 + i * 10 + 5));
  }
  assert.equal(s.boots.length, MAX_ENDED_BOOTS + 1);
  assert.equal(bootNamed(s, "long")?.running, true, "a running boot stays, however old");
  assert.equal(bootNamed(s, "b0"), undefined, "the oldest ended boot went");
  assert.ok(bootNamed(s, `b${MAX_ENDED_BOOTS + 14}`) !== undefined);
  const ended = (i: number): BootView => ({ deployment: `r${i}`, cluster: "c", running: false, state: "ready", started_at: new Date(i * 1000).toISOString(), nodes: {}, events: [] });
  const read = applyAnswer(EMPTY_STATE, "boots", { boots: Array.from({ length: MAX_ENDED_BOOTS + 5 }, (_, i) => ended(i)) });
  assert.equal(read.boots.length, MAX_ENDED_BOOTS);
  assert.equal(read.boots[0]?.deployment, "r5", "the read's order is kept, its oldest dropped");
  let m = applyAnswer(EMPTY_STATE, "metrics", { windows: [{ cluster: "c", deployment: "a", points: [{ t: 1 }] }, { cluster: "d", deployment: "a", points: [{ t: 1 }] }] });
  m = applyEvent(m, { event: "deployment_removed", data: { cluster: "c", deployment: "a" } });
  assert.deepEqual(m.metrics.map((w) => w.cluster), ["d"]);
});

test("logs opened again start from the node that lags, and drop what the other nodes send twice; rows keep their sequence", () => {
  const line = (node: string, s: string, text = `${node}@${s}`): LogLine => ({ node, rank: 0, text, t: `2026-12-05T00:00:${s}.000000000Z` });
  let held: HeldLine[] = [];
  let newest: ReadonlyMap<string, string> = new Map();
  let seq = 0;
  const take = (l: LogLine): void => {
    const known = newest;
    newest = withNewest(known, l);
    if (!isResent(held, known, l)) held = appendLog(held, { ...l, seq: seq++ });
  };
  // n2 lags: its follow had sent up to :02 when n1's had reached :09.
  for (const l of [line("n1", "05"), line("n2", "01"), line("n1", "09"), line("n2", "02")]) take(l);
  assert.equal(resumeFrom(newest), "2026-12-05T00:00:02.000000000Z", "the lagging node's newest, not the newest of all");
  assert.equal(resumeFrom(new Map()), undefined);
  // The follow opened from there sends n2's later lines, and n1's again.
  for (const l of [line("n1", "05"), line("n2", "03"), line("n1", "09"), line("n1", "09", "another at the same time"), line("n2", "04"), line("n1", "10")]) take(l);
  assert.deepEqual(held.map((l) => l.text), ["n2@01", "n2@02", "n2@03", "n2@04", "n1@05", "n1@09", "another at the same time", "n1@10"]);
  assert.equal(new Set(held.map((l) => l.seq)).size, held.length, "each row its own key");
  assert.deepEqual(filterLog(held, "n2").map((l) => l.seq), [1, 3, 4, 6], "a line's key stays its own whatever went in before it");
  const untimed: LogLine = { node: "n1", rank: 0, text: "no time" };
  assert.equal(isResent(held, newest, untimed), false, "a line without a time is never taken for one sent before");
});
