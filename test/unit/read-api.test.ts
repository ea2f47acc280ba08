import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { ServerResponse } from "node:http";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { decodeRead, decodeReadEvent, encodeRead, MAX_LOG_TAIL, type DeploymentView, type LaneView } from "../../src/contract/read-api.js";
import type { KnownDeployment } from "../../src/gateway/routes.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { DEFAULT_LOG_TAIL, followLogLines, logLine, mergeLogLines, parseLogQuery } from "../../src/daemon/read-logs.js";
import { FakeNode } from "../support/fake-node.js";
import { bootView, clusterView, deploymentsAnswer, diffPictures, EMPTY_PICTURE, historyBoot, nodeStates, type Picture } from "../../src/daemon/read-views.js";
import { sseComment, sseFrame, SseHub, SseParser, sseRetry } from "../../src/daemon/sse.js";
import type { Meminfo } from "../../src/memory/meminfo.js";

const cluster = (() => {
  const parsed = parseCluster("c.toml", `name = "c"\nmemory_floor = 8\n[[nodes]]\nname = "n1"\nhost = "h1"\n[[nodes]]\nname = "n2"\nhost = "h2"\nmemory_floor = 4\n`);
  assert.ok(parsed.cluster, JSON.stringify(parsed.diagnostics));
  return parsed.cluster;
})();

const deployment = (name: string, over: Partial<KnownDeployment> = {}): KnownDeployment => ({
  cluster: "c",
  deployment: name,
  recipe: name,
  recipe_hash: "abc",
  served_model: "m",
  endpoint: "http://h1:8000",
  status: "serving",
  phase: "serving",
  missing: [],
  unreachable: [],
  ranks: [{ rank: 0, node: "n1", container: `launcher-${name}-r0`, state: "running", started_at: "2026-12-05T01:00:00Z" }],
  ...over,
});

const snapshot = (deployments: KnownDeployment[], unreachable: string[] = []): Snapshot => ({ deployments, strangers: [], unreachable, at: new Date("2026-12-05T02:00:00Z") });

const lane = (name: string, deployment: string): LaneView => ({ name, cluster: "c", deployment, state: "serving", since: "2026-12-05T01:00:00Z", swaps: [] });

const picture = (deployments: DeploymentView[], s: Snapshot, lanes: LaneView[] = []): Picture => ({ deployments, nodes: nodeStates([cluster], s), lanes });

test("read API diff: a poll that differs from the last says each deployment, node and lane that changed, and nothing when none did", () => {
  const s1 = snapshot([deployment("a")]);
  const p1 = picture(deploymentsAnswer(s1, {}).deployments, s1, [lane("chat", "a")]);
  assert.deepEqual(diffPictures(p1, p1), []);
  const first = diffPictures(EMPTY_PICTURE, p1).map((e) => e.event);
  assert.deepEqual(first, ["deployment", "node", "node", "lane"]);

  const s2 = snapshot([deployment("a", { status: "degraded", phase: "-" }), deployment("b", { status: "booting", phase: "loading" })], ["c/n2"]);
  const p2 = picture(deploymentsAnswer(s2, { "c/a": "restarting (1 restart)" }).deployments, s2, [lane("chat", "b")]);
  const events = diffPictures(p1, p2);
  assert.deepEqual(
    events.map((e) => [e.event, e.event === "deployment" ? e.data.deployment : e.event === "node" ? `${e.data.node} ${String(e.data.reachable)}` : e.event === "lane" ? `${e.data.name} ${e.data.deployment ?? ""}` : ""]),
    [["deployment", "a"], ["deployment", "b"], ["node", "n2 false"], ["lane", "chat b"]],
  );
  const a = events.find((e) => e.event === "deployment" && e.data.deployment === "a");
  assert.equal(a?.event === "deployment" ? a.data.supervision : undefined, "restarting (1 restart)");

  const s3 = snapshot([deployment("b")]);
  const gone = diffPictures(p2, picture(deploymentsAnswer(s3, {}).deployments, s3, []));
  assert.deepEqual(
    gone.filter((e) => e.event !== "deployment" && e.event !== "node"),
    [{ event: "deployment_removed", data: { cluster: "c", deployment: "a" } }, { event: "lane_removed", data: { name: "chat" } }],
  );
});

const meminfo = (totalGiB: number, availableGiB: number, cachedGiB: number): Meminfo => ({ totalKiB: totalGiB * 1048576, availableKiB: availableGiB * 1048576, freeKiB: 0, cachedKiB: cachedGiB * 1048576, shmemKiB: 0, reclaimableSlabKiB: 0 });

