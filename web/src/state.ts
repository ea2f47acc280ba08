import type { ActivityRecord, ClusterView, DeploymentView, HistoryBoot, LaneView, MetricsPoint, MetricsWindow, ReadAnswer, ReadEvent, RunsAnswer } from "../../src/contract/read-api.js";
import { MAX_READ_LIMIT, READ_PATHS, withNodeEvent, withoutBodies, type BootViewSchema } from "../../src/contract/read-api.js";
import type { z } from "zod";

/**
 * What the page knows of the daemon: every route read once, then kept current by the events
 * stream's changes (READ_EVENTS). Pure: applyAnswer and applyEvent return a new state, so the views
 * redraw what changed, and each rule is unit-tested without a browser (test/unit/web-app.test.ts).
 */

export type BootView = z.infer<typeof BootViewSchema>;
type BootEventJson = BootView["events"][number];

/** The routes the page reads at start, and again after the stream reconnects. */
export const PAGE_READS = ["clusters", "deployments", "lanes", "boots", "history", "runs", "metrics", "activity"] as const;
export type PageRead = (typeof PAGE_READS)[number];

/** A route's path as the page reads it: activity with the most a read holds, not the route's default. */
export const readPath = (kind: PageRead): string => (kind === "activity" ? `${READ_PATHS.activity}?limit=${MAX_READ_LIMIT}` : READ_PATHS[kind]);

export interface PageState {
  readonly clusters: readonly ClusterView[];
  readonly deployments: readonly DeploymentView[];
  readonly lanes: readonly LaneView[];
  readonly boots: readonly BootView[];
  readonly history: readonly HistoryBoot[];
  readonly runs?: RunsAnswer;
  readonly metrics: readonly MetricsWindow[];
  /** Newest first, as the route answers. */
  readonly activity: readonly ActivityRecord[];
  /** The routes read at least once. */
  readonly loaded: ReadonlySet<PageRead>;
}

export const EMPTY_STATE: PageState = { clusters: [], deployments: [], lanes: [], boots: [], history: [], metrics: [], activity: [], loaded: new Set() };

/** How far back a deployment's metrics go: the daemon's window (an hour), kept so as the stream adds. */
export const METRICS_WINDOW_MS = 3600_000;
/** The most points kept per deployment (an hour at a 1 s scrape), whatever the stream sends. */
export const MAX_METRICS_POINTS = 3600;
/** The most requests the activity table holds: what one read of the route holds at most. */
export const MAX_ACTIVITY = MAX_READ_LIMIT;
/**
 * The most events kept per boot: a boot says a few hundred; a runaway one is cut from its start. The
 * daemon's boots route holds at most 1000 of a boot's (MAX_BOOT_EVENTS in src/supervise/boots.ts),
 * and the stream adds to them while the page is open.
 */
export const MAX_BOOT_EVENTS = 5000;
/** The ended boots kept beside the running ones (the newest by start): the page is left open for days. */
export const MAX_ENDED_BOOTS = 20;

const loaded = (s: PageState, kind: PageRead): ReadonlySet<PageRead> => new Set([...s.loaded, kind]);

/** The state with a route's answer in place of what it held. */
export function applyAnswer<K extends PageRead>(s: PageState, kind: K, answer: ReadAnswer<K>): PageState {
  const a = answer as ReadAnswer<PageRead>;
  const next = { ...s, loaded: loaded(s, kind) };
  switch (kind) {
    case "clusters":
      return { ...next, clusters: (a as ReadAnswer<"clusters">).clusters };
    case "deployments":
      return { ...next, deployments: (a as ReadAnswer<"deployments">).deployments };
    case "lanes":
      return { ...next, lanes: (a as ReadAnswer<"lanes">).lanes };
    case "boots":
      return { ...next, boots: boundBoots((a as ReadAnswer<"boots">).boots) };
    case "history":
      return { ...next, history: (a as ReadAnswer<"history">).boots };
    case "runs":
      return { ...next, runs: a as RunsAnswer };
    case "metrics":
      return { ...next, metrics: (a as ReadAnswer<"metrics">).windows };
    case "activity":
      // An admin's read carries captured bodies, which the page never shows and the stream never
      // sends: kept without them, a request the stream also brings is recognised as the same one.
      return { ...next, activity: (a as ReadAnswer<"activity">).requests.slice(0, MAX_ACTIVITY).map(withoutBodies) };
  }
  return next;
}

