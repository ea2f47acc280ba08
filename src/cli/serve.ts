import { readTextFile } from "../config/read-file.js";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { engineApiMethods, engineRefusedRoutes } from "../engine/registry.js";
import { vouchFrom } from "../claims/ownership.js";
import { collectKeys, keyChecker } from "../gateway/auth.js";
import { Discovery, staleAfterMs, type Snapshot, type WatchSource } from "../daemon/discovery.js";
import { watchDeaths } from "../supervise/deaths.js";
import { bootAgain } from "../app/reboot.js";
import { openSession, type ClusterSession } from "../nodes/session.js";
import { DEFAULT_TIMING } from "../supervise/supervise.js";
import { Supervisor } from "../supervise/supervisor.js";
import { ReadyGuards } from "../supervise/ready-guard.js";
import type { StateStore } from "../store/store.js";
import { isLoopback, parseListen } from "../gateway/listen.js";
import { routeTable, type RouteTable } from "../gateway/routes.js";
import type { LaneRecord } from "../store/store.js";
import { DEPLOYMENT_STATUSES } from "../contract/deployment.js";
import { heldByLiveProcess, laneKey } from "../claims/locks.js";
import { parseDuration } from "./duration.js";
import { clusterOf, clusterPath, foundRecipes, loadCluster, readClusterFile, recipeDirs, selfArgv } from "../app/host.js";
import type { Output } from "../app/output.js";
import { clusterOption } from "./options.js";
import { BootRegistry } from "../supervise/boots.js";
import { controlApi } from "../daemon/control.js";
import { MAX_BODY_BYTES, MAX_CONTROL_BODY_BYTES } from "../gateway/budget.js";
import { bootSubmitter } from "../daemon/boots-host.js";
import { CONTROL_PREFIX } from "../contract/control-api.js";
import { addEngineKeyHow } from "../daemon/engine-key.js";
import { advertiseLocalDaemon } from "./daemon-target.js";
import { outliveTheTerminal } from "./terminal.js";
import { childrenOutliveTheTerminal } from "../remote/transport.js";
import { adoptBoots } from "../app/adopt.js";
import path from "node:path";
import { homedir } from "node:os";
import type { Cluster } from "../cluster/cluster.js";
import { storeDir } from "../store/store.js";
import { openStateStore } from "../store/open.js";
import { clientPart, composeUploaded, FORGET_UPLOADED_AFTER_MS, forgetUploadedCluster, idleUploaded, keepUploadedCluster, keptUploadedClusters, keptUploadedText, uploadedClustersDir, uploadVerdict } from "../daemon/uploaded-clusters.js";
import { refusedSettings, type DaemonScope } from "../daemon/admit.js";
import { listenControlSocket, type ControlSocket } from "../daemon/control-socket.js";
import { catalogueSource } from "../recipe/uploaded-source.js";

interface ServeFlags {
  listen: string;
  cluster?: string[];
  apiKey?: string[];
  apiKeyFile?: string;
  poll: string;
  restartBackoff: string;
  upstreamTimeout: string;
  idleTimeout: string;
  control?: boolean;
  adminKeyFile?: string;
}

function apiKeys(flags: ServeFlags): string[] {
  let file: { path: string; text: string } | undefined;
  if (flags.apiKeyFile !== undefined) {
    file = { path: flags.apiKeyFile, text: readTextFile(flags.apiKeyFile, "API key file") };
  }
  return collectKeys({ flags: flags.apiKey ?? [], env: process.env.LAUNCHER_API_KEY, ...(file === undefined ? {} : { file }) });
}

/**
 * The admin keys of the control API: $LAUNCHER_ADMIN_KEY (comma-separated) or --admin-key-file;
 * never a flag holding the key itself, which `ps` would show.
 */
