import type { Discovery, Snapshot } from "./discovery.js";
import { watchDeaths } from "../supervise/deaths.js";
import { bootAgain } from "./reboot.js";
import type { ClusterSession } from "../nodes/session.js";
import { DEFAULT_TIMING } from "../supervise/supervise.js";
import { Supervisor } from "../supervise/supervisor.js";
import { ReadyGuards } from "../supervise/ready-guard.js";
import { NodeGuardReader, type GuardBeats } from "../supervise/node-guard-reader.js";
import type { StateStore } from "../store/store.js";
import type { BootRegistry } from "../supervise/boots.js";
import { GenerationWatch, httpProbe } from "../supervise/generation-watch.js";
import type { GenerationTiming } from "../supervise/generation.js";
import type { GatewayMetrics } from "../gateway/metrics.js";
import type { LiveEvent } from "./live-sources.js";

// The daemon's supervision wiring: a Supervisor (src/supervise/supervisor.ts) fed by discovery's
// snapshots and the nodes' container deaths, restarting through the daemon's boot registry.

/**
 * The daemon's supervisor over these clusters (src/supervise/supervisor.ts): restarts boot through
 * src/daemon/reboot.ts in the daemon's boot registry. One SSH session per cluster, opened at start
 * (locally only: no node is contacted) and kept, so that its connections are shared.
 */
export function supervisorFor(sessions: ReadonlyMap<string, Promise<ClusterSession>>, store: StateStore, discovery: Discovery, registry: BootRegistry, log: (line: string) => void, backoffMs: number, beats?: GuardBeats): Supervisor {
  const session = (name: string): Promise<ClusterSession | undefined> => sessions.get(name) ?? Promise.resolve(undefined);
  // Every serving deployment's memory is watched until it is gone; a trip is a failure to the supervisor.
  const memory = new ReadyGuards({ session, store, log, now: Date.now, onTrip: (cluster, deployment, trip) => supervisor.memoryTripped(cluster, deployment, trip) });
  // The nodes' own guards' reports, read when a rank ends: a trip is a failure to the supervisor too.
  const nodeGuard = new NodeGuardReader({ session, store, log, now: Date.now, onTrip: (cluster, deployment, failure) => supervisor.nodeGuardTripped(cluster, deployment, failure), ...(beats === undefined ? {} : { beats }) });
  const supervisor: Supervisor = new Supervisor({
    memory,
    nodeGuard,
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

/** How often the supervisor looks for a backoff that is over. */
const SUPERVISE_EVERY_MS = 100;

/**
 * Feeds the supervisor each new discovery snapshot as it arrives, and each rank death the nodes'
 * Docker reports (src/supervise/deaths.ts) as it happens; returns how to stop.
 */
export function superviseFrom(discovery: Discovery, supervisor: Supervisor, sessions: ReadonlyMap<string, Promise<ClusterSession>>, log: (line: string) => void): { stop: () => void; follow: (cluster: string, session: Promise<ClusterSession>) => void; unfollow: (cluster: string) => void } {
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
 * The daemon's watch of every serving deployment's generation (src/supervise/generation-watch.ts):
 * it probes with the engine's key as the store holds it (the gateway's), shows each deployment's
 * last generation and wedged state in /metrics, records a wedge for `launcher status` (the rows of
 * `clusters` a former daemon left are cleared when it starts, a launch's own when it is first
 * watched), and hands a confirmed wedge to the supervisor (a restart under --restart on-failure;
 * a deployment it does not supervise is only not routed to), fed each of discovery's snapshots.
 * Its clock is performance.now(), which never goes back (nodejs.org/api/perf_hooks.html
 * #performancenow: relative to timeOrigin, monotonic); Date.now only shows when.
 */
export function generationWatchFor(store: StateStore, supervisor: Supervisor, metrics: GatewayMetrics, discovery: Discovery, timing: GenerationTiming, log: (line: string) => void, clusters: readonly string[]): GenerationWatch {
  const forget = (cluster: string, deployment: string): void => store.saveWedge(cluster, deployment, undefined);
  const watch = new GenerationWatch({
    probe: httpProbe,
    engineKey: (cluster, deployment) => store.engineKey(cluster, deployment),
    timing,
    now: () => performance.now(),
    wall: Date.now,
    log,
    onStart: () => {
      for (const cluster of clusters) for (const deployment of store.wedges(cluster).keys()) forget(cluster, deployment);
    },
    onWatched: (seen) => forget(seen.cluster, seen.deployment),
    onWedged: (seen, wedged, message) => {
      // Kept for `launcher status`, which reads the nodes and this store, not the daemon.
      store.saveWedge(seen.cluster, seen.deployment, { boot: seen.boot ?? "", since: new Date(wedged.since).toISOString(), message, at: new Date(wedged.at).toISOString() });
    },
    onConfirmed: (seen, _wedged, message) => supervisor.wedged(seen.cluster, seen.deployment, message),
    onCleared: (seen) => forget(seen.cluster, seen.deployment),
    onState: (cluster, deployment, state) => metrics.generation(cluster, deployment, state),
  });
  // Each new poll: serving deployments are watched, the others forgotten.
  discovery.subscribe((snap) => watch.observe(snap.deployments));
  return watch;
}

/**
 * The engines' own evidence for the watch: a metrics point (src/measure/live/metrics-scraper.ts)
 * whose generation rate is above 0 says vllm:generation_tokens_total went up since the scrape
 * before, so the engine generates even when no answer through the gateway ended. The tokens came
 * after the point before was heard (less that scrape's own fetch, at most its timeout): the
 * evidence is dated then, on the watch's monotonic clock (a wall clock set back must not date it
 * later), so that tokens an engine made before it wedged, counted by the first scrape after its
 * wedge was found, never end the wedge; a point with none before it says nothing. So a wedge ends
 * on the counter only two scrapes after it (SCRAPE_INTERVAL_MS apart), or on the next probe that
 * generates: a `--probe-bound` shorter than that can confirm a wedge of an engine that only
 * generates for clients that bypass the gateway. Subscribed to the daemon's live sources
 * (src/daemon/live-sources.ts), which hand each point on as it is read.
 */
export function generationFromMetrics(watch: Pick<GenerationWatch, "generated" | "now">): (event: LiveEvent) => void {
  const heard = new Map<string, number>();
  return (event) => {
    if (event.event !== "metrics") return;
    const { cluster, deployment, point } = event.data;
    const k = JSON.stringify([cluster, deployment]);
    const before = heard.get(k);
    heard.set(k, watch.now());
    if ((point.generation_tps ?? 0) > 0 && before !== undefined) watch.generated(cluster, deployment, before);
  };
}
