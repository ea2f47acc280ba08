import type { IncomingMessage, ServerResponse } from "node:http";
import { UserError } from "../config/errors.js";
import type { Cluster } from "../cluster/cluster.js";
import { encodeRead, MAX_READ_LIMIT, withoutBodies, READ_ROUTES, RUN_KINDS, type ActivityRecord, type MetricsWindow, type ReadAnswer, type ReadAnswerKind, type ReadEvent, type ReadRoute, type RunKind } from "../contract/read-api.js";
import type { BenchRun } from "../contract/evidence.js";
import { logSources } from "../app/logs.js";
import type { ClusterSession } from "../nodes/session.js";
import type { StateStore } from "../store/store.js";
import type { BootEntry, BootRegistry } from "../supervise/boots.js";
import { presentedKey } from "../gateway/auth.js";
import { allowedMethods, routeParams } from "../gateway/methods.js";
import type { Snapshot } from "./discovery.js";
import { CONTROL_METHODS } from "./control.js";
import { followLogLines, parseLogQuery, readLogLines } from "./read-logs.js";
import { bootView, clusterView, deploymentsAnswer, deploymentViews, diffPictures, EMPTY_PICTURE, historyBoot, laneViews, nodeStates, type GuardTripsOf, type Picture, type Supervision } from "./read-views.js";
import { currentNodeGuardTrips, GUARD_TRIPS_OF_DEPLOYMENT, nodeGuardTripWords } from "../contract/node-guard-trip.js";
import { SSE_DEFAULTS, SseHub, type SseHubOptions } from "./sse.js";
import type { WebSessions } from "./web-session-api.js";

/**
 * The daemon's read API (src/contract/read-api.ts has its routes and answers): what the cluster
 * looks like, and one SSE stream of each change. It answers the admin key or an inference key over
 * TCP, and the daemon's own user through its socket; it changes nothing, so an inference key's
 * holder sees what runs but can start or stop nothing (the control API, ./control.ts, is admin only).
 */

/** A metrics sample or a gateway request, pushed as it happens. */
export type PushedPoint = Extract<ReadEvent, { event: "metrics" | "activity" }>;

/**
 * What the daemon's engine-metrics scraper and the gateway's activity log give the read API. Until
 * they are wired, NO_READ_SOURCES answers empty lists.
 */
export interface ReadSources {
  /** Each serving deployment's window of metrics samples, oldest first. */
  metrics(): MetricsWindow[];
  /** The latest `limit` requests, newest first. */
  activity(limit: number): ActivityRecord[];
  /** Calls `listener` with each new sample and request; returns the unsubscribe. */
  subscribe(listener: (point: PushedPoint) => void): () => void;
}

export const NO_READ_SOURCES: ReadSources = { metrics: () => [], activity: () => [], subscribe: () => () => undefined };

/** What the read API reads. */
export interface ReadParts {
  readonly discovery: { snapshot(): Snapshot; subscribe(f: (s: Snapshot) => void): () => void };
  readonly supervision: () => Supervision;
  /** Every cluster the daemon watches. */
  readonly clusters: () => Promise<readonly Cluster[]>;
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  readonly store: Pick<StateStore, "facts" | "memory" | "watchedMemory" | "lanes" | "swaps" | "history" | "benchRuns" | "evalRuns" | "engineKey" | "launchedKey" | "nodeGuardTrips">;
  readonly registry: Pick<BootRegistry, "list" | "onStart">;
  readonly sources: ReadSources;
  /** The daemon's recipe catalogue by bare name (./recipe-list.ts); absent: none. */
  readonly recipes?: () => ReadAnswer<"recipes">;
  readonly log: (line: string) => void;
}

/** How many swaps of each lane `lanes` and a lane event carry. */
const LANE_SWAPS = 10;
/** `history`, `runs` and `activity` without a `limit`. */
const DEFAULT_LIMIT = 20;
/**
 * The most log reads at once (each runs `docker logs` over SSH on every node of its deployment):
 * a client that opens more is refused, not given a process per node each.
 */
