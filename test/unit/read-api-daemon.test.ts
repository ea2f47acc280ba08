import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { bootAgain } from "../../src/daemon/reboot.js";
import { controlApi } from "../../src/daemon/control.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { launcherApi, MAX_LOG_READS, ReadFeed, type PushedPoint, type ReadAccess, type ReadParts } from "../../src/daemon/read-api.js";
import { followEvents, followLogs, readAnswer, readLogs, type PlainReadKind } from "../../src/daemon/read-client.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import { READ_PATHS, type LogLine, type ReadEvent } from "../../src/contract/read-api.js";
import { keyChecker } from "../../src/gateway/auth.js";
import { clusterStatus } from "../../src/nodes/status.js";
import { Store } from "../../src/store/store.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { FakeCluster, RECIPE } from "../support/fake-cluster.js";
import { until } from "../support/until.js";

// The read API as the daemon serves it (src/daemon/read-api.ts launcherApi, the control API behind
// it), over HTTP on loopback, on a FakeCluster: discovery's polls are clusterStatus's reads of the
// fake nodes (what a `status --watch --json` watcher prints), the boots run in a real BootRegistry
// through the `up` use case, the store is real. Answers are read with the client
// (src/daemon/read-client.ts), so each one decodes with the contract.

const ADMIN = "admin-key-0123456789";
const INFERENCE = "inference-key-0123456789";
const ENGINE_KEY = "engine-key-5e1f0123";

/** Discovery as the daemon's: a snapshot, its subscribers, and a poll of the fake nodes on demand. */
class Polls {
  private snap: Snapshot = { deployments: [], strangers: [], unreachable: [] };
  private readonly listeners = new Set<(s: Snapshot) => void>();
  constructor(private readonly fc: FakeCluster) {}
  snapshot(): Snapshot {
    return this.snap;
  }
  subscribe(f: (s: Snapshot) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }
  async poll(): Promise<void> {
    const at = new Date();
    const s = await clusterStatus(this.fc.session, at);
    const name = this.fc.cluster.name;
    this.snap = { deployments: s.deployments.map((d) => ({ ...d, cluster: name })), strangers: [], unreachable: s.unreachable.map((n) => `${name}/${n}`), at };
    for (const f of this.listeners) f(this.snap);
  }
}

/** Pushed metrics and requests, as the scraper and the activity log will push them. */
class Pushes {
  private readonly listeners = new Set<(p: PushedPoint) => void>();
  metrics = () => [];
  activity = () => [];
  subscribe(f: (p: PushedPoint) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }
  push(p: PushedPoint): void {
    for (const f of this.listeners) f(p);
  }
}

interface World {
  readonly fc: FakeCluster;
  readonly store: Store;
  readonly registry: BootRegistry;
  readonly polls: Polls;
  readonly pushes: Pushes;
  /** A server of the API with these access rules; its URL. */
  serve(access: ReadAccess): Promise<string>;
  /** How many clients the event stream has. */
  clients(): number;
}