/** The running boots and the newest MAX_ENDED_BOOTS ended ones, in the order held. */
export function boundBoots(boots: readonly BootView[]): BootView[] {
  const ended = boots.filter((b) => b.running !== true);
  if (ended.length <= MAX_ENDED_BOOTS) return [...boots];
  const kept = new Set([...ended].sort((x, y) => Date.parse(y.started_at) - Date.parse(x.started_at)).slice(0, MAX_ENDED_BOOTS));
  return boots.filter((b) => b.running === true || kept.has(b));
}

/** `list` with `item` in place of the one `same` finds, or added at its end. */
function upsert<T>(list: readonly T[], item: T, same: (x: T) => boolean): T[] {
  const at = list.findIndex(same);
  return at < 0 ? [...list, item] : list.map((x, i) => (i === at ? item : x));
}

/**
 * How far back an event of the stream is looked for among what a read already gave: the page reads
 * the routes once the stream is open, so an event of those moments may be in both.
 */
const SEEN_WINDOW = 32;
const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** A boot's summary after one more of its events: its nodes' phases, and its end (ready or failed). */
export function bootWith(boot: BootView, event: BootEventJson): BootView {
  if (boot.events.slice(-SEEN_WINDOW).some((e) => e.t === event.t && sameJson(e, event))) return boot;
  const events = [...boot.events, event].slice(-MAX_BOOT_EVENTS);
  const e = event as { type: string; node?: unknown; state?: { phase?: unknown }; error?: { message?: unknown } };
  const nodes = e.type === "node" && typeof e.node === "string" && typeof e.state?.phase === "string" ? { ...boot.nodes, [e.node]: e.state.phase } : boot.nodes;
  if (e.type === "result") return { ...boot, events, nodes, state: "ready", running: false };
  if (e.type === "error") {
    const message = typeof e.error?.message === "string" ? e.error.message : "the boot failed";
    return { ...boot, events, nodes, state: "failed", running: false, error: message };
  }
  return { ...boot, events, nodes };
}

/** A boot the page first hears of by its stream (it started after the page read the boots). */
function newBoot(data: Extract<ReadEvent, { event: "boot" }>["data"]): BootView {
  return { deployment: data.deployment, cluster: data.cluster, ...(data.lane === undefined ? {} : { lane: data.lane }), running: true, state: "booting", started_at: new Date(data.event.t).toISOString(), nodes: {}, events: [] };
}

function withBootEvent(s: PageState, data: Extract<ReadEvent, { event: "boot" }>["data"]): PageState {
  const same = (b: BootView): boolean => b.deployment === data.deployment && b.cluster === data.cluster;
  const held = s.boots.find(same);
  // A boot of a name that ended and starts again is a new boot: its `accepted` begins it.
  const base = held === undefined || (data.event.type === "accepted" && held.state !== "booting") ? newBoot(data) : held;
  return { ...s, boots: boundBoots(upsert(s.boots, bootWith(base, data.event), same)) };
}

function withPoint(s: PageState, cluster: string, deployment: string, point: MetricsPoint): PageState {
  const same = (w: MetricsWindow): boolean => w.cluster === cluster && w.deployment === deployment;
  const held = s.metrics.find(same)?.points ?? [];
  // A sample no newer than the newest held was in the window read (samples come in time order).
  if (held.length > 0 && point.t <= (held.at(-1)?.t ?? 0)) return s;
  const points = [...held, point].filter((p) => p.t > point.t - METRICS_WINDOW_MS).slice(-MAX_METRICS_POINTS);
  return { ...s, metrics: upsert(s.metrics, { cluster, deployment, points }, same) };
}

function withReachable(s: PageState, d: Extract<ReadEvent, { event: "node" }>["data"]): PageState {
  const clusters = s.clusters.map((c) => (c.name !== d.cluster ? c : { ...c, nodes: c.nodes.map((n) => (n.name === d.node ? withNodeEvent(n, d) : n)) }));
  return { ...s, clusters };
}

