import assert from "node:assert/strict";
import { test } from "node:test";
import { keyChecker, parseKeyFile, presentedKey } from "../../src/gateway/auth.js";
import { forwardHeaders, REQUEST_DROP } from "../../src/gateway/headers.js";
import { isLoopback, parseListen } from "../../src/gateway/listen.js";
import { routeTable, type KnownDeployment } from "../../src/gateway/routes.js";
import { placeSwap } from "../../src/lanes/placement.js";
import type { LaneRecord } from "../../src/store/store.js";

function dep(name: string, over: Partial<KnownDeployment> = {}): KnownDeployment {
  return {
    cluster: "c",
    deployment: name,
    recipe: name,
    recipe_hash: "h",
    served_model: name,
    endpoint: `http://${name}:8000`,
    status: "serving",
    phase: "serving",
    uptime_seconds: 100,
    missing: [],
    unreachable: [],
    ranks: [{ rank: 0, node: "n1", container: `launcher-${name}-r0`, state: "running", started_at: "t" }],
    ...over,
  };
}
const lane = (name: string, over: Partial<LaneRecord>): LaneRecord => ({ name, cluster: "c", state: "serving", since: "t", ...over });

test("routing: served names and lane aliases; unknown names list what is known", () => {
  const t = routeTable([dep("a", { lane: "vision" }), dep("b")], [lane("vision", { deployment: "a" })]);
  const r = t.resolve("vision");
  assert.equal(r.kind === "route" && r.target.deployment, "a");
  assert.equal(r.kind === "route" && r.target.served_model, "a");
  const b = t.resolve("b");
  assert.equal(b.kind === "route" && b.target.endpoint, "http://b:8000");
  assert.deepEqual(t.resolve("nope"), { kind: "unknown", known: ["a", "b", "vision"] });
  assert.equal(t.resolve(undefined).kind, "unknown", "two deployments: the request must say which");
  assert.equal(routeTable([dep("a")], []).resolve(undefined).kind, "route", "one deployment: no model needed");
});

test("routing: booting and degraded deployments answer unavailable with their phase or missing node", () => {
  const t = routeTable([dep("a", { status: "booting", phase: "loading" }), dep("b", { status: "degraded", phase: "-", missing: ["rank 1 on n2 (exited, exit 137)"] })], []);
  const a = t.resolve("a");
  assert.equal(a.kind, "unavailable");
  assert.match(a.kind === "unavailable" ? a.message : "", /booting: phase loading/);
  assert.equal(a.kind === "unavailable" && a.code, "model_booting");
  const b = t.resolve("b");
  assert.match(b.kind === "unavailable" ? b.message : "", /missing rank 1 on n2/);
  assert.equal(b.kind === "unavailable" && b.code, "deployment_degraded");
});

test("routing: a serving deployment with an unreachable worker routes; one that cannot be judged answers 503 naming the node", () => {
  const worker = { rank: 1, node: "n2", container: "launcher-a-r1", state: "unreachable" as const };
  const serving = dep("a", { unreachable: ["n2"], ranks: [...dep("a").ranks, worker] });
  const r = routeTable([serving], []).resolve("a");
  assert.equal(r.kind === "route" && r.target.deployment, "a");
  assert.deepEqual(routeTable([serving], []).models()[0]?.nodes, ["n1", "n2"]);
  const unknown = dep("b", { status: "unreachable", phase: "unknown", unreachable: ["n2"], ranks: [...dep("b").ranks, { ...worker, container: "launcher-b-r1" }] });
  const u = routeTable([unknown], []).resolve("b");
  assert.equal(u.kind === "unavailable" && u.code, "deployment_unreachable");
  assert.match(u.kind === "unavailable" ? u.message : "", /deployment b\) cannot be reached: n2 unreachable/);
  assert.equal(routeTable([unknown], []).models()[0]?.status, "unreachable");
  // Every node of the lane's deployment unreadable: not "empty", unknown.
  const lost = routeTable([], [lane("vision", { deployment: "a" })], undefined, ["c/n1"]).resolve("vision");
  assert.equal(lost.kind === "unavailable" && lost.code, "deployment_unreachable");
  assert.match(lost.kind === "unavailable" ? lost.message : "", /it last served a\), and c\/n1 could not be read/);
  const empty = routeTable([], [lane("vision", { deployment: "a" })]).resolve("vision");
  assert.equal(empty.kind === "unavailable" && empty.code, "lane_empty", "every node read: the lane is empty");
});