export const MAX_LOG_READS = 8;

/** A deployment's launch killed by a node's own guard: the daemon's record of it, in words (src/supervise/node-guard-reader.ts). */
const guardTripsOf =
  (store: ReadParts["store"]): GuardTripsOf =>
  (cluster, deployment, boot) => {
    const trip = currentNodeGuardTrips([{ deployment, boot }], store.nodeGuardTrips(cluster, deployment, GUARD_TRIPS_OF_DEPLOYMENT)).get(deployment);
    return trip === undefined ? undefined : nodeGuardTripWords(trip);
  };

const lanesOf = (store: ReadParts["store"]): ReadAnswer<"lanes">["lanes"] => laneViews(store.lanes(), (l) => store.swaps(l, LANE_SWAPS));

/**
 * The SSE stream's source: each discovery poll compared with the last (deployments, nodes, lanes),
 * each boot's events from its start, and the pushed metrics and requests, sent to every client.
 */
export class ReadFeed {
  readonly hub: SseHub;
  private picture: Picture = EMPTY_PICTURE;
  private chain: Promise<void> = Promise.resolve();
  private readonly stops: (() => void)[] = [];
  /** Aborted when the daemon stops: what streams besides the hub (a followed log) ends. */
  private readonly closing = new AbortController();
  /** The running boots' unfollows: each goes once its boot ends. */
  private readonly following = new Set<() => void>();

  constructor(
    private readonly parts: ReadParts,
    hubOptions: SseHubOptions = SSE_DEFAULTS,
  ) {
    this.hub = new SseHub(hubOptions);
  }

  start(): void {
    const { discovery, registry, sources } = this.parts;
    this.stops.push(discovery.subscribe((s) => this.observe(s)));
    this.stops.push(registry.onStart((b) => this.follow(b)));
    this.stops.push(sources.subscribe((p) => this.hub.send(p.event, p.data)));
    for (const b of registry.list()) if (b.running) this.follow(b);
  }

  stop(): void {
    for (const s of [...this.stops.splice(0), ...this.following]) s();
    this.following.clear();
    this.hub.close();
    this.closing.abort();
  }

  get stopping(): AbortSignal {
    return this.closing.signal;
  }

  /** Resolves once every poll seen so far is compared and sent. */
  settled(): Promise<void> {
    return this.chain;
  }

  private observe(snapshot: Snapshot): void {
    this.chain = this.chain
      .then(async () => {
        const { store, supervision } = this.parts;
        const next: Picture = { deployments: deploymentViews(snapshot, supervision(), guardTripsOf(store)), nodes: nodeStates(await this.parts.clusters(), snapshot), lanes: lanesOf(store) };
        for (const e of diffPictures(this.picture, next)) this.hub.send(e.event, e.data);
        this.picture = next;
      })
      .catch((e: unknown) => this.parts.log(`read API: a poll's changes were not sent: ${(e as Error).message}`));
  }

  private follow(b: BootEntry): void {
    const { deployment, cluster, lane } = b.identity;
    const unfollow = b.follow((event) => this.hub.send("boot", { deployment, cluster, ...(lane === undefined ? {} : { lane }), event }));
    this.following.add(unfollow);
    void b.ended.then(() => this.following.delete(unfollow));
  }
}

