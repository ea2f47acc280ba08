import { homedir } from "node:os";
import { UserError } from "../config/errors.js";
import { engineApiMethods, engineRefusedRoutes } from "../engine/registry.js";
import { vouchFrom } from "../claims/ownership.js";
import { keyChecker } from "../gateway/auth.js";
import { createGateway, type Gateway } from "../gateway/server.js";
import { GatewayMetrics } from "../gateway/metrics.js";
import { engineKeys } from "../gateway/engine-keys.js";
import { MAX_BODY_BYTES, MAX_CONTROL_BODY_BYTES } from "../gateway/budget.js";
import { DEPLOYMENT_STATUSES } from "../contract/deployment.js";
import { CONTROL_PREFIX } from "../contract/control-api.js";
import { BootRegistry } from "../supervise/boots.js";
import type { Supervisor } from "../supervise/supervisor.js";
import type { StateStore } from "../store/store.js";
import type { Cluster } from "../cluster/cluster.js";
import { adoptBoots } from "./adopt.js";
import type { DaemonScope } from "../app/admit.js";
import type { Environment } from "../app/environment.js";
import { Discovery, staleAfterMs, type WatchSource } from "./discovery.js";
import { outageHooksFor } from "./outages.js";
import { GuardBeats } from "../supervise/node-guard-reader.js";
import { controlApi, type ControlOptions } from "./control.js";
import { launcherApi, ReadFeed, type ApiHandler, type ReadParts } from "./read-api.js";
import { RecipeList } from "./recipe-list.js";
import { stopper } from "./stop.js";
import type { ClusterSession } from "../nodes/session.js";
import { recipeDirs } from "../app/lookup.js";
import type { ReadAnswer } from "../contract/read-api.js";
import { WebSessions } from "./web-session-api.js";
import { pageServer } from "./web-page.js";
import { liveSources, type LiveSources } from "./live-sources.js";
import { bootSubmitter } from "./boots-host.js";
import { addEngineKeyHow } from "./engine-key.js";
import { listenControlSocket, type ControlSocket } from "./control-socket.js";
import { uploadedClustersDir } from "./uploaded-clusters.js";
import { generationFromMetrics, generationWatchFor, supervisorFor, superviseFrom } from "./supervision.js";
import type { GenerationWatch } from "../supervise/generation-watch.js";
import { RouteCache } from "./route-cache.js";
import { clustersToWatch, WatchedClusters, type WatchedFile } from "./watched-clusters.js";
import type { DaemonConfig } from "./config.js";

/** The longest a client may take to send a whole request (a 64 MiB body at ~1 MB/s). */
const REQUEST_TIMEOUT_MS = 120_000;

/** The longest a stopping daemon waits for its boots to let go (a drain cannot be cut short). */
const DETACH_MS = 5_000;

/** How long requests in flight get once a stopping daemon stops listening. */
const IN_FLIGHT_GRACE_MS = 10_000;

/** How long the daemon waits for discovery's first read of every cluster before it serves. */
const FIRST_POLL_MS = 30_000;

/** What the daemon asks of the process that runs it, beyond its environment. */
export interface DaemonHooks {
  /**
   * Tells this user's CLI where the daemon and its control socket are (src/cli/daemon-target.ts
   * advertiseLocalDaemon); returns how to take that back. None: no one is told.
   */
  readonly advertise?: (listenHost: string, port: number, socket: string) => () => void;
}

/** The daemon's parts, each made once at start. */
interface Parts {
  readonly config: DaemonConfig;
  readonly env: Environment;
  readonly log: (line: string) => void;
  readonly store: StateStore;
  readonly discovery: Discovery;
  readonly registry: BootRegistry;
  readonly supervisor: Supervisor;
  /** Every serving deployment's last generation, its probes, and which are wedged. */
  readonly generation: GenerationWatch;
  readonly watched: WatchedClusters;
  readonly clusters: readonly Cluster[];
  readonly gateway: Gateway;
  /** The page's sessions, shared by the TCP listener and the owner socket (which may ask for an admin code). */
  readonly sessions: WebSessions;
  /** The control API's options (with --control), served over TCP and through the socket. */
  readonly control: ControlOptions | undefined;
  /** The read API's sources and its event stream, served over TCP and through the socket. */
  readonly read: ReadParts;
  readonly feed: ReadFeed;
  /** Engine metrics scraped and the gateway's activity log: the read API's live sources. */
  readonly live: LiveSources;
  /** Aborted when the daemon stops: a node back still being read then keeps nothing (the store closes). */
  readonly looks: AbortController;
}