test("routing during a swap: the lane's deployment wins until the store switches; switching answers 503", () => {
  const old = dep("old", { lane: "vision", served_model: "m", uptime_seconds: 500 });
  const fresh = dep("new", { lane: "vision", served_model: "m", uptime_seconds: 5 });
  const before = routeTable([old, fresh], [lane("vision", { deployment: "old" })]);
  const r1 = before.resolve("vision");
  assert.equal(r1.kind === "route" && r1.target.deployment, "old");
  const r1m = before.resolve("m");
  assert.equal(r1m.kind === "route" && r1m.target.deployment, "old", "a served name shared by two follows the lane");
  const r2 = routeTable([old, fresh], [lane("vision", { deployment: "new" })]).resolve("vision");
  assert.equal(r2.kind === "route" && r2.target.deployment, "new");
  // Without a store (a gateway on another machine): serving beats booting, then the newest.
  const noStore = routeTable([old, { ...fresh, status: "booting", phase: "loading" }], []).resolve("vision");
  assert.equal(noStore.kind === "route" && noStore.target.deployment, "old");
  assert.equal(((r) => r.kind === "route" && r.target.deployment)(routeTable([old, fresh], []).resolve("vision")), "new");

  const switching = lane("vision", { state: "switching", deployment: "old", switching_to: "new" });
  const s = routeTable([{ ...fresh, status: "booting", phase: "kv-cache" }], [switching]).resolve("vision");
  assert.equal(s.kind === "unavailable" && s.code, "lane_switching");
  assert.match(s.kind === "unavailable" ? s.message : "", /switching from old to new \(phase kv-cache\)/);
  const done = routeTable([fresh], [switching]).resolve("vision");
  assert.equal(done.kind === "route" && done.target.deployment, "new", "the labels win once the new one serves");
  // `up` proved it ready after the labels were read: route now rather than after the next poll.
  const proven = lane("vision", { deployment: "new", since: "2026-01-01T00:00:10.000Z" });
  const booting: KnownDeployment = { ...fresh, status: "booting", phase: "warmup" };
  const early = routeTable([booting], [proven], Date.parse("2026-01-01T00:00:09.000Z")).resolve("vision");
  assert.equal(early.kind === "route" && early.target.deployment, "new");
  const byName = routeTable([booting], [proven], Date.parse("2026-01-01T00:00:09.000Z")).resolve("m");
  assert.equal(byName.kind === "route" && byName.target.deployment, "new", "its served name too");
  const stale = routeTable([booting], [proven], Date.parse("2026-01-01T00:00:11.000Z")).resolve("vision");
  assert.equal(stale.kind, "unavailable", "labels read after the switch say booting: believe them");
  const empty = routeTable([], [lane("vision", { state: "empty" })]).resolve("vision");
  assert.equal(empty.kind === "unavailable" && empty.code, "lane_empty");
});

test("/v1/models lists lanes and served names with lane, recipe, status and nodes", () => {
  const t = routeTable([dep("a", { lane: "vision", recipe: "ra" }), dep("b", { status: "booting", phase: "loading" })], [lane("vision", { deployment: "a" })]);
  assert.deepEqual(t.models(), [
    { id: "a", deployment: "a", recipe: "ra", phase: "serving", lane: "vision", status: "serving", nodes: ["n1"] },
    { id: "b", deployment: "b", recipe: "b", phase: "loading", status: "booting", nodes: ["n1"] },
    { id: "vision", deployment: "a", recipe: "ra", phase: "serving", lane: "vision", status: "serving", nodes: ["n1"] },
  ]);
});

