/**
 * `launcher top`'s picture of the cluster: what the daemon's read API answers (src/contract/read-api.ts),
 * then each event of its stream applied in turn. Pure: the CLI (src/cli/top.ts) reads the routes
 * and the stream, and src/cli/top-view.ts draws the picture.
 */
import { UserError } from "../config/errors.js";
import type { ClusterView, DaemonBootState, DeploymentView, LaneView, MetricsPoint, ReadAnswer, ReadEvent } from "../contract/read-api.js";
import { withNodeEvent } from "../contract/read-api.js";
import { decodeError, decodeEvent, type UpEvent } from "../boot/up-events.js";
import { isClusterName, type ClusterChoice } from "../cluster/locate.js";

/** A boot the daemon runs or ran, as top shows it: its nodes' phases, and why it failed. */
export interface TopBoot {
  readonly deployment: string;
  readonly cluster: string;
  readonly lane?: string;
  readonly state: DaemonBootState;
  /** ms since the epoch, the daemon's clock. */
  readonly started_ms: number;
  readonly ended_ms?: number;
  /** Each node's latest boot phase. */
  readonly nodes: Readonly<Record<string, string>>;
  readonly error?: string;
}

/** How the event stream stands: live, or cut and opened again after `retry_ms` (the daemon's clock is not used). */
export type StreamState = { readonly kind: "live" } | { readonly kind: "reconnecting"; readonly attempt: number; readonly why: string; readonly retry_at_ms: number };

export interface TopPicture {
  readonly clusters: readonly ClusterView[];
  /** Keyed `cluster/deployment`. */
  readonly deployments: ReadonlyMap<string, DeploymentView>;
  readonly lanes: ReadonlyMap<string, LaneView>;
  /** Keyed `cluster/deployment`: a deployment has one boot at a time. */
  readonly boots: ReadonlyMap<string, TopBoot>;
  /** The newest engine metrics point of each serving deployment, keyed `cluster/deployment`. */
  readonly metrics: ReadonlyMap<string, MetricsPoint>;
  /** Nodes discovery could not read, `cluster/node`. */
  readonly unreachable: readonly string[];
}

/** What top reads once (and again after each reconnect). */
export interface TopAnswers {
  readonly clusters: ReadAnswer<"clusters">;
  readonly deployments: ReadAnswer<"deployments">;
  readonly lanes: ReadAnswer<"lanes">;
  readonly boots: ReadAnswer<"boots">;
  readonly metrics: ReadAnswer<"metrics">;
}

/**
 * The most items of each kind the picture holds: the daemon's answers and stream are another
 * machine's, and a screen shows far fewer (a key past it is not added; an ended boot makes room).
 */
export const MAX_ITEMS = 256;

const key = (cluster: string, deployment: string): string => `${cluster}/${deployment}`;

/** `only`: the one cluster to show (--cluster); undefined: every cluster the daemon watches. */
const inCluster = (only: string | undefined, cluster: string): boolean => only === undefined || only === cluster;

/** `map` with `k` set to `v`, unless that would take it past MAX_ITEMS keys. */
function withItem<V>(map: ReadonlyMap<string, V>, k: string, v: V): ReadonlyMap<string, V> {
  if (!map.has(k) && map.size >= MAX_ITEMS) return map;
  return new Map(map).set(k, v);
}

function without<V>(map: ReadonlyMap<string, V>, k: string): ReadonlyMap<string, V> {
  if (!map.has(k)) return map;
  const next = new Map(map);
  next.delete(k);
  return next;
}

/** A boot as the boots route answers it, its state already summarized there. */
function bootOf(b: ReadAnswer<"boots">["boots"][number]): TopBoot {
  const last = b.events.at(-1);
  return {
    deployment: b.deployment,
    cluster: b.cluster,
    ...(b.lane === undefined ? {} : { lane: b.lane }),
    state: b.state,
    started_ms: Date.parse(b.started_at),
    ...(b.state !== "booting" && last !== undefined ? { ended_ms: last.t } : {}),
    nodes: { ...b.nodes },
    ...(b.error === undefined ? {} : { error: b.error }),
  };
}