/** What runs once the daemon listens, to be stopped in its order. */
interface Running {
  readonly supervising: ReturnType<typeof superviseFrom>;
  readonly socket: ControlSocket | undefined;
  readonly advertised: (() => void) | undefined;
}

/**
 * `launcher serve` as one object: the gateway, the control API, discovery, supervision, the boot
 * registry and the store, started in their order by Daemon.start and stopped in theirs by stop().
 */
export class Daemon {
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly parts: Parts,
    private readonly running: Running,
    /** The port it listens on (the one the system chose for --listen HOST:0). */
    readonly port: number,
  ) {}

  /**
   * Starts a daemon: the cluster files are read first (a broken one stops it with its errors),
   * then it listens (an address it cannot have stops it before anything else starts), adopts the
   * boots a daemon of this store left, waits for discovery's first read, then supervises.
   */
  static async start(config: DaemonConfig, env: Environment, hooks: DaemonHooks = {}): Promise<Daemon> {
    const parts = assemble(config, env);
    await listenOn(parts);
    // Before adoption and the first poll: the event stream hears every boot and every poll.
    parts.feed.start();
    // Boots a daemon of this store left (killed, even with kill -9, or stopped) are watched again
    // from their containers' logs: each ends ready or rolled back, and `attach`/`down` reach it.
    adoptBoots({
      store: parts.store,
      registry: parts.registry,
      clusters: parts.clusters.map((c) => c.name),
      session: (name) => parts.watched.sessions.get(name) ?? Promise.resolve(undefined),
      log: parts.log,
      now: () => new Date(),
      // A restart's boot is the supervisor's from now on: a failure goes to its backoff.
      restartAdopted: (plan, attempt, failure, ended) => parts.supervisor.adoptedRestart(plan, attempt, failure, ended),
    });
    parts.discovery.start();
    await parts.discovery.ready(FIRST_POLL_MS);
    parts.live.start();
    parts.generation.observe(parts.discovery.snapshot().deployments);
    parts.generation.start();
    const supervising = superviseFrom(parts.discovery, parts.supervisor, parts.watched.sessions, parts.log);
    parts.watched.followDeaths(supervising);
    const addr = parts.gateway.server.address();
    const port = typeof addr === "object" && addr !== null ? addr.port : config.listen.port;
    const { socket, advertised } = await announce(parts, port, hooks);
    return new Daemon(parts, { supervising, socket, advertised }, port);
  }

  /**
   * Stops it, once however often asked. A boot in progress outlives the daemon, as it outlives its
   * client: it is left running on the nodes (never rolled back by a stop or a restart of the
   * daemon), its clients hear so, and the next daemon adopts it (src/daemon/adopt.ts). `launcher
   * down NAME` rolls it back. Requests in flight get IN_FLIGHT_GRACE_MS.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopInOrder();
    return this.stopping;
  }

  private async stopInOrder(): Promise<void> {
    const { gateway, registry, log, env, supervisor, discovery, store, feed, live } = this.parts;
    const inFlight = gateway.inFlight();
    env.console.err(`launcher serve: stopping (${inFlight} request${inFlight === 1 ? "" : "s"} in flight get up to ${IN_FLIGHT_GRACE_MS / 1000} s)`);
    // From now on no death, snapshot or wedge reaches the supervisor: a restart begun now would take
    // a group down and be cut short before its boot, and a probe the stop cut short is no wedge.
    this.running.supervising.stop();
    this.parts.looks.abort();
    await this.parts.generation.stop();
    for (const b of registry.list().filter((x) => x.running)) log(`leaving the boot of ${b.identity.deployment} to the next launcher serve (launcher down ${b.identity.deployment} removes it)`);
    await registry.detachAll("launcher serve stopping", DETACH_MS).catch(() => undefined);
    // An event stream never ends by itself: ended here, or the server would wait out its grace for it.
    feed.stop();
    await new Promise<void>((resolve) => {
      gateway.server.close(() => resolve());
      gateway.server.closeIdleConnections();
      setTimeout(() => {
        gateway.server.closeAllConnections();
        resolve();
      }, IN_FLIGHT_GRACE_MS).unref();
    });
    await supervisor.stop();
    this.running.advertised?.();
    await this.running.socket?.close();
    await discovery.stop();
    await gateway.close();
    // After the server closed (every answered request recorded), before the store closes.
    await live.stop();
    store.close();
  }
}

/** Every part of the daemon, made and wired, nothing started yet. */
function assemble(config: DaemonConfig, env: Environment): Parts {
  const log = (line: string): void => env.console.err(`launcher serve: ${line}`);
  const uploadedDir = uploadedClustersDir(env.stateDir);
  // Read here first, so that a broken cluster file stops the daemon at start with its errors.
  const files = clustersToWatch(config.clusterFiles, uploadedDir, env, log);
  const clusters = files.map((w) => w.cluster);
  // The daemon lives for weeks: a store lost to a passing fault (a lock another launcher held
  // past the busy timeout, a full disk freed) is opened again, not done without for good.
  const store = env.openStore((line) => env.console.err(line), { reopen: true });
  const watchSource = (name: string, file: string): WatchSource => ({ cluster: name, argv: env.selfArgv(["status", "--watch", `${config.pollMs}ms`, "--json", "--exit-with-stdin", "--cluster", file]) });
  // The nodes' own guards' newest heartbeats, read by the supervision (cheaply, on the sessions it holds), told to the outages.
  const beats = new GuardBeats();
  const looks = new AbortController();
  const discovery = new Discovery(
    files.map((w) => watchSource(w.cluster.name, w.file)),
    log,
    staleAfterMs(config.pollMs),
    // A deployment this store holds running is only its recorded launch: copied labels are
    // reported, never obeyed. One it never launched (another machine's) is routed as any.
    // A node that comes back is asked what its own guard saw meanwhile (watched: made just below).
    vouchFrom(store, () => new Date()), outageHooksFor(store, { session: (name): Promise<ClusterSession> | undefined => watched.sessions.get(name), log, signal: looks.signal }, beats),
  );
  const metrics = new GatewayMetrics();
  const registry = new BootRegistry(Date.now);
  const watched = new WatchedClusters(files, config.clusterFiles.length, uploadedDir, discovery, watchSource, registry, log);
  const supervisor = supervisorFor(watched.sessions, store, discovery, registry, log, config.restartBackoffMs, beats);
  discovery.subscribe((snap) => watched.forgetIdle(snap.deployments));
  const generation = generationWatchFor(store, supervisor, metrics, discovery, { probeEveryMs: config.probeEveryMs, boundMs: config.probeBoundMs }, log, clusters.map((c) => c.name));
  const supervision = (): Record<string, string> => withWedges(supervisor.describe(), generation.describe());
  // Recorded by the `up` that booted it (src/boot/launch.ts): read from the store once per
  // route table, not on every request (src/gateway/engine-keys.ts says why that is as fresh).
  const keysOfEngines = engineKeys((cluster, deployment) => store.engineKey(cluster, deployment));
  const routes = new RouteCache({ store, discovery, supervisor, generation, now: Date.now, tableMade: () => keysOfEngines.clear(), snapshotSeen: (snapshot) => countDeployments(metrics, snapshot.deployments) });
  const submit = bootSubmitter(registry, store, env, scopeOf(config, files, env, log), log, {
    refuse: (cluster, file) => watched.refusal(cluster, file),
    accepted: (cluster, file) => watched.uploaded(cluster, file),
    ownerFile: (cluster) => watched.ownerFile(cluster),
  }, config.apiKeys.length > 0);
  const session = (name: string): Promise<ClusterSession | undefined> => watched.sessions.get(name) ?? Promise.resolve(undefined);
  const stop = stopper({ discovery, registry, session, store, now: () => new Date(), log });
  const control = config.control ? { registry, submit, stop, maxBodyBytes: MAX_CONTROL_BODY_BYTES } : undefined;
  const live = liveSources({ snapshot: () => discovery.snapshot(), store, captureBodies: config.captureBodies });
  live.subscribe(generationFromMetrics(generation));
  // The folders catalogueSource reads (recipeDirs reads only the variables of its places).
  const recipes = new RecipeList(recipeDirs({ vars: env.vars, home: homedir() }), env.recipeCatalogue(log));
  const read = readPartsOf({ discovery, supervision, watched, store, registry, log, live }, () => recipes.list());
  const feed = new ReadFeed(read);
  const { api, sessions } = launcherApiOf(config, read, feed, control);
  const gateway = createGateway({
    control: api,
    page: pageServer(),
    routes: () => routes.routes(),
    ...(config.apiKeys.length === 0 ? {} : { checkKey: keyChecker(config.apiKeys) }),
    metrics,
    health: () => {
      const s = discovery.snapshot();
      return { deployments: s.deployments.length, strangers: s.strangers, unreachable: s.unreachable, discovered_at: s.at?.toISOString() ?? null, supervision: supervision() };
    },
    staleness: () => discovery.staleness(),
    // Asked right after routes() on each request: kept per table, a lane's new deployment is read anew.
    engineKey: (t) => keysOfEngines.get(t),
    // Every engine's routes: the gateway fronts deployments of any engine at once.
    apiMethods: engineApiMethods(),
    apiRefused: engineRefusedRoutes(),
    ...(config.apiKeys.length > 0 ? { requireEngineKey: { how: addEngineKeyHow } } : {}),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    upstreamFailed: () => discovery.refreshSoon(),
    headersTimeoutMs: config.upstreamTimeoutMs,
    bodyTimeoutMs: config.idleTimeoutMs,
    maxBodyBytes: MAX_BODY_BYTES,
    activity: live.record,
    generated: (cluster, deployment) => generation.generated(cluster, deployment),
    captureBodies: config.captureBodies,
  });
  return { config, env, log, store, discovery, registry, supervisor, generation, watched, clusters, gateway, sessions, control, read, feed, live, looks };
}

