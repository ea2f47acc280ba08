/**
 * The read API's answers made from what the daemon holds (discovery's snapshot, the supervisor's
 * states, the store's records, the boots), and the events that tell one picture from the next.
 * Pure: the shell (./read-api.ts) reads the sources and hands them here.
 */
import type { Cluster } from "../cluster/cluster.js";
import type { FabricFacts } from "../cluster/detect.js";
import type { ClusterView, DeploymentView, HistoryBoot, LaneView, ReadAnswer, ReadEvent } from "../contract/read-api.js";
import { memoryFloorGiB } from "../memory/memory-watch.js";
import type { Meminfo } from "../memory/meminfo.js";
import type { BootRecord, LaneRecord, SwapRecord, WatchedMemory } from "../store/store.js";
import type { UpEvent } from "../boot/up-events.js";
import type { BootIdentity } from "../supervise/boots.js";
import type { Snapshot } from "./discovery.js";
import { summarizeBoot } from "./protocol.js";
import type { OutageKind } from "../contract/outage.js";

/** The supervisor's state per `cluster/deployment` (Supervisor.describe). */
export type Supervision = Readonly<Record<string, string>>;

/** What a node's own guard did to a deployment's launch (cluster, deployment, its launch id): the words said of it, or undefined. */
export type GuardTripsOf = (cluster: string, deployment: string, boot: string) => string | undefined;

/** Each deployment discovery last saw, with its supervision state, and its node guard's trip. */
export function deploymentViews(snapshot: Snapshot, supervision: Supervision, guardTrip: GuardTripsOf = () => undefined): DeploymentView[] {
  return snapshot.deployments.map((d) => {
    const sup = supervision[`${d.cluster}/${d.deployment}`];
    const trip = guardTrip(d.cluster, d.deployment, d.boot ?? "");
    // The outages of its nodes are the gateway's words; the read API says them on its nodes.
    const { outages: _outages, ...seen } = d;
    return { ...seen, missing: [...d.missing], unreachable: [...d.unreachable], ranks: d.ranks.map((r) => ({ ...r })), ...(sup === undefined ? {} : { supervision: sup }), ...(trip === undefined ? {} : { node_guard: trip }) };
  });
}

export function deploymentsAnswer(snapshot: Snapshot, supervision: Supervision, guardTrip?: GuardTripsOf): ReadAnswer<"deployments"> {
  return {
    deployments: deploymentViews(snapshot, supervision, guardTrip),
    strangers: snapshot.strangers.map((s) => ({ ...s })),
    unreachable: [...snapshot.unreachable],
    ...(snapshot.at === undefined ? {} : { discovered_at: snapshot.at.toISOString() }),
  };
}

/** What the store knows of one cluster's nodes: doctor's facts and memory, the guard's samples. */
export interface ClusterReads {
  readonly facts: { readonly facts: ReadonlyMap<string, FabricFacts>; readonly detected_at?: string };
  readonly memory: ReadonlyMap<string, { readonly meminfo: Meminfo; readonly read_at: string }>;
  readonly watched: ReadonlyMap<string, WatchedMemory>;
}

/** A node's memory: the newer of the guard's sample and doctor's read; page cache from doctor's. */
function nodeMemory(cluster: Cluster, node: Cluster["nodes"][number], reads: ClusterReads): ClusterView["nodes"][number]["memory"] {
  const doctor = reads.memory.get(node.name);
  const guard = reads.watched.get(node.name);
  const floor_gib = memoryFloorGiB(cluster, node);
  const page = doctor === undefined ? {} : { page_cache_kib: doctor.meminfo.cachedKiB };
  if (guard !== undefined && (doctor === undefined || guard.at >= doctor.read_at)) {
    return { total_kib: guard.sample.totalKiB, available_kib: guard.sample.availableKiB, floor_gib, ...page, source: "guard", deployment: guard.deployment, read_at: guard.at };
  }
  if (doctor === undefined) return undefined;
  return { total_kib: doctor.meminfo.totalKiB, available_kib: doctor.meminfo.availableKiB, floor_gib, ...page, source: "doctor", read_at: doctor.read_at };
}

/** Whether discovery's last poll reached `node`; undefined before the first poll. */
const reachable = (snapshot: Snapshot, cluster: string, node: string): boolean | undefined =>
  snapshot.at === undefined ? undefined : !snapshot.unreachable.includes(`${cluster}/${node}`);

/** The node's open outage in discovery's snapshot, if it is out. */
const outageOf = (snapshot: Snapshot, cluster: string, node: string): { kind: OutageKind; since: string } | undefined => {
  const o = snapshot.outages?.find((x) => x.cluster === cluster && x.node === node);
  return o === undefined ? undefined : { kind: o.kind, since: o.since };
};