test("API keys: Bearer or x-api-key; every key is compared; none configured never matches", () => {
  const check = keyChecker(["k1", "second-key"]);
  assert.equal(check("k1"), true);
  assert.equal(check("second-key"), true);
  assert.equal(check("k2"), false);
  assert.equal(check(""), false);
  assert.equal(check(undefined), false);
  assert.equal(keyChecker([])("anything"), false);
  assert.equal(presentedKey("Bearer abc", undefined), "abc");
  assert.equal(presentedKey("bearer  abc ", undefined), "abc");
  assert.equal(presentedKey(undefined, "xyz"), "xyz");
  assert.equal(presentedKey("Basic abc", undefined), undefined);
  assert.deepEqual(parseKeyFile("# keys\nk1\n\n  k2  \n"), ["k1", "k2"]);
});

test("hop-by-hop headers and the client's key are not forwarded", () => {
  const out = forwardHeaders(
    { host: "gw", connection: "keep-alive, x-trace", "keep-alive": "timeout=5", "x-trace": "1", "transfer-encoding": "chunked", authorization: "Bearer k", "content-type": "application/json", "x-request-id": "r1", te: "trailers", upgrade: "h2c", expect: "100-continue" },
    REQUEST_DROP,
  );
  assert.deepEqual(out, { "content-type": "application/json", "x-request-id": "r1" });
});

test("--listen: host:port, [v6]:port, :port, port; loopback detection", () => {
  assert.deepEqual(parseListen("127.0.0.1:8080"), { host: "127.0.0.1", port: 8080 });
  assert.deepEqual(parseListen("0.0.0.0:80"), { host: "0.0.0.0", port: 80 });
  assert.deepEqual(parseListen("[::1]:9"), { host: "::1", port: 9 });
  assert.deepEqual(parseListen(":8081"), { host: "127.0.0.1", port: 8081 });
  assert.deepEqual(parseListen("8082"), { host: "127.0.0.1", port: 8082 });
  assert.equal(parseListen("host:99999"), undefined);
  assert.equal(parseListen("nonsense"), undefined);
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "localhost"]) assert.equal(isLoopback(h), true, h);
  for (const h of ["0.0.0.0", "10.0.0.1", "::", "gateway.lan"]) assert.equal(isLoopback(h), false, h);
});

test("swap placement: free nodes first (no downtime), else the lane's own nodes, never another's", () => {
  const nodes = ["n1", "n2", "n3", "n4"];
  const lane = new Set(["old"]);
  assert.deepEqual(placeSwap(nodes, 2, new Map([["n1", "old"], ["n2", "old"]]), lane), { ok: true, nodes: ["n3", "n4"], mode: "disjoint" });
  assert.deepEqual(placeSwap(nodes, 2, new Map([["n1", "old"], ["n2", "old"], ["n3", "other"]]), lane), { ok: true, nodes: ["n1", "n2"], mode: "overlap" });
  assert.deepEqual(placeSwap(nodes, 4, new Map([["n1", "old"], ["n2", "old"]]), lane), { ok: true, nodes, mode: "overlap" });
  const full = placeSwap(nodes, 3, new Map([["n1", "old"], ["n3", "other"], ["n4", "other"]]), lane);
  assert.equal(full.ok, false);
  assert.match(full.ok ? "" : full.message, /held by other/);
});

test("the page's session cookie never goes to an engine, and an engine sets no cookie on the daemon's origin", async () => {
  const { forwardHeaders, REQUEST_DROP, RESPONSE_DROP } = await import("../../src/gateway/headers.js");
  assert.equal(forwardHeaders({ cookie: "launcher_session=abcdefghijklmnopqrstuvwxyz", accept: "*/*" }, REQUEST_DROP).cookie, undefined);
  assert.equal(forwardHeaders({ "set-cookie": ["launcher_session=planted; Path=/launcher/v1/"], "content-type": "text/event-stream" }, RESPONSE_DROP)["set-cookie"], undefined);
});