function adminKeys(flags: ServeFlags): string[] {
  const file = flags.adminKeyFile === undefined ? undefined : { path: flags.adminKeyFile, text: readTextFile(flags.adminKeyFile, "admin key file") };
  try {
    return collectKeys({ flags: [], env: process.env.LAUNCHER_ADMIN_KEY, ...(file === undefined ? {} : { file }) });
  } catch (e) {
    // collectKeys words its errors for the inference keys: the same problem, said of the admin key.
    if (e instanceof UserError) throw new UserError(e.message.replace("LAUNCHER_API_KEY", "LAUNCHER_ADMIN_KEY").replace("API key file", "admin key file"), e.hint);
    throw e;
  }
}

/** The longest a client may take to send a whole request (a 64 MiB body at ~1 MB/s). */
const REQUEST_TIMEOUT_MS = 120_000;

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * The daemon's supervisor over these clusters (src/supervise/supervisor.ts): restarts boot through
 * src/app/reboot.ts in the daemon's boot registry. One SSH session per cluster, opened at start
 * (locally only: no node is contacted) and kept, so that its connections are shared.
 */
function supervisorFor(sessions: ReadonlyMap<string, Promise<ClusterSession>>, store: StateStore, discovery: Discovery, registry: BootRegistry, log: (line: string) => void, backoffMs: number): Supervisor {
  const session = (name: string): Promise<ClusterSession | undefined> => sessions.get(name) ?? Promise.resolve(undefined);
  // Every serving deployment's memory is watched until it is gone; a trip is a failure to the supervisor.
  const memory = new ReadyGuards({ session, store, log, now: Date.now, onTrip: (cluster, deployment, trip) => supervisor.memoryTripped(cluster, deployment, trip) });
  const supervisor: Supervisor = new Supervisor({
    memory,
    store,
    session,
    boot: (plan, session, signal, emit, detach, recreating) => bootAgain(plan, session, signal, store, emit, undefined, detach, recreating),
    boots: registry,
    refresh: () => discovery.refreshSoon(),
    log,
    now: Date.now,
    timing: { ...DEFAULT_TIMING, backoffMs },
  });
  return supervisor;
}

/** The longest a stopping daemon waits for its boots to let go (a drain cannot be cut short). */
const DETACH_MS = 5_000;

/** How often the supervisor looks for a backoff that is over. */
const SUPERVISE_EVERY_MS = 100;

/**
 * Feeds the supervisor each new discovery snapshot as it arrives, and each rank death the nodes'
 * Docker reports (src/supervise/deaths.ts) as it happens; returns how to stop.
 */
function superviseFrom(discovery: Discovery, supervisor: Supervisor, sessions: ReadonlyMap<string, Promise<ClusterSession>>, log: (line: string) => void): { stop: () => void; follow: (cluster: string, session: Promise<ClusterSession>) => void; unfollow: (cluster: string) => void } {
  const observe = (s: Snapshot): void => {
    if (s.at !== undefined) supervisor.observe(s.deployments, s.at.getTime());
  };
  // What was read before (the first poll, which the daemon waited for), then each new poll.
  observe(discovery.snapshot());
  const unsubscribe = discovery.subscribe(observe);
  const timer = setInterval(() => supervisor.tick(), SUPERVISE_EVERY_MS);
  const deaths = new AbortController();
  // One follower per cluster: an uploaded cluster replaced or forgotten stops its old one.
  const following = new Map<string, AbortController>();
  const unfollow = (cluster: string): void => {
    following.get(cluster)?.abort();
    following.delete(cluster);
  };
  const follow = (cluster: string, session: Promise<ClusterSession>): void => {
    unfollow(cluster);
    const mine = new AbortController();
    following.set(cluster, mine);
    const signal = AbortSignal.any([deaths.signal, mine.signal]);
    void session.then(
      (opened) => watchDeaths(opened, (d) => supervisor.died(cluster, d), (line) => log(`supervise: ${line}`), signal),
      (e: unknown) => log(`supervise: cannot follow the container events of ${cluster} (${(e as Error).message}); deaths are seen by the polls only`),
    );
  };
  for (const [cluster, session] of sessions) follow(cluster, session);
  return {
    follow,
    unfollow,
    stop: () => {
      unsubscribe();
      clearInterval(timer);
      deaths.abort();
    },
  };
}