function sendError(res: ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { message, type: "read_error", code } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

function sendAnswer<K extends ReadAnswerKind>(res: ServerResponse, kind: K, answer: ReadAnswer<K>): void {
  const body = encodeRead(kind, answer);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store" });
  res.end(body);
}

/** A `limit` from 1 to MAX_READ_LIMIT, DEFAULT_LIMIT when absent; undefined when it is not a count. */
function limitOf(query: URLSearchParams): number | undefined {
  const text = query.get("limit");
  if (text === null) return DEFAULT_LIMIT;
  return /^\d{1,6}$/.test(text) && Number(text) >= 1 ? Math.min(Number(text), MAX_READ_LIMIT) : undefined;
}

/** The runs `compare` compares: the newest `limit` bench series, each whole, and the newest evals. */
function runsOf(store: ReadParts["store"], kind: RunKind, limit: number): ReadAnswer<"runs"> {
  if (kind === "bench") return { kind, bench: store.benchRuns({ limit }), evals: [] };
  if (kind === "eval") return { kind, bench: [], evals: store.evalRuns({ limit }) };
  const series: string[] = [];
  for (const r of store.benchRuns({ limit: MAX_READ_LIMIT })) if (!series.includes(r.series) && series.length < limit) series.push(r.series);
  const bench: BenchRun[] = series.flatMap((s) => store.benchRuns({ series: s }).sort((a, b) => a.run - b.run));
  return { kind, bench, evals: store.evalRuns({ limit }) };
}

type Handler = (req: IncomingMessage, res: ServerResponse, query: URLSearchParams, params: Record<string, string>) => Promise<void>;

/** The deployment a logs request names, with its cluster; undefined once the 400 or 404 is sent. */
function loggedDeployment(parts: ReadParts, res: ServerResponse, raw: string, cluster: string | undefined): { cluster: string; deployment: string } | undefined {
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    sendError(res, 400, "invalid_path", "the deployment's name in the path is not valid percent-encoded UTF-8");
    return undefined;
  }
  // Only a deployment discovery saw: the name then reaches the nodes as a label's value it matched, never as given.
  const seen = parts.discovery.snapshot().deployments.filter((d) => d.deployment === name && (cluster === undefined || d.cluster === cluster));
  const clusters = [...new Set(seen.map((d) => d.cluster))];
  if (clusters.length === 1) return { cluster: clusters[0] as string, deployment: name };
  if (clusters.length === 0) sendError(res, 404, "no_deployment", `no deployment ${JSON.stringify(name.slice(0, 200))}${cluster === undefined ? "" : ` on ${cluster}`} in the daemon's last poll (GET ${READ_ROUTES.deployments} lists them)`);
  else sendError(res, 400, "ambiguous_deployment", `${name} runs on ${clusters.join(" and ")}: add ?cluster=NAME`);
  return undefined;
}

/** `logs`, at most MAX_LOG_READS at once. */
function logsHandler(parts: ReadParts, closing: AbortSignal): Handler {
  let reading = 0;
  return async (_req, res, query, params) => {
    if (reading >= MAX_LOG_READS) return sendError(res, 503, "too_many_log_reads", `the daemon reads at most ${MAX_LOG_READS} logs at once: close a follow, or try again later`, { "retry-after": "5" });
    reading++;
    try {
      await readLogs(parts, res, query, params, closing);
    } finally {
      reading--;
    }
  };
}

/** A deployment's logs: its last lines, or a follow. */
async function readLogs(parts: ReadParts, res: ServerResponse, query: URLSearchParams, params: Record<string, string>, closing: AbortSignal): Promise<void> {
  const parsed = parseLogQuery(query);
  if (!parsed.ok) return sendError(res, 400, "bad_request", parsed.problem);
  const named = loggedDeployment(parts, res, params.name ?? "", parsed.query.cluster);
  if (named === undefined) return;
  const session = await parts.session(named.cluster);
  if (session === undefined) return sendError(res, 404, "no_cluster", `the daemon no longer watches ${named.cluster}`);
  let found: Awaited<ReturnType<typeof logSources>>;
  try {
    found = await logSources(session, `deployment/${named.deployment}`, undefined);
  } catch (e) {
    if (e instanceof UserError) return sendError(res, 404, "no_containers", e.message);
    throw e;
  }
  const keys = engineKeysOf(parts.store, named.cluster, named.deployment);
  if (parsed.query.follow) return followLogLines(res, found.sources, parsed.query, keys, { closing });
  if (res.destroyed) return;
  const stop = new AbortController();
  res.on("close", () => stop.abort());
  sendAnswer(res, "logs", { lines: await readLogLines(found.sources, parsed.query, keys(), stop.signal), lost: [...found.lost] });
}