/**
 * What the gateway mounts under CONTROL_PREFIX, and the page's sessions it uses. Reads: an admin or
 * an inference key, or a session. The control API over TCP: the admin key, or an admin session with
 * its CSRF token. Through the socket (announce): this user only.
 */
function launcherApiOf(config: DaemonConfig, read: ReadParts, feed: ReadFeed, control: Omit<ControlOptions, "checkAdmin" | "admitSession" | "ownerSocket"> | undefined): { api: ApiHandler; sessions: WebSessions } {
  const readKeys = [...config.adminKeys, ...config.apiKeys];
  const checkAdmin = config.adminKeys.length === 0 ? {} : { checkAdmin: keyChecker(config.adminKeys) };
  // The page's sessions: signed in with a key or a one-time code, then a cookie stands for the key.
  const sessions = new WebSessions({ ...checkAdmin, ...(config.apiKeys.length === 0 ? {} : { checkInference: keyChecker(config.apiKeys) }) });
  const api = launcherApi(
    read,
    feed,
    { sessions, ...checkAdmin, ...(readKeys.length === 0 ? {} : { checkRead: keyChecker(readKeys) }) },
    control === undefined ? undefined : controlApi({ ...control, ...checkAdmin, admitSession: sessions.admitAction }),
  );
  return { api, sessions };
}