/** Items into a map by key, at most MAX_ITEMS. */
const mapOf = <T>(items: readonly T[], k: (t: T) => string): ReadonlyMap<string, T> => new Map(items.slice(0, MAX_ITEMS).map((t) => [k(t), t]));

/** The picture the routes answered, of cluster `only` (or of every one). */
export function pictureOf(a: TopAnswers, only?: string): TopPicture {
  return {
    clusters: a.clusters.clusters.filter((c) => inCluster(only, c.name)).slice(0, MAX_ITEMS),
    deployments: mapOf(a.deployments.deployments.filter((d) => inCluster(only, d.cluster)), (d) => key(d.cluster, d.deployment)),
    lanes: mapOf(a.lanes.lanes.filter((l) => inCluster(only, l.cluster)), (l) => l.name),
    boots: mapOf(a.boots.boots.filter((b) => inCluster(only, b.cluster)).map(bootOf), (b) => key(b.cluster, b.deployment)),
    metrics: new Map(
      a.metrics.windows
        .filter((w) => inCluster(only, w.cluster) && w.points.length > 0)
        .slice(0, MAX_ITEMS)
        .map((w) => [key(w.cluster, w.deployment), w.points.at(-1) as MetricsPoint]),
    ),
    unreachable: a.deployments.unreachable.filter((n) => inCluster(only, n.split("/")[0] ?? "")).slice(0, MAX_ITEMS),
  };
}

/** The one cluster asked for must be one the daemon watches: else a user error naming those it does. */
export function checkCluster(a: TopAnswers, only: string | undefined, daemon: string): void {
  if (only === undefined || a.clusters.clusters.some((c) => c.name === only)) return;
  const watched = a.clusters.clusters.map((c) => c.name);
  throw new UserError(
    `the daemon at ${daemon} watches no cluster ${only}${watched.length === 0 ? " (it watches none)" : `: it watches ${watched.join(", ")}`}`,
    // Found without --cluster too (LAUNCHER_CLUSTER, ./cluster.toml, the default cluster): naming one of the daemon's is the way out.
    watched.length === 0 ? "launcher serve --cluster FILE names the clusters it watches" : `pass --cluster ${watched.length === 1 ? (watched[0] ?? "NAME") : "NAME, one of those"}`,
  );
}

/** A node's reachability or memory changed: the clusters with that node's view replaced. */
function withNode(clusters: readonly ClusterView[], cluster: string, node: string, change: (n: ClusterView["nodes"][number]) => ClusterView["nodes"][number]): readonly ClusterView[] {
  return clusters.map((c) => (c.name !== cluster ? c : { ...c, nodes: c.nodes.map((n) => (n.name === node ? change(n) : n)) }));
}

/** Room for a new boot: the boot that ended first goes when the picture is full. */
function roomForBoot(boots: ReadonlyMap<string, TopBoot>): ReadonlyMap<string, TopBoot> {
  if (boots.size < MAX_ITEMS) return boots;
  const ended = [...boots].filter(([, b]) => b.ended_ms !== undefined).sort(([, a], [, b]) => (a.ended_ms ?? 0) - (b.ended_ms ?? 0))[0];
  return ended === undefined ? boots : without(boots, ended[0]);
}

/** One event of a boot applied to what top knows of it (undefined: none yet). */
export function advanceTopBoot(before: TopBoot | undefined, id: { deployment: string; cluster: string; lane?: string }, e: UpEvent): TopBoot {
  const base: TopBoot = e.type === "accepted" || before === undefined ? { ...id, state: "booting", started_ms: e.t, nodes: {} } : before;
  switch (e.type) {
    case "node":
      return { ...base, nodes: { ...base.nodes, [e.node]: e.state.phase } };
    case "result":
      return { ...base, state: "ready", ended_ms: e.t };
    case "error":
      return { ...base, state: "failed", ended_ms: e.t, error: decodeError(e.error).message };
    default:
      return base;
  }
}

