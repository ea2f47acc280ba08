// What the read API's event stream costs the daemon, and how soon an event reaches a client
// (issue 29's targets: an event on the page within 250 ms; the daemon's CPU within 5% of one core
// above what it uses without the page). In process, over HTTP on loopback: the read API as the
// daemon mounts it (src/daemon/read-api.ts launcherApi, its ReadFeed), a discovery stand-in that
// publishes a 4-node cluster of 8 deployments (4 ranks each) with one deployment's phase changed
// per poll, and a real store holding 4 lanes. Rounds are interleaved: no client, 1 client, 32
// clients (the hub's most). Printed per setting: the daemon's own work per poll (the diff, the
// store's lane reads and the writes to every client, until the feed settles), as a share of one
// core at launcher serve's default --poll (2 s), and the time from a poll's publish until every
// client decoded its event (clients run in this process too, so their parsing adds to that time).
// Run: node --import tsx bench/read-api.ts   (BENCH_ROUNDS, default 5; BENCH_POLLS per round, default 200)
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseCluster } from "../src/cluster/parse.js";
import type { Snapshot } from "../src/daemon/discovery.js";
import { launcherApi, NO_READ_SOURCES, ReadFeed } from "../src/daemon/read-api.js";
import { followEvents } from "../src/daemon/read-client.js";
import type { KnownDeployment } from "../src/gateway/routes.js";
import { Store } from "../src/store/store.js";
import { BootRegistry } from "../src/supervise/boots.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "5");
const POLLS = Number(process.env.BENCH_POLLS ?? "200");
/** launcher serve's default --poll (src/daemon/config.ts SERVE_DEFAULTS), in ms. */
const POLL_MS = 2000;
const SETTINGS = [0, 1, 32] as const;
const NODES = ["n1", "n2", "n3", "n4"];
const PHASES = ["loading", "kv-cache", "graph-capture", "warmup"] as const;

const parsed = parseCluster("bench.toml", `name = "bench"\n${NODES.map((n) => `[[nodes]]\nname = "${n}"\nhost = "${n}"\n`).join("")}`);
if (parsed.cluster === undefined) throw new Error(JSON.stringify(parsed.diagnostics));
const cluster = parsed.cluster;

const deployment = (i: number, poll: number): KnownDeployment => ({
  cluster: "bench", deployment: `d${i}`, recipe: `r${i}`, recipe_hash: "h", served_model: `m${i}`, endpoint: `http://n1:${8000 + i}`,
  status: "booting", phase: i === poll % 8 ? (PHASES[poll % PHASES.length] ?? "loading") : "loading", missing: [], unreachable: [],
  ranks: NODES.map((node, rank) => ({ rank, node, container: `launcher-d${i}-r${rank}`, state: "running", started_at: "2026-12-05T00:00:00Z" })),
});

const listeners = new Set<(s: Snapshot) => void>();
let snap: Snapshot = { deployments: [], strangers: [], unreachable: [] };
const discovery = { snapshot: () => snap, subscribe: (f: (s: Snapshot) => void) => (listeners.add(f), () => listeners.delete(f)) };
const store = new Store(":memory:");
for (let i = 0; i < 4; i++) store.setLane({ name: `lane${i}`, cluster: "bench", deployment: `d${i}`, state: "serving", since: "2026-12-05T00:00:00Z" });
const parts = { discovery, supervision: () => ({}), clusters: async () => [cluster], session: async () => undefined, store, registry: new BootRegistry(Date.now), sources: NO_READ_SOURCES, log: () => undefined };
const feed = new ReadFeed(parts, { maxClients: 32, maxBacklogBytes: 1024 * 1024, heartbeatMs: 60_000, retryMs: 2000 });
feed.start();
const handler = launcherApi(parts, feed, { checkRead: (k) => k === "bench-key" }, undefined);
const server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const p95 = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.95)] ?? Number.NaN;
const work: Record<number, number[]> = { 0: [], 1: [], 32: [] };
const latency: Record<number, number[]> = { 0: [], 1: [], 32: [] };
let poll = 0;

/** One round of POLLS polls with `clients` SSE clients. */
async function round(clients: number): Promise<void> {
  const stop = new AbortController();
  let waiting: { count: number; done: () => void } | undefined;
  const streams = Array.from({ length: clients }, () =>
    followEvents({ url, key: "bench-key" }, (e) => {
      if (e.event === "deployment" && waiting !== undefined && --waiting.count === 0) waiting.done();
    }, stop.signal),
  );
  while (feed.hub.size < clients) await new Promise((r) => setTimeout(r, 5));
  for (let i = 0; i < POLLS; i++) {
    poll++;
    snap = { deployments: Array.from({ length: 8 }, (_, d) => deployment(d, poll)), strangers: [], unreachable: [], at: new Date() };
    const heard = clients === 0 ? Promise.resolve() : new Promise<void>((done) => (waiting = { count: clients, done }));
    const t0 = performance.now();
    for (const f of listeners) f(snap);
    await feed.settled();
    work[clients]?.push(performance.now() - t0);
    await heard;
    latency[clients]?.push(performance.now() - t0);
  }
  stop.abort();
  await Promise.all(streams);
  // The next round counts its own clients only: these must be gone from the hub first.
  while (feed.hub.size > 0) await new Promise((r) => setTimeout(r, 5));
}

for (let r = 0; r < ROUNDS; r++) for (const c of SETTINGS) await round(c);
console.log(`node ${process.version}; ${ROUNDS} rounds x ${POLLS} polls per setting, interleaved; 8 deployments x 4 ranks, 4 nodes, 4 lanes`);
console.log("clients  work/poll median  p95      CPU share at --poll 2s  event to every client median  p95");
for (const c of SETTINGS) {
  const w = work[c] ?? [];
  const l = latency[c] ?? [];
  const share = (median(w) / POLL_MS) * 100;
  console.log(`${String(c).padStart(7)}  ${median(w).toFixed(3).padStart(9)} ms  ${p95(w).toFixed(3).padStart(6)} ms  ${share.toFixed(3).padStart(8)} % of a core  ${c === 0 ? "            -" : `${median(l).toFixed(2).padStart(10)} ms`}  ${c === 0 ? "-" : `${p95(l).toFixed(2)} ms`}`);
}
feed.stop();
server.closeAllConnections();
server.close();
store.close();