/** What the read API reads, from the daemon's parts. */
function readPartsOf(p: Pick<Parts, "discovery" | "watched" | "store" | "registry" | "log" | "live"> & { readonly supervision: () => Record<string, string> }, recipes: () => ReadAnswer<"recipes">): ReadParts {
  return {
    discovery: p.discovery,
    supervision: p.supervision,
    clusters: async () => (await Promise.all(p.watched.sessions.values())).map((s) => s.cluster),
    session: (name) => p.watched.sessions.get(name) ?? Promise.resolve(undefined),
    store: p.store,
    registry: p.registry,
    sources: p.live,
    recipes,
    log: p.log,
  };
}

/** The supervision each deployment shows (/health, the read API): the supervisor's state, with "wedged since T" beside it where the generation watch says so. */
function withWedges(supervision: Record<string, string>, wedges: Record<string, string>): Record<string, string> {
  const all = { ...supervision };
  for (const [k, w] of Object.entries(wedges)) all[k] = all[k] === undefined ? w : `${all[k]} (${w})`;
  return all;
}

/** The gateway's gauge of deployments by status, from a new snapshot. */
function countDeployments(metrics: GatewayMetrics, deployments: readonly { readonly status: string }[]): void {
  for (const status of DEPLOYMENT_STATUSES) metrics.deployments.set({ status }, deployments.filter((d) => d.status === status).length);
}