export function clusterView(cluster: Cluster, reads: ClusterReads, snapshot: Snapshot): ClusterView {
  return {
    name: cluster.name,
    nodes: cluster.nodes.map((n) => {
      const memory = nodeMemory(cluster, n, reads);
      const fabric = reads.facts.facts.get(n.name);
      const up = reachable(snapshot, cluster.name, n.name);
      const outage = outageOf(snapshot, cluster.name, n.name);
      return {
        name: n.name,
        rank: n.rank,
        ...(up === undefined ? {} : { reachable: up }),
        ...(outage === undefined ? {} : { outage }),
        ...(memory === undefined ? {} : { memory }),
        ...(fabric === undefined ? {} : { fabric: { ...fabric, hca: [...fabric.hca] } }),
      };
    }),
    ...(reads.facts.detected_at === undefined ? {} : { facts_detected_at: reads.facts.detected_at }),
  };
}

/** Each node's reachability, keyed `cluster/node`, for the diff. */
export function nodeStates(clusters: readonly Cluster[], snapshot: Snapshot): Map<string, NodeState> {
  const out = new Map<string, NodeState>();
  for (const c of clusters) {
    for (const n of c.nodes) {
      const up = reachable(snapshot, c.name, n.name);
      if (up !== undefined) out.set(`${c.name}/${n.name}`, { cluster: c.name, node: n.name, reachable: up, ...outageOf(snapshot, c.name, n.name) });
    }
  }
  return out;
}

export function laneViews(lanes: readonly LaneRecord[], swaps: (lane: string) => readonly SwapRecord[]): LaneView[] {
  return lanes.map((l) => ({ ...l, swaps: swaps(l.name).map((s) => ({ ...s })) }));
}

/** A boot the daemon holds, with every event it kept. */
export function bootView(b: { readonly identity: BootIdentity; readonly events: readonly UpEvent[] }): ReadAnswer<"boots">["boots"][number] {
  return { ...summarizeBoot(b.identity, b.events), events: b.events.map((e) => ({ ...e })) };
}

const secondsBetween = (from: string, to: string | undefined): number | undefined => {
  if (to === undefined) return undefined;
  const s = (Date.parse(to) - Date.parse(from)) / 1000;
  return Number.isFinite(s) ? Math.round(s * 1000) / 1000 : undefined;
};

/** A history record with each phase's duration and the boot's own. */
export function historyBoot(r: BootRecord): HistoryBoot {
  const seconds = secondsBetween(r.started_at, r.ended_at);
  return {
    ...r,
    nodes: [...r.nodes],
    ...(seconds === undefined ? {} : { seconds }),
    phases: r.phases.map((p) => {
      const s = secondsBetween(p.started_at, p.ended_at);
      return { ...p, figures: { ...p.figures }, ...(s === undefined ? {} : { seconds: s }) };
    }),
  };
}

/** A node as the `node` event says it. */
export type NodeState = Extract<ReadEvent, { event: "node" }>["data"];

/** What the SSE stream compares from one picture to the next. */
export interface Picture {
  readonly deployments: readonly DeploymentView[];
  readonly nodes: ReadonlyMap<string, NodeState>;
  readonly lanes: readonly LaneView[];
}

export const EMPTY_PICTURE: Picture = { deployments: [], nodes: new Map(), lanes: [] };

/** The items of `after` that are new or differ from `before`'s of the same key, and the keys gone. */
function changes<T>(before: ReadonlyMap<string, T>, after: ReadonlyMap<string, T>, compared: (t: T | undefined) => unknown = (t) => t): { changed: T[]; gone: string[] } {
  const changed = [...after].filter(([k, v]) => JSON.stringify(compared(before.get(k))) !== JSON.stringify(compared(v))).map(([, v]) => v);
  return { changed, gone: [...before.keys()].filter((k) => !after.has(k)) };
}

const byKey = <T>(items: readonly T[], key: (t: T) => string): Map<string, T> => new Map(items.map((t) => [key(t), t]));

/** The events that take a client from `before` to `after`: each deployment, node and lane that changed. */
export function diffPictures(before: Picture, after: Picture): ReadEvent[] {
  const dKey = (d: DeploymentView): string => `${d.cluster}/${d.deployment}`;
  // A deployment's uptime grows with every poll: only what else changed is news (a client counts it on).
  const withoutUptime = (d: DeploymentView | undefined): unknown => (d === undefined ? undefined : { ...d, uptime_seconds: undefined });
  const ds = changes(byKey(before.deployments, dKey), byKey(after.deployments, dKey), withoutUptime);
  const ns = changes(before.nodes, after.nodes);
  const ls = changes(byKey(before.lanes, (l) => l.name), byKey(after.lanes, (l) => l.name));
  const gone = new Map(before.deployments.map((d) => [dKey(d), d]));
  return [
    ...ds.changed.map((data): ReadEvent => ({ event: "deployment", data })),
    ...ds.gone.flatMap((k): ReadEvent[] => {
      const d = gone.get(k);
      return d === undefined ? [] : [{ event: "deployment_removed", data: { cluster: d.cluster, deployment: d.deployment } }];
    }),
    ...ns.changed.map((data): ReadEvent => ({ event: "node", data })),
    ...ls.changed.map((data): ReadEvent => ({ event: "lane", data })),
    ...ls.gone.map((name): ReadEvent => ({ event: "lane_removed", data: { name } })),
  ];
}