/**
 * The cluster files to watch: the ones named (--cluster, else the one found), then those remote
 * clients uploaded with their `up` before (src/daemon/uploaded-clusters.ts), unless one of that
 * name is named; an uploaded one that no longer reads is said and left out.
 */
function clustersToWatch(named: readonly string[], uploadedDir: string, log: (line: string) => void): { file: string; cluster: Cluster; text: string }[] {
  const watched = named.map((file) => {
    const read = readClusterFile(file);
    return { file, cluster: clusterOf(read), text: read.text };
  });
  const [own] = watched;
  for (const file of keptUploadedClusters(uploadedDir)) {
    try {
      // Checked again as on upload (a file kept by an older launcher may set [ssh]), and given
      // this daemon's [ssh] and [docker] as they are now.
      const client = clientPart(readTextFile(file, "uploaded cluster file"));
      const refused = refusedSettings(file, client);
      if (refused.length > 0) throw new UserError(`it sets ${refused.map((r) => r.setting).join(", ")}, which a client's file may not`);
      const text = own === undefined ? client : composeUploaded(client, own.cluster);
      const cluster = clusterOf({ file, text });
      if (watched.some((w) => w.cluster.name === cluster.name)) continue;
      keepUploadedCluster(uploadedDir, cluster.name, { file, text });
      watched.push({ file, cluster, text });
    } catch (e) {
      log(`not watching the uploaded cluster file ${file}: ${(e as Error).message}`);
    }
  }
  return watched;
}