/**
 * All a client's submission may name here: the daemon's own clusters by name, its recipes by
 * name. Its own user (the socket) reads cluster files as its CLI does; a copy of one of its own is that one.
 */
function scopeOf(config: DaemonConfig, files: readonly WatchedFile[], env: Environment, log: (line: string) => void): DaemonScope {
  const own = files.slice(0, config.clusterFiles.length);
  return {
    own: own.map((w) => w.cluster),
    catalogue: env.recipeCatalogue(log),
    ownTexts: new Map(own.map((w) => [w.cluster.name, w.text])),
    load: (option) => env.loadCluster(option),
  };
}

/** Why an address cannot be listened on, by the system's error code (listen(2), Node's net errors). */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: "is already in use",
  EADDRNOTAVAIL: "is not an address of this machine",
  EACCES: "needs privileges (a port below 1024?)",
};

/** Listens first: an address that cannot be had stops the daemon (its gateway and store closed) before anything else starts. */
async function listenOn(parts: Parts): Promise<void> {
  const { gateway, config } = parts;
  await new Promise<void>((resolve, reject) => {
    gateway.server.once("error", (e: NodeJS.ErrnoException) => {
      const why = LISTEN_FAILURES[e.code ?? ""] ?? `cannot be listened on (${e.code ?? e.message})`;
      reject(new UserError(`--listen ${config.listenText} ${why}`, "pass --listen HOST:PORT with an address of this machine and a free port"));
    });
    gateway.server.listen(config.listen.port, config.listen.host, resolve);
  }).catch(async (e: unknown) => {
    await gateway.close();
    parts.store.close();
    throw e;
  });
}

/** Says where it listens, opens the control socket (with --control) and tells this user's CLI of it. */
async function announce(parts: Parts, port: number, hooks: DaemonHooks): Promise<Omit<Running, "supervising">> {
  const { config, env, clusters } = parts;
  const keys = config.apiKeys.length;
  const shown = config.listen.host.includes(":") ? `[${config.listen.host}]` : config.listen.host;
  env.console.err(`launcher serve: listening on http://${shown}:${port}/v1 (${keys === 0 ? "no API key: loopback only" : `${keys} API key${keys === 1 ? "" : "s"}`}; clusters ${clusters.map((c) => c.name).join(", ")})`);
  if (parts.control === undefined) return { socket: undefined, advertised: undefined };
  const socket = await listenControlSocket(env.stateDir, launcherApi(parts.read, parts.feed, { ownerSocket: true, sessions: parts.sessions }, controlApi({ ...parts.control, ownerSocket: true })), REQUEST_TIMEOUT_MS);
  env.console.err(`launcher serve: control API on http://${shown}:${port}${CONTROL_PREFIX} (${config.adminKeys.length === 0 ? "no admin key: refused over TCP" : "admin key required"}) and on ${socket.path} (this user only)`);
  return { socket, advertised: hooks.advertise?.(config.listen.host, port, socket.path) };
}