/** The state after one event of the stream (a `log` or `end` is the logs view's, not this state's). */
export function applyEvent(s: PageState, e: ReadEvent): PageState {
  switch (e.event) {
    case "deployment": {
      const d = e.data;
      return { ...s, deployments: upsert(s.deployments, d, (x) => x.deployment === d.deployment && x.cluster === d.cluster) };
    }
    case "deployment_removed": {
      // Its metrics window goes with it: a page left open would otherwise hold an hour of every deployment it ever saw.
      const gone = (x: { deployment: string; cluster: string }): boolean => x.deployment === e.data.deployment && x.cluster === e.data.cluster;
      return { ...s, deployments: s.deployments.filter((x) => !gone(x)), metrics: s.metrics.filter((w) => !gone(w)) };
    }
    case "node":
      return withReachable(s, e.data);
    case "lane":
      return { ...s, lanes: upsert(s.lanes, e.data, (x) => x.name === e.data.name) };
    case "lane_removed":
      return { ...s, lanes: s.lanes.filter((x) => x.name !== e.data.name) };
    case "boot":
      return withBootEvent(s, e.data);
    case "metrics":
      return withPoint(s, e.data.cluster, e.data.deployment, e.data.point);
    case "activity":
      if (s.activity.slice(0, SEEN_WINDOW).some((r) => r.t === e.data.t && sameJson(r, e.data))) return s;
      return { ...s, activity: [e.data, ...s.activity].slice(0, MAX_ACTIVITY) };
    case "log":
    case "end":
      return s;
  }
}

/**
 * The routes to read again after an event: a boot's end writes its history (which has no event of
 * its own) and a new run is in no event either.
 */
export function rereadsAfter(e: ReadEvent): readonly PageRead[] {
  if (e.event !== "boot") return [];
  return e.data.event.type === "result" || e.data.event.type === "error" ? ["history"] : [];
}

/**
 * A deployment by name, on `cluster` when the route names one; else the serving one when the name
 * runs on several clusters (the others are listed by othersNamed), else the first.
 */
export function deploymentNamed(s: PageState, name: string, cluster?: string): DeploymentView | undefined {
  const named = s.deployments.filter((d) => d.deployment === name && (cluster === undefined || d.cluster === cluster));
  return named.find((d) => d.status === "serving") ?? named[0];
}
/** The deployments of the same name on the other clusters than `shown`'s. */
export const othersNamed = (s: PageState, shown: Pick<DeploymentView, "deployment" | "cluster">): DeploymentView[] => s.deployments.filter((d) => d.deployment === shown.deployment && d.cluster !== shown.cluster);
/** A boot by name, on `cluster` when given; a running one before an ended one. */
export function bootNamed(s: PageState, name: string, cluster?: string): BootView | undefined {
  const named = s.boots.filter((b) => b.deployment === name && (cluster === undefined || b.cluster === cluster));
  return named.find((b) => b.running === true) ?? named[0];
}

/** A deployment's metrics points (its cluster's window). */
export function pointsOf(s: PageState, d: Pick<DeploymentView, "deployment" | "cluster">): readonly MetricsPoint[] {
  return s.metrics.find((w) => w.deployment === d.deployment && w.cluster === d.cluster)?.points ?? [];
}

/** The requests a deployment answered, oldest first (as a chart draws them). */
export function activityOf(s: PageState, deployment: string): ActivityRecord[] {
  return s.activity.filter((r) => r.deployment === deployment).reverse();
}

/** History's boots grouped by recipe, the recipes in the order of their newest boot (as the route lists them). */
export function historyByRecipe(boots: readonly HistoryBoot[]): { recipe: string; boots: HistoryBoot[] }[] {
  const groups = new Map<string, HistoryBoot[]>();
  for (const b of boots) groups.set(b.recipe, [...(groups.get(b.recipe) ?? []), b]);
  return [...groups].map(([recipe, list]) => ({ recipe, boots: list }));
}

/** The latest value of `key` among a deployment's points; undefined when none reported it. */
export function latest(points: readonly MetricsPoint[], key: Exclude<keyof MetricsPoint, "t">): number | undefined {
  for (let i = points.length - 1; i >= 0; i--) {
    const v = points[i]?.[key];
    if (v !== undefined) return v;
  }
  return undefined;
}