export function registerServe(program: Command, io: Output): void {
  program
    .command("serve")
    .description("the OpenAI-compatible gateway: one address and stable model names for every deployment and lane (--cluster may be repeated, one per cluster)")
    .option("--listen <host:port>", "address to listen on", "127.0.0.1:8080")
    .addOption(clusterOption().argParser(collect))
    .option("--api-key <key>", "accept this API key (repeatable; prefer --api-key-file or $LAUNCHER_API_KEY: flags show in ps)", collect)
    .option("--api-key-file <file>", "accept the keys in this file, one per line")
    .option("--poll <duration>", "how often to read the clusters' labels", "2s")
    .option("--restart-backoff <duration>", "for deployments started with up --restart: the wait before the second restart in a row, doubled for each further one (the first is at once)", "10s")
    .option("--upstream-timeout <duration>", "longest wait for an engine's first byte (a long non-streamed generation)", "60m")
    .option("--idle-timeout <duration>", "longest silence from an engine in the middle of an answer", "10m")
    .option("--control", "also serve the control API (boots submitted by `launcher up`, attach, cancel): to this user through a socket of its own, and over TCP to an admin key only")
    .option("--admin-key-file <file>", "the control API's admin keys, one per line (or $LAUNCHER_ADMIN_KEY); never an inference key")
    .action(async (flags: ServeFlags) => {
      // A daemon started in a terminal that closes goes on (its boots take an hour): SIGHUP is
      // ignored, and a log line to a terminal or pipe that is gone is lost rather than fatal.
      // Stopping stays SIGINT/SIGTERM (below); a unit (launcher export systemd) has no terminal at all.
      childrenOutliveTheTerminal();
      const keepTerminalFree = outliveTheTerminal(() => io.err("launcher serve: SIGHUP ignored (its terminal closed?): the daemon goes on; stop it with SIGTERM or Ctrl-C"));
      const listen = parseListen(flags.listen);
      if (listen === undefined) throw new UserError(`--listen ${flags.listen} is not HOST:PORT`, "for example 127.0.0.1:8080 or 0.0.0.0:8080");
      const keys = apiKeys(flags);
      if (keys.length === 0 && !isLoopback(listen.host)) {
        throw new UserError(`refusing to listen on ${listen.host} without an API key: anyone on that network could use the cluster`, "pass --api-key-file FILE (or set LAUNCHER_API_KEY), or listen on 127.0.0.1");
      }
      // Without an admin key the control API answers its own user's socket only, never TCP.
      const admin = flags.control ? adminKeys(flags) : [];
      // A client that may chat must not be able to launch containers: the two kinds of key never meet.
      if (admin.some((k) => keys.includes(k))) throw new UserError("an admin key is also an inference key", "give the control API a key of its own (--admin-key-file / LAUNCHER_ADMIN_KEY)");
      const pollMs = parseDuration(flags.poll, "--poll");
      const files = (flags.cluster ?? [undefined]).map((f) => clusterPath(f));
      const uploadedDir = uploadedClustersDir(storeDir(process.env, homedir()));
      // Read here first, so that a broken cluster file stops the daemon at start with its errors.
      const watched = clustersToWatch(files, uploadedDir, (line) => io.err(`launcher serve: ${line}`));
      const clusters = watched.map((w) => w.cluster);
      // The daemon lives for weeks: a store lost to a passing fault (a lock another launcher held
      // past the busy timeout, a full disk freed) is opened again, not done without for good.
      const store = openStateStore(path.join(storeDir(process.env, homedir()), "launcher.db"), (line) => io.err(line), () => new Date(), { reopen: {} });
      const watchSource = (name: string, file: string): WatchSource => ({ cluster: name, argv: selfArgv(["status", "--watch", `${pollMs}ms`, "--json", "--exit-with-stdin", "--cluster", file]) });
      const discovery = new Discovery(
        watched.map((w) => watchSource(w.cluster.name, w.file)),
        (line) => io.err(`launcher serve: ${line}`),
        staleAfterMs(pollMs),
        // A deployment this store holds running is only its recorded launch: copied labels are
        // reported, never obeyed. One it never launched (another machine's) is routed as any.
        vouchFrom(store, () => new Date()),
      );
      // Loaded here, not with the CLI: undici and prom-client are a quarter of every command's
      // start (about 0.2 s here), and only serve uses them. `up --detach` then `attach` (a new
      // process) shows a boot's first lines late by about that much.
      const [{ GatewayMetrics }, { createGateway }] = await Promise.all([import("../gateway/metrics.js"), import("../gateway/server.js")]);
      const metrics = new GatewayMetrics();
      const log = (line: string): void => io.err(`launcher serve: ${line}`);
      const registry = new BootRegistry(Date.now);
      const sessions = new Map(clusters.map((c) => [c.name, openSession(c)]));
      const supervisor = supervisorFor(sessions, store, discovery, registry, log, parseDuration(flags.restartBackoff, "--restart-backoff"));
      // Set once supervision runs: how the container events of a cluster added later are followed.
      let followDeaths: ((cluster: string, session: Promise<ClusterSession>) => void) | undefined;
      let unfollowDeaths: ((cluster: string) => void) | undefined;
      // A cluster a remote client's `up` brought (its file uploaded): kept, then discovered (routed),
      // supervised and its restarts booted as this daemon's own clusters are. A changed file of a
      // name already uploaded replaces it (refused while a boot on it runs: uploadVerdict); one of
      // the daemon's own clusters is left as it is.
      const own = new Set(files.map((f, i) => clusters[i]?.name ?? f));
      // All a client's submission may name here: these clusters by name, these recipes by name.
      // Its own user (the socket) reads cluster files as its CLI does; a copy of one of its own is that one.
      const scope: DaemonScope = {
        own: clusters.slice(0, files.length),
        catalogue: catalogueSource(recipeDirs(), foundRecipes((line) => log(line))),
        ownTexts: new Map(watched.slice(0, files.length).map((w) => [w.cluster.name, w.text])),
        load: loadCluster,
      };
      const ownDefault = clusters[0] as Cluster;
      // Uploaded clusters watched now -> when last seen with a deployment or a boot (idleUploaded).
      const uploadedBusy = new Map(watched.filter((w) => !own.has(w.cluster.name)).map((w) => [w.cluster.name, Date.now()]));
      // Kept and compared as it is booted on: the client's text with this daemon's [ssh] and [docker].
      const verdict = (cluster: Cluster, file: { readonly text: string }, bootRunning: boolean) =>
        uploadVerdict(cluster.name, {
          own: own.has(cluster.name),
          keptText: uploadedBusy.has(cluster.name) ? keptUploadedText(uploadedDir, cluster.name) : undefined,
          text: composeUploaded(file.text, ownDefault),
          bootRunning,
        });
      const bootOn = (name: string): boolean => registry.list().some((b) => b.running && b.identity.cluster === name);
      const watchUploaded = (cluster: Cluster, file: { readonly file: string; readonly text: string }): void => {
        // Its boot was accepted (refuse said yes): that boot is the one running on it now.
        const v = verdict(cluster, file, false);
        if (v.kind === "same" || v.kind === "refuse") {
          if (v.kind === "same") uploadedBusy.set(cluster.name, Date.now());
          return;
        }
        let kept: string;
        try {
          kept = keepUploadedCluster(uploadedDir, cluster.name, { file: file.file, text: composeUploaded(file.text, ownDefault) });
        } catch (e) {
          // The boot is accepted and runs: it is said here, never a 500 to its client.
          log(`cannot keep the cluster file uploaded for ${cluster.name} (${(e as Error).message}): its boot runs, but what runs there is not routed or supervised until it is uploaded again`);
          return;
        }
        const session = openSession(cluster);
        sessions.set(cluster.name, session);
        uploadedBusy.set(cluster.name, Date.now());
        if (v.kind === "replace") discovery.replace(watchSource(cluster.name, kept));
        else discovery.add(watchSource(cluster.name, kept));
        followDeaths?.(cluster.name, session);
        log(v.kind === "replace"
          ? `cluster ${cluster.name} was uploaded again with other content: watching the new one (kept as ${kept}) in place of the old`
          : `watching cluster ${cluster.name} (uploaded by a client, kept as ${kept}): what runs there is routed and supervised`);
      };
      // A cluster file of this machine its own user booted on (through the socket): watched from
      // where it is, and forgotten when idle as an uploaded one is; not kept, so a daemon started
      // again watches it only once that user boots on it again.
      const watchOwnerFile = (cluster: Cluster): void => {
        // Watched already (one of its own, or a client's upload of that name): left as it is.
        if (sessions.has(cluster.name)) return;
        const session = openSession(cluster);
        sessions.set(cluster.name, session);
        uploadedBusy.set(cluster.name, Date.now());
        discovery.add(watchSource(cluster.name, path.resolve(cluster.file)));
        followDeaths?.(cluster.name, session);
        log(`watching cluster ${cluster.name} (${path.resolve(cluster.file)}, booted on by this daemon's user): what runs there is routed and supervised`);
      };
      // An uploaded cluster with nothing deployed on it and no boot for a while is forgotten: no more
      // SSH to hosts a client once named, and not watched again at the next start.
      const forgetIdle = (deployments: readonly { readonly cluster: string }[]): void => {
        const busy = new Set([...deployments.map((d) => d.cluster), ...registry.list().filter((b) => b.running).map((b) => b.identity.cluster)]);
        for (const name of idleUploaded(uploadedBusy, busy, Date.now())) {
          uploadedBusy.delete(name);
          discovery.remove(name);
          sessions.delete(name);
          unfollowDeaths?.(name);
          forgetUploadedCluster(uploadedDir, name);
          log(`forgetting the uploaded cluster ${name}: nothing deployed on it for ${FORGET_UPLOADED_AFTER_MS / 60_000} min (a client's up on it brings it back)`);
        }
      };
      discovery.subscribe((snap) => forgetIdle(snap.deployments));

      // Rebuilt only when the labels or the store changed; the store is checked on every request
      // because a lane switch must take effect before its old deployment is stopped.
      // A lane marked switching by an `up` that died (SIGKILL, a crash) is ignored: its lock tells.
      // A switching lane is looked at again every second, as that up may die meanwhile.
      const readLanes = (): LaneRecord[] => store.lanes().map((l) => (l.state === "switching" && !heldByLiveProcess(store, laneKey(l.name)) ? { ...l, state: "serving" as const } : l));
      let lanes: LaneRecord[] = readLanes();
      let storeVersion = store.dataVersion();
      let switchingCheckedAt = Date.now();
      let table: RouteTable | undefined;
      let tableSnapshot = discovery.snapshot();
      let supervisorVersion = supervisor.version;
      // Recorded by the `up` that booted it (src/lanes/launch.ts): read from the store once per
      // route table, not on every request (src/gateway/engine-keys.ts says why that is as fresh).
      const { engineKeys } = await import("../gateway/engine-keys.js");
      const keysOfEngines = engineKeys((cluster, deployment) => store.engineKey(cluster, deployment));
      const routes = (): RouteTable => {
        const version = store.dataVersion();
        const snapshot = discovery.snapshot();
        const recheck = lanes.some((l) => l.state === "switching") && Date.now() - switchingCheckedAt > 1000;
        if (version !== storeVersion || recheck) {
          // A lane changed: the labels are worth reading again now.
          if (version !== storeVersion) discovery.refreshSoon();
          storeVersion = version;
          switchingCheckedAt = Date.now();
          lanes = readLanes();
          table = undefined;
        }
        // A group being recreated answers with a Retry-After that shrinks: rebuilt on each request then.
        if (supervisor.version !== supervisorVersion || supervisor.restarting().length > 0) {
          supervisorVersion = supervisor.version;
          table = undefined;
        }
        if (snapshot !== tableSnapshot) {
          tableSnapshot = snapshot;
          table = undefined;
          for (const status of DEPLOYMENT_STATUSES) metrics.deployments.set({ status }, snapshot.deployments.filter((d) => d.status === status).length);
        }
        if (table === undefined) {
          keysOfEngines.clear();
          table = routeTable(snapshot.deployments, lanes, snapshot.at?.getTime(), snapshot.unreachable, supervisor.restarting());
        }
        return table;
      };

      const submit = bootSubmitter(registry, store, scope, log, {
        refuse: (cluster, file) => {
          const v = verdict(cluster, file, bootOn(cluster.name));
          return v.kind === "refuse" ? v.message : undefined;
        },
        accepted: watchUploaded,
        ownerFile: watchOwnerFile,
      }, keys.length > 0);
      const controlOptions = { registry, submit, maxBodyBytes: MAX_CONTROL_BODY_BYTES };
      // Over TCP: the admin key only. Through the socket (below): this user only.
      const control = flags.control ? controlApi({ ...controlOptions, ...(admin.length === 0 ? {} : { checkAdmin: keyChecker(admin) }) }) : undefined;
      const gateway = createGateway({
        ...(control === undefined ? {} : { control }),
        routes,
        ...(keys.length === 0 ? {} : { checkKey: keyChecker(keys) }),
        metrics,
        health: () => {
          const s = discovery.snapshot();
          return { deployments: s.deployments.length, strangers: s.strangers, unreachable: s.unreachable, discovered_at: s.at?.toISOString() ?? null, supervision: supervisor.describe() };
        },
        staleness: () => discovery.staleness(),
        // Asked right after routes() on each request: kept per table, a lane's new deployment is read anew.
        engineKey: (t) => keysOfEngines.get(t),
        // Every engine's routes: the gateway fronts deployments of any engine at once.
        apiMethods: engineApiMethods(),
        apiRefused: engineRefusedRoutes(),
        ...(keys.length > 0 ? { requireEngineKey: { how: addEngineKeyHow } } : {}),
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        upstreamFailed: () => discovery.refreshSoon(),
        headersTimeoutMs: parseDuration(flags.upstreamTimeout, "--upstream-timeout"),
        bodyTimeoutMs: parseDuration(flags.idleTimeout, "--idle-timeout"),
        maxBodyBytes: MAX_BODY_BYTES,
      });
      // Listen first: an address that cannot be had stops the daemon before anything else starts.
      await new Promise<void>((resolve, reject) => {
        gateway.server.once("error", (e: NodeJS.ErrnoException) => {
          const why = e.code === "EADDRINUSE" ? "is already in use" : e.code === "EADDRNOTAVAIL" ? "is not an address of this machine" : e.code === "EACCES" ? "needs privileges (a port below 1024?)" : `cannot be listened on (${e.code ?? e.message})`;
          reject(new UserError(`--listen ${flags.listen} ${why}`, "pass --listen HOST:PORT with an address of this machine and a free port"));
        });
        gateway.server.listen(listen.port, listen.host, resolve);
      }).catch(async (e: unknown) => {
        await gateway.close();
        store.close();
        throw e;
      });
      // Boots a daemon of this store left (killed, even with kill -9, or stopped) are watched again
      // from their containers' logs: each ends ready or rolled back, and `attach`/`down` reach it.
      adoptBoots({
        store,
        registry,
        clusters: clusters.map((c) => c.name),
        session: (name) => sessions.get(name) ?? Promise.resolve(undefined),
        log,
        now: () => new Date(),
        // A restart's boot is the supervisor's from now on: a failure goes to its backoff.
        restartAdopted: (plan, attempt, failure, ended) => supervisor.adoptedRestart(plan, attempt, failure, ended),
      });
      discovery.start();
      await discovery.ready(30_000);
      const supervising = superviseFrom(discovery, supervisor, sessions, log);
      followDeaths = supervising.follow;
      unfollowDeaths = supervising.unfollow;
      const addr = gateway.server.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : listen.port;
      const shown = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
      io.err(`launcher serve: listening on http://${shown}:${port}/v1 (${keys.length === 0 ? "no API key: loopback only" : `${keys.length} API key${keys.length === 1 ? "" : "s"}`}; clusters ${clusters.map((c) => c.name).join(", ")})`);
      let socket: ControlSocket | undefined;
      if (flags.control) {
        socket = await listenControlSocket(storeDir(process.env, homedir()), controlApi({ ...controlOptions, ownerSocket: true }), REQUEST_TIMEOUT_MS);
        io.err(`launcher serve: control API on http://${shown}:${port}${CONTROL_PREFIX} (${admin.length === 0 ? "no admin key: refused over TCP" : "admin key required"}) and on ${socket.path} (this user only)`);
      }
      const advertised = socket === undefined ? undefined : advertiseLocalDaemon(listen.host, port, socket.path);

      await new Promise<void>((resolve) => {
        const stop = (): void => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          io.err(`launcher serve: stopping (${gateway.inFlight()} request${gateway.inFlight() === 1 ? "" : "s"} in flight get up to 10 s)`);
          // A boot in progress outlives the daemon, as it outlives its client: it is left running on
          // the nodes (never rolled back by a stop or a restart of the daemon), its clients hear so,
          // and the next daemon adopts it (src/app/adopt.ts). `launcher down NAME` rolls it back.
          for (const b of registry.list().filter((x) => x.running)) log(`leaving the boot of ${b.identity.deployment} to the next launcher serve (launcher down ${b.identity.deployment} removes it)`);
          void registry.detachAll("launcher serve stopping", DETACH_MS).finally(() => {
            gateway.server.close(() => resolve());
            gateway.server.closeIdleConnections();
            setTimeout(() => {
              gateway.server.closeAllConnections();
              resolve();
            }, 10_000).unref();
          });
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      supervising.stop();
      await supervisor.stop();
      advertised?.();
      await socket?.close();
      await discovery.stop();
      await gateway.close();
      store.close();
      keepTerminalFree();
    });
}