test("read API clusters: each node's floor, its newer memory reading (the guard's or doctor's) with doctor's page cache, its fabric, and its reachability only once polled", () => {
  const reads = {
    facts: { facts: new Map([["n1", { fabric_ip: "10.0.0.1", hca: ["rocep1s0f1"], ports_up: 1 }]]), detected_at: "2026-12-04T00:00:00Z" },
    memory: new Map([
      ["n1", { meminfo: meminfo(128, 100, 20), read_at: "2026-12-05T00:00:00Z" }],
      ["n2", { meminfo: meminfo(128, 90, 30), read_at: "2026-12-05T03:00:00Z" }],
    ]),
    watched: new Map([
      ["n1", { deployment: "a", sample: { totalKiB: 128 * 1048576, availableKiB: 40 * 1048576 }, at: "2026-12-05T01:00:00Z" }],
      ["n2", { deployment: "a", sample: { totalKiB: 128 * 1048576, availableKiB: 50 * 1048576 }, at: "2026-12-05T01:00:00Z" }],
    ]),
  };
  const view = clusterView(cluster, reads, snapshot([], ["c/n2"]));
  const [n1, n2] = view.nodes;
  assert.deepEqual(n1?.memory, { total_kib: 128 * 1048576, available_kib: 40 * 1048576, floor_gib: 8, page_cache_kib: 20 * 1048576, source: "guard", deployment: "a", read_at: "2026-12-05T01:00:00Z" });
  assert.equal(n2?.memory?.source, "doctor");
  assert.equal(n2?.memory?.floor_gib, 4);
  assert.deepEqual([n1?.reachable, n2?.reachable], [true, false]);
  assert.deepEqual(n1?.fabric, { fabric_ip: "10.0.0.1", hca: ["rocep1s0f1"], ports_up: 1 });
  assert.equal(view.facts_detected_at, "2026-12-04T00:00:00Z");
  const before = clusterView(cluster, { facts: { facts: new Map() }, memory: new Map(), watched: new Map() }, { deployments: [], strangers: [], unreachable: [] });
  assert.deepEqual(before.nodes[0], { name: "n1", rank: 0 });
  assert.ok(decodeRead("clusters", JSON.parse(encodeRead("clusters", { clusters: [view, before] }))).ok);
});

test("read API history: each phase's duration and the boot's own, none for what still runs", () => {
  const h = historyBoot({
    id: 1, deployment: "a", recipe: "a", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "e", nodes: ["n1"], started_at: "2026-12-05T01:00:00.000Z", ended_at: "2026-12-05T01:02:00.500Z", outcome: "ready",
    phases: [
      { node: "n1", phase: "loading", started_at: "2026-12-05T01:00:10.000Z", ended_at: "2026-12-05T01:01:40.250Z", figures: { weights_gib: "60" } },
      { node: "n1", phase: "serving", started_at: "2026-12-05T01:01:40.250Z", figures: {} },
    ],
  });
  assert.equal(h.seconds, 120.5);
  assert.deepEqual(h.phases.map((p) => p.seconds), [90.25, undefined]);
  assert.ok(decodeRead("history", JSON.parse(encodeRead("history", { boots: [h] }))).ok);
});

test("read API logs: lines of every node merged by docker's timestamp (stable, unstamped first), keys redacted, and the query bounded", () => {
  const lines = mergeLogLines([
    logLine("n2", 1, "2026-12-05T01:00:00.000000002Z b2", []),
    logLine("n1", 0, "2026-12-05T01:00:00.000000001Z a1 key=sk-secret", ["sk-secret"]),
    logLine("n2", 1, "2026-12-05T01:00:00.000000002Z b3", []),
    logLine("n1", 0, "no stamp", []),
  ]);
  assert.deepEqual(lines.map((l) => `${l.node}/${l.rank} ${l.text}`), ["n1/0 no stamp", "n1/0 a1 key=<redacted>", "n2/1 b2", "n2/1 b3"]);
  assert.equal(lines[1]?.t, "2026-12-05T01:00:00.000000001Z");

  const q = (text: string): ReturnType<typeof parseLogQuery> => parseLogQuery(new URLSearchParams(text));
  assert.deepEqual(q(""), { ok: true, query: { tail: DEFAULT_LOG_TAIL, follow: false } });
  assert.deepEqual(q("tail=999999&follow=1&since=1764900000&cluster=c"), { ok: true, query: { tail: MAX_LOG_TAIL, follow: true, since: { unixSeconds: 1764900000 }, cluster: "c" } });
  assert.deepEqual(q("since=2026-12-05T02:00:00Z"), { ok: true, query: { tail: DEFAULT_LOG_TAIL, follow: false, since: { unixSeconds: Date.parse("2026-12-05T02:00:00Z") / 1000 } } });
  for (const bad of ["tail=-1", "tail=1e9", "since=yesterday", "since=2026-12-05T02:00:00", "follow=yes"]) assert.equal(q(bad).ok, false, bad);
});