async function withWorld(body: (w: World) => Promise<void>): Promise<void> {
  const fc = await FakeCluster.start();
  const store = new Store(":memory:");
  const registry = new BootRegistry(Date.now);
  const polls = new Polls(fc);
  const pushes = new Pushes();
  const logs: string[] = [];
  const parts: ReadParts = {
    discovery: polls,
    supervision: () => ({}),
    clusters: async () => [fc.cluster],
    session: async (c) => (c === fc.cluster.name ? fc.session : undefined),
    store,
    registry,
    sources: pushes,
    log: (l) => void logs.push(l),
  };
  const feed = new ReadFeed(parts);
  feed.start();
  // Refused at once: what a submission does is not this test's (control.ts's tests say it).
  const control = controlApi({ registry, submit: () => [], maxBodyBytes: 1 << 20, checkAdmin: keyChecker([ADMIN]) });
  const servers: Server[] = [];
  const serve = async (access: ReadAccess): Promise<string> => {
    const handler = launcherApi(parts, feed, access, control);
    const server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  try {
    await body({ fc, store, registry, polls, pushes, serve, clients: () => feed.hub.size });
  } finally {
    feed.stop();
    await registry.detachAll("test over", 5000);
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await fc.close();
    store.close();
  }
}

/** Boots the recipe in the registry, as the daemon runs a submitted boot; resolves with its last event's type. */
async function boot(w: World, recipe = RECIPE): Promise<string> {
  const plan = w.fc.plan(recipe);
  const entry = w.registry.start({ deployment: plan.deployment, cluster: plan.cluster }, (emit, signal, detach) => bootAgain(plan, w.fc.session, signal, w.store, emit, undefined, detach));
  return (await entry.ended).type;
}

const PLAIN: readonly PlainReadKind[] = ["clusters", "deployments", "lanes", "boots", "history", "runs", "metrics", "activity"];

test("read API: every route answers an admin key and an inference key in the contract's shapes; no key is 401; an inference key cannot POST", { timeout: 60_000 }, () =>
  withWorld(async (w) => {
    const url = await w.serve({ checkRead: keyChecker([ADMIN, INFERENCE]) });
    assert.equal(await boot(w), "result");
    await w.polls.poll();
    for (const key of [ADMIN, INFERENCE]) {
      for (const kind of PLAIN) await readAnswer({ url, key }, kind);
      const deployments = await readAnswer({ url, key }, "deployments");
      assert.deepEqual(deployments.deployments.map((d) => `${d.cluster}/${d.deployment} ${d.status} ${d.ranks.length}`), ["fake/r serving 2"]);
      const clusters = await readAnswer({ url, key }, "clusters");
      assert.deepEqual(clusters.clusters[0]?.nodes.map((n) => `${n.name} ${String(n.reachable)}`), ["n1 true", "n2 true"]);
      const history = await readAnswer({ url, key }, "history", { recipe: "r", limit: 5 });
      assert.equal(history.boots[0]?.outcome, "ready");
      assert.ok((history.boots[0]?.seconds ?? -1) >= 0);
      const boots = await readAnswer({ url, key }, "boots");
      assert.deepEqual(boots.boots.map((b) => [b.deployment, b.state, b.events[0]?.type, b.events.at(-1)?.type]), [["r", "ready", "accepted", "result"]]);
      assert.equal((await readAnswer({ url, key }, "runs", { kind: "compare" })).kind, "compare");
    }
    for (const path of [...PLAIN.map((k) => READ_PATHS[k]), READ_PATHS.events, READ_PATHS.logs("r")]) {
      const res = await fetch(`${url}${path}`, { headers: { authorization: "Bearer wrong" } });
      assert.equal(res.status, 401, path);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "invalid_key");
    }
    const post = (key: string): Promise<Response> => fetch(`${url}${CONTROL_PATHS.boots}`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: "{" });
    const refused = await post(INFERENCE);
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "invalid_admin_key");
    assert.equal((await post(ADMIN)).status, 400, "the admin key reaches the control API, which reads the body");
    assert.equal((await fetch(`${url}${READ_PATHS.lanes}`, { method: "DELETE", headers: { authorization: `Bearer ${ADMIN}` } })).status, 405);
    assert.equal((await fetch(`${url}${READ_PATHS.history}?limit=0`, { headers: { authorization: `Bearer ${ADMIN}` } })).status, 400);
    assert.equal((await fetch(`${url}${READ_PATHS.runs}?kind=other`, { headers: { authorization: `Bearer ${ADMIN}` } })).status, 400);
    // The owner socket's peer reads without a key; a daemon with no key at all reads over TCP to no one.
    assert.equal((await readAnswer({ url: await w.serve({ ownerSocket: true }) }, "deployments")).deployments.length, 1);
    assert.equal((await fetch(`${await w.serve({})}${READ_PATHS.deployments}`)).status, 401);
  }),
);