/**
 * The keys a deployment's log lines are cleared of: its engine's, as the store has it once ready,
 * and its launch's, recorded at its start (an engine may print its args, key included, while it
 * boots). Read again every few seconds, so that a follow opened during a boot clears the key of
 * the boot after it too.
 */
function engineKeysOf(store: Pick<StateStore, "engineKey" | "launchedKey">, cluster: string, deployment: string): () => readonly string[] {
  let readAt = -Infinity;
  let keys: string[] = [];
  return () => {
    const now = performance.now();
    if (now - readAt > KEYS_FRESH_MS) {
      readAt = now;
      keys = [...new Set([store.engineKey(cluster, deployment), store.launchedKey(cluster, deployment)].filter((k): k is string => k !== undefined && k !== ""))];
    }
    return keys;
  };
}
const KEYS_FRESH_MS = 2_000;

/** Route -> handler: the one table of what the read API answers. */
function readHandlers(parts: ReadParts, feed: ReadFeed, isAdmin: (req: IncomingMessage) => boolean): Readonly<Record<ReadRoute, Handler>> {
  const { store } = parts;
  return {
    clusters: async (_req, res) => {
      const snapshot = parts.discovery.snapshot();
      const clusters = (await parts.clusters()).map((c) => clusterView(c, { facts: store.facts(c.name), memory: store.memory(c.name), watched: store.watchedMemory(c.name) }, snapshot));
      sendAnswer(res, "clusters", { clusters });
    },
    deployments: async (_req, res) => sendAnswer(res, "deployments", deploymentsAnswer(parts.discovery.snapshot(), parts.supervision(), guardTripsOf(store))),
    lanes: async (_req, res) => sendAnswer(res, "lanes", { lanes: lanesOf(store) }),
    boots: async (_req, res) => sendAnswer(res, "boots", { boots: parts.registry.list().map(bootView) }),
    history: async (_req, res, query) => {
      const limit = limitOf(query);
      if (limit === undefined) return sendError(res, 400, "bad_request", `limit must be a count from 1 (at most ${MAX_READ_LIMIT} are given)`);
      const recipe = query.get("recipe") ?? undefined;
      sendAnswer(res, "history", { boots: store.history(recipe?.slice(0, 256), limit).map(historyBoot) });
    },
    runs: async (_req, res, query) => {
      const kind = RUN_KINDS.find((k) => k === (query.get("kind") ?? "bench"));
      const limit = limitOf(query);
      if (kind === undefined || limit === undefined) return sendError(res, 400, "bad_request", `kind is one of ${RUN_KINDS.join(", ")}, and limit a count from 1`);
      sendAnswer(res, "runs", runsOf(store, kind, limit));
    },
    metrics: async (_req, res) => sendAnswer(res, "metrics", { windows: parts.sources.metrics() }),
    activity: async (req, res, query) => {
      const limit = limitOf(query);
      if (limit === undefined) return sendError(res, 400, "bad_request", `limit must be a count from 1 (at most ${MAX_READ_LIMIT} are given)`);
      // Captured bodies hold what other clients asked: an admin's to read, not an inference key's.
      const requests = parts.sources.activity(limit).slice(0, limit);
      sendAnswer(res, "activity", { requests: isAdmin(req) ? requests : requests.map(withoutBodies) });
    },
    events: async (_req, res) => {
      if (!feed.hub.add(res)) sendError(res, 503, "too_many_streams", "the daemon serves as many event streams as it allows: close one, or try again later", { "retry-after": "5" });
    },
    logs: logsHandler(parts, feed.stopping),
    // Only an admin's actions (start, swap) need them, and listing reads the recipe folders on the
    // daemon's loop: not a read any inference key may repeat at will.
    recipes: async (req, res) => {
      if (!isAdmin(req)) return sendError(res, 403, "admin_only", "the recipes are listed for an admin (the actions that start them are an admin's): sign in with the admin key");
      sendAnswer(res, "recipes", parts.recipes?.() ?? { recipes: [] });
    },
  };
}