test("SSE: what the server frames the reader reads back, whatever the chunks; comments, retry and unknown fields are skipped", () => {
  const text = sseRetry(2000) + sseComment("heartbeat\nx") + sseFrame("deployment_removed", { cluster: "c", deployment: "a\nb" }) + "event: x\r\ndata: 1\r\ndata: 2\r\nid: 7\r\n\r\n" + sseFrame("end", { reason: "r" });
  for (const size of [1, 3, 7, text.length]) {
    const parser = new SseParser();
    const got = [];
    for (let i = 0; i < text.length; i += size) got.push(...parser.add(text.slice(i, i + size)));
    assert.deepEqual(got, [
      { event: "deployment_removed", data: '{"cluster":"c","deployment":"a\\nb"}' },
      { event: "x", data: "1\n2" },
      { event: "end", data: '{"reason":"r"}' },
    ]);
  }
  assert.throws(() => new SseParser(10).add("data: 0123456789abc"), /longer than 10/);
  assert.deepEqual(decodeReadEvent("deployment_removed", '{"cluster":"c","deployment":"a"}'), { event: "deployment_removed", data: { cluster: "c", deployment: "a" } });
  assert.equal(decodeReadEvent("constructor", "{}"), undefined);
  assert.equal(decodeReadEvent("node", '{"cluster":"c"}'), undefined);
  assert.equal(decodeReadEvent("node", "not json"), undefined);
});

/** A response that keeps what it was written, with a backlog a test sets. */
class FakeResponse extends EventEmitter {
  written: string[] = [];
  writableLength = 0;
  destroyed = false;
  status = 0;
  writeHead(status: number): this {
    this.status = status;
    return this;
  }
  write(text: string): boolean {
    this.written.push(text);
    return true;
  }
  writableEnded = false;
  end(): void {
    this.writableEnded = true;
    this.emit("close");
  }
  destroy(): void {
    this.destroyed = true;
    this.emit("close");
  }
}

test("SSE hub: at most N clients; a client that reads too slowly is cut and the others still get every event", () => {
  const hub = new SseHub({ maxClients: 2, maxBacklogBytes: 100, heartbeatMs: 60_000, retryMs: 1000 });
  const [fast, slow, third] = [new FakeResponse(), new FakeResponse(), new FakeResponse()];
  assert.ok(hub.add(fast as unknown as ServerResponse));
  assert.ok(hub.add(slow as unknown as ServerResponse));
  assert.equal(hub.add(third as unknown as ServerResponse), false);
  assert.equal(third.status, 0);
  slow.writableLength = 101;
  hub.send("end", { reason: "x" });
  assert.ok(slow.destroyed);
  assert.equal(hub.size, 1);
  hub.send("end", { reason: "y" });
  assert.deepEqual(fast.written, [sseRetry(1000), sseFrame("end", { reason: "x" }), sseFrame("end", { reason: "y" })]);
  assert.equal(slow.written.length, 1);
  assert.ok(hub.add(third as unknown as ServerResponse), "a place freed is taken again");
  hub.close();
  assert.equal(hub.size, 0);
});

const SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/** Where keys are data, not names: a boot's per-node phases, a phase's figures, and a boot's events (the control API's own encoding, src/boot/up-events.ts). */
const DATA = new Set(["$.boots[].nodes", "$.boots[].events", "$.boots[].phases[].figures"]);
/** The paths of keys not in snake_case. */
function offStyle(value: unknown, at = "$"): string[] {
  if (DATA.has(at)) return [];
  if (Array.isArray(value)) return value.flatMap((v) => offStyle(v, `${at}[]`));
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [...(SNAKE.test(k) ? [] : [`${at}.${k}`]), ...offStyle(v, `${at}.${k}`)]);
}

test("read API answers: snake_case keys, only the contract's fields, and each decodes with the contract", () => {
  const s = snapshot([{ ...deployment("a"), extra_field: 1 } as KnownDeployment]);
  const answers = {
    deployments: deploymentsAnswer(s, { "c/a": "watching" }),
    boots: { boots: [bootView({ identity: { deployment: "a", cluster: "c", lane: "chat" }, events: [{ type: "accepted", deployment: "a", cluster: "c", t: 1 }, { type: "memory", node: "n1", sample: { totalKiB: 1, availableKiB: 1 }, t: 2 }] })] },
    lanes: { lanes: [lane("chat", "a")] },
    activity: { requests: [{ t: 1, lane: "chat", deployment: "a", model: "m", key_id: "k1", status: 200, ttft_ms: 12, tokens_in: 3, tokens_out: 4, tokens_per_second: 40 }] },
    metrics: { windows: [{ cluster: "c", deployment: "a", points: [{ t: 1, kv_cache_usage: 0.5, requests_running: 1, requests_waiting: 0, prompt_tps: 100, generation_tps: 20, preemptions: 0, spec_acceptance: 0.7 }] }] },
  } as const;
  for (const [kind, answer] of Object.entries(answers) as [keyof typeof answers, (typeof answers)[keyof typeof answers]][]) {
    const json = JSON.parse(encodeRead(kind, answer as never)) as unknown;
    assert.deepEqual(offStyle(json), [], kind);
    const back = decodeRead(kind, json);
    assert.ok(back.ok, `${kind}: ${back.ok ? "" : back.problem}`);
  }
  assert.ok(!JSON.stringify(JSON.parse(encodeRead("deployments", answers.deployments))).includes("extra_field"));
  assert.equal(decodeRead("deployments", { deployments: [{}] }).ok, false);
});