test("read API events: a boot's events, a deployment and its nodes appearing in a poll, and pushed points reach an SSE client as they happen", { timeout: 60_000 }, () =>
  withWorld(async (w) => {
    const url = await w.serve({ checkRead: keyChecker([ADMIN, INFERENCE]) });
    const seen: ReadEvent[] = [];
    const stop = new AbortController();
    const following = followEvents({ url, key: INFERENCE }, (e) => void seen.push(e), stop.signal);
    const context = (): string => `; seen: ${seen.map((e) => e.event).join(", ")}`;
    // Events are sent to the clients the stream has when they happen: this one first.
    await until("the stream's client", () => w.clients() === 1, 10_000);
    assert.equal(await boot(w), "result");
    await until("the boot's events", () => seen.some((e) => e.event === "boot" && e.data.event.type === "result"), 10_000, context);
    const bootEvents = seen.flatMap((e) => (e.event === "boot" ? [e.data.event.type] : []));
    assert.equal(bootEvents[0], "accepted");
    assert.ok(bootEvents.includes("node"), bootEvents.join(" "));
    assert.ok(!seen.some((e) => e.event === "deployment"), "no poll yet: no deployment event");
    await w.polls.poll();
    await until("the deployment's event", () => seen.some((e) => e.event === "deployment" && e.data.deployment === "r" && e.data.status === "serving"), 10_000, context);
    await until("the nodes' events", () => seen.filter((e) => e.event === "node" && e.data.reachable).length === 2, 10_000, context);
    const before = seen.length;
    await w.polls.poll();
    w.pushes.push({ event: "activity", data: { t: 1, model: "served", status: 200 } });
    w.pushes.push({ event: "metrics", data: { cluster: "fake", deployment: "r", point: { t: 2, kv_cache_usage: 0.25 } } });
    await until("the pushed points", () => seen.some((e) => e.event === "metrics") && seen.some((e) => e.event === "activity"), 10_000, context);
    assert.deepEqual(seen.slice(before).map((e) => e.event), ["activity", "metrics"], "a poll like the last one says nothing");
    stop.abort();
    await following;
  }),
);

test("read API logs: a deployment's lines merged across nodes with node and rank, the engine's key redacted; a follow streams new lines", { timeout: 60_000 }, () =>
  withWorld(async (w) => {
    const url = await w.serve({ checkRead: keyChecker([ADMIN, INFERENCE]) });
    // The recipe's env ends the file: its engine key, which the boot records in the store.
    assert.equal(await boot(w, `${RECIPE}VLLM_API_KEY = "${ENGINE_KEY}"\n`), "result");
    await w.polls.poll();
    w.fc.node("n1").say("launcher-r-r0", `non-default args: {'api_key': ['${ENGINE_KEY}']}`);
    const target = { url, key: INFERENCE };
    const read = await readLogs(target, "r");
    assert.deepEqual([...new Set(read.lines.map((l) => `${l.node}/${l.rank}`))].sort(), ["n1/0", "n2/1"]);
    assert.ok(read.lines.some((l) => l.text === "non-default args: {'api_key': ['<redacted>']}"), JSON.stringify(read.lines));
    assert.doesNotMatch(JSON.stringify(read), new RegExp(ENGINE_KEY));
    const times = read.lines.map((l) => l.t ?? "");
    assert.deepEqual(times, [...times].sort(), "in time order");
    const none = await fetch(`${url}${READ_PATHS.logs("nobody")}`, { headers: { authorization: `Bearer ${INFERENCE}` } });
    assert.equal(none.status, 404);

    const lines: LogLine[] = [];
    const stop = new AbortController();
    const following = followLogs(target, "r", { tail: 1 }, (l) => void lines.push(l), stop.signal);
    await until("the tail", () => lines.length >= 2, 10_000, () => JSON.stringify(lines));
    w.fc.node("n2").say("launcher-r-r1", "a new line");
    await until("the new line", () => lines.some((l) => l.node === "n2" && l.rank === 1 && l.text === "a new line"), 10_000, () => JSON.stringify(lines));
    // Each read runs `docker logs` on every node: at most MAX_LOG_READS at once, the next refused.
    const more = Array.from({ length: MAX_LOG_READS - 1 }, () => followLogs(target, "r", { tail: 0 }, () => undefined, stop.signal));
    await until("the follows' docker logs", () => w.fc.node("n1").calls.filter((c) => c.op === "logs").length >= MAX_LOG_READS + 1, 10_000);
    const refused = await fetch(`${url}${READ_PATHS.logs("r")}`, { headers: { authorization: `Bearer ${INFERENCE}` } });
    assert.equal(refused.status, 503);
    stop.abort();
    await Promise.all([following, ...more]);
    // The follows end on the daemon's side once their clients went: a read is taken again.
    const end = Date.now() + 10_000;
    let status = 503;
    while (status === 503 && Date.now() < end) {
      status = (await fetch(`${url}${READ_PATHS.logs("r")}`, { headers: { authorization: `Bearer ${INFERENCE}` } })).status;
      if (status === 503) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(status, 200);
  }),
);