/** A `boot` event of the stream applied: its boot advanced, and a memory sample put on its node. */
function applyBoot(p: TopPicture, data: Extract<ReadEvent, { event: "boot" }>["data"]): TopPicture {
  // The stream checks a boot event's outline only; its own decoder reads the rest (or drops it).
  const e = decodeEvent(JSON.stringify(data.event));
  if (e === undefined) return p;
  const k = key(data.cluster, data.deployment);
  const id = { deployment: data.deployment, cluster: data.cluster, ...(data.lane === undefined ? {} : { lane: data.lane }) };
  const boots = withItem(p.boots.has(k) ? p.boots : roomForBoot(p.boots), k, advanceTopBoot(p.boots.get(k), id, e));
  if (e.type !== "memory") return { ...p, boots };
  const sampled = new Date(e.t).toISOString();
  const clusters = withNode(p.clusters, data.cluster, e.node, (n) =>
    n.memory === undefined ? n : { ...n, memory: { ...n.memory, total_kib: e.sample.totalKiB, available_kib: e.sample.availableKiB, source: "guard", deployment: data.deployment, read_at: sampled } },
  );
  return { ...p, boots, clusters };
}

type Applier = (p: TopPicture, data: never) => TopPicture;

/** Event -> how it changes the picture: the one table of what top does with the stream. */
const APPLY: { readonly [K in ReadEvent["event"]]: (p: TopPicture, data: Extract<ReadEvent, { event: K }>["data"]) => TopPicture } = {
  deployment: (p, d) => ({ ...p, deployments: withItem(p.deployments, key(d.cluster, d.deployment), d) }),
  deployment_removed: (p, d) => ({ ...p, deployments: without(p.deployments, key(d.cluster, d.deployment)), metrics: without(p.metrics, key(d.cluster, d.deployment)) }),
  node: (p, d) => {
    const k = `${d.cluster}/${d.node}`;
    const unreachable = d.reachable ? p.unreachable.filter((n) => n !== k) : p.unreachable.includes(k) ? p.unreachable : [...p.unreachable, k].slice(0, MAX_ITEMS);
    return { ...p, unreachable, clusters: withNode(p.clusters, d.cluster, d.node, (n) => withNodeEvent(n, d)) };
  },
  lane: (p, d) => ({ ...p, lanes: withItem(p.lanes, d.name, d) }),
  lane_removed: (p, d) => ({ ...p, lanes: without(p.lanes, d.name) }),
  boot: applyBoot,
  metrics: (p, d) => {
    const k = key(d.cluster, d.deployment);
    const known = p.metrics.get(k);
    return known !== undefined && known.t > d.point.t ? p : { ...p, metrics: withItem(p.metrics, k, d.point) };
  },
  // Requests and log lines are not on top's screen; `end` is the stream's, and the shell sees it end.
  activity: (p) => p,
  log: (p) => p,
  end: (p) => p,
};

/** The cluster an event is about, when it names one. */
function clusterOfEvent(e: ReadEvent): string | undefined {
  return "cluster" in e.data && typeof e.data.cluster === "string" ? e.data.cluster : undefined;
}

/** One event of the stream applied to the picture of cluster `only` (or of every one). */
export function applyEvent(p: TopPicture, e: ReadEvent, only?: string): TopPicture {
  const cluster = clusterOfEvent(e);
  if (cluster !== undefined && !inCluster(only, cluster)) return p;
  return (APPLY[e.event] as Applier)(p, e.data as never);
}

/** The picture as `top --json` prints it: snake_case keys, lists in the order top draws them. */
export function pictureJson(p: TopPicture, daemon: string): Record<string, unknown> {
  return {
    daemon,
    clusters: p.clusters,
    unreachable: p.unreachable,
    lanes: [...p.lanes.values()],
    deployments: [...p.deployments.values()].map((d) => {
      const point = p.metrics.get(key(d.cluster, d.deployment));
      return { ...d, ...(point === undefined ? {} : { metrics: point }) };
    }),
    boots: [...p.boots.values()],
  };
}

/**
 * Which cluster top shows: the cluster file `--cluster` names or that is found as every command
 * finds one (its `name`); a name this machine has no file for, as the daemon's own name (it may
 * run elsewhere); undefined when no cluster is given or found: every cluster the daemon watches.
 */
export function clusterToShow(option: string | undefined, choice: ClusterChoice, nameOf: (file: string) => string): string | undefined {
  if (choice.found) return nameOf(choice.file);
  if (option !== undefined && isClusterName(option)) return option;
  if (choice.source === undefined) return undefined;
  throw new UserError(choice.message, choice.hint);
}