test("read API logs: a follow ends at its time bound or the daemon's stop with an `end` event, and one that falls behind is cut", async () => {
  const node = new FakeNode("n1");
  const c = node.add("launcher-r-r0", { "launcher.rank": "0" }, { log: ["first"] });
  const res = new FakeResponse();
  await followLogLines(res as unknown as ServerResponse, [{ node: "n1", docker: node, c }], { tail: 10, follow: true }, () => [], { maxMs: 50 });
  const parser = new SseParser();
  const events = res.written.flatMap((t) => parser.add(t));
  assert.deepEqual(events.map((e) => e.event), ["log", "end"]);
  assert.deepEqual(decodeReadEvent("log", events[0]?.data ?? ""), { event: "log", data: { t: (JSON.parse(events[0]?.data ?? "{}") as { t: string }).t, node: "n1", rank: 0, text: "first" } });

  const slow = new FakeResponse();
  slow.writableLength = 2 * 1024 * 1024;
  await followLogLines(slow as unknown as ServerResponse, [{ node: "n1", docker: node, c }], { tail: 10, follow: true }, () => [], { maxMs: 60_000 });
  assert.ok(slow.destroyed);

  const closing = new AbortController();
  const stopped = new FakeResponse();
  const following = followLogLines(stopped as unknown as ServerResponse, [{ node: "n1", docker: node, c }], { tail: 10, follow: true }, () => [], { maxMs: 60_000, closing: closing.signal });
  closing.abort();
  await following;
  assert.deepEqual(new SseParser().add(stopped.written.join("")).map((e) => [e.event, e.data]).at(-1), ["end", '{"reason":"the daemon stops"}']);
});

test("read API logs: a follow whose client left while its sources were looked up ends at once, reading nothing", async () => {
  const node = new FakeNode("n1");
  const c = node.add("launcher-r-r0", { "launcher.rank": "0" }, { log: ["first"] });
  const gone = new FakeResponse();
  gone.destroyed = true;
  await followLogLines(gone as unknown as ServerResponse, [{ node: "n1", docker: node, c }], { tail: 10, follow: true }, () => [], { maxMs: 60_000 });
  assert.deepEqual(gone.written, []);
});

test("read API events: a deployment whose uptime alone grew is no news", async () => {
  const { diffPictures, deploymentViews } = await import("../../src/daemon/read-views.js");
  const d = (uptime: number, status = "serving") => ({ cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://x:1", status, phase: "serving", uptime_seconds: uptime, missing: [], unreachable: [], ranks: [{ rank: 0, node: "n1", container: "c0", state: "running", started_at: "2026-12-05T02:00:00Z" }] });
  const pic = (u: number, status?: string) => ({ deployments: deploymentViews({ deployments: [d(u, status) as never], strangers: [], unreachable: [] }, {}), nodes: new Map(), lanes: [] });
  assert.deepEqual(diffPictures(pic(100), pic(102)), []);
  assert.deepEqual(diffPictures(pic(100), pic(102, "degraded")).map((e) => e.event), ["deployment"]);
});

test("read API logs: one answer holds at most its share of characters per node, each node's newest lines", async () => {
  const { readLogLines } = await import("../../src/daemon/read-logs.js");
  const node = new FakeNode("n1");
  const c = node.add("launcher-r-r0", { "launcher.rank": "0" }, { log: Array.from({ length: 50 }, (_, i) => `${String(i).padStart(2, "0")} ${"x".repeat(97)}`) });
  const lines = await readLogLines([{ node: "n1", docker: node, c }], { tail: 2000, follow: false }, [], new AbortController().signal, 1000);
  assert.ok(lines.length === 10, `${lines.length} lines`);
  assert.deepEqual(lines.map((l) => l.text.slice(0, 2)), ["40", "41", "42", "43", "44", "45", "46", "47", "48", "49"]);
});