/** Who may read: the owner socket's peer, or a TCP client showing an admin or inference key. */
export interface ReadAccess {
  readonly ownerSocket?: boolean;
  /** Whether a presented key is an admin key or an inference key; undefined: serve has neither, and TCP reads are refused. */
  readonly checkRead?: (presented: string | undefined) => boolean;
  /** The page's sessions: their routes, and a session's cookie in place of a key. */
  readonly sessions?: WebSessions;
  /** Whether a presented key is an admin key (what only an admin reads: captured bodies); undefined: serve has none. */
  readonly checkAdmin?: (presented: string | undefined) => boolean;
}

/** Whether an admitted reader is an admin: the owner socket's peer, an admin key, or an admin session. */
function isAdmin(req: IncomingMessage, access: ReadAccess): boolean {
  if (access.ownerSocket === true || (access.checkAdmin?.(presentedKey(req.headers.authorization, req.headers["x-api-key"])) ?? false)) return true;
  return access.sessions?.sessionOf(req)?.role === "admin";
}

function admitted(req: IncomingMessage, res: ServerResponse, access: ReadAccess): boolean {
  if (access.ownerSocket === true || (access.checkRead?.(presentedKey(req.headers.authorization, req.headers["x-api-key"])) ?? false)) return true;
  if (access.sessions?.sessionOf(req) !== undefined) return true;
  const why =
    access.checkRead === undefined
      ? "the read API over TCP needs an admin or inference key, and serve has neither: the daemon's own user on its machine reads through its socket"
      : "missing or wrong key: the read API takes the admin key or an inference key (Authorization: Bearer KEY)";
  sendError(res, 401, "invalid_key", why, { "www-authenticate": "Bearer" });
  return false;
}

/** The read route `path` names, with its `{name}` values; undefined: none. */
function readRoute(path: string): { route: ReadRoute; params: Record<string, string> } | undefined {
  for (const [route, pattern] of Object.entries(READ_ROUTES) as [ReadRoute, string][]) {
    const params = routeParams(pattern, path);
    if (params !== undefined) return { route, params };
  }
  return undefined;
}

export type ApiHandler = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>;

/**
 * Everything under CONTROL_PREFIX: a read route's GET goes to the read API; anything else to the
 * control API when serve runs it (it asks the admin key), else 404 or 405.
 */
export function launcherApi(parts: ReadParts, feed: ReadFeed, access: ReadAccess, control: ApiHandler | undefined): ApiHandler {
  const handlers = readHandlers(parts, feed, (req) => isAdmin(req, access));
  return async (req, res, path) => {
    const method = req.method ?? "GET";
    if (access.sessions?.owns(path) === true) return access.sessions.handle(req, res, path, access.ownerSocket === true);
    const read = readRoute(path);
    if (read === undefined || method !== "GET") {
      if (control !== undefined && allowedMethods([CONTROL_METHODS], path) !== undefined) return control(req, res, path);
      req.resume();
      if (read === undefined) return sendError(res, 404, "not_found", `no route ${path}${control === undefined ? " (the control API is off: launcher serve --control runs it)" : ""}`);
      return sendError(res, 405, "method_not_allowed", `${path} takes GET, not ${method}`, { allow: "GET" });
    }
    req.resume();
    if (!admitted(req, res, access)) return;
    const query = new URL(req.url ?? "/", "http://launcher.invalid").searchParams;
    // Never a rejection: the control socket's server does not wait on this promise.
    await handlers[read.route](req, res, query, read.params).catch((e: unknown) => {
      if (res.headersSent) res.destroy();
      else sendError(res, 500, "daemon_bug", `launcher serve failed on this request: ${(e as Error).message}`);
    });
  };
}
