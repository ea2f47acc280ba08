import { NODE_GUARD_REASON, nodeGuardTripMessage, nodeGuardTripWords, type NodeGuardTripRecord } from "../contract/node-guard-trip.js";
import type { DeploymentStatus } from "../contract/deployment.js";
import { lookNodeGuards, nodeGuardTrip } from "../memory/node-guard-shell.js";
import type { NodeGuardEvent, NodeGuardHeartbeat } from "../memory/node-guard.js";
import { listNodes } from "../nodes/labels.js";
import type { ClusterSession } from "../nodes/session.js";
import type { StateStore } from "../store/store.js";
import type { RankDeath } from "./deaths.js";
import type { Failure } from "./supervise.js";

/**
 * The daemon's reader of the nodes' own guards (src/memory/node-guard.ts): a guard on a node kills
 * only that node's containers, alone, and writes why in its report there. The daemon reads that
 * report when a rank of the deployment ends (docker's die event, or a poll that shows a rank ended
 * that was not looked at yet: cheap, one short command on the session it holds), and then:
 * records the trip (status, history, the read API say it, not a bare exit 137), kills what runs of
 * the deployment on every other node it reaches (as its own guard does: src/memory/guard.ts),
 * saying which it could not reach, and hands the supervisor the trip as the failure (a restart
 * under --restart on-failure gives it as its reason).
 */

/** A deployment as discovery reports it (src/supervise/supervisor.ts Seen). */
export type SeenDeployment = DeploymentStatus & { readonly cluster: string };

type Trip = Extract<NodeGuardEvent, { kind: "tripped" }>;

/** How much earlier than its container's start a trip may be stamped and still be its launch's: the two clocks are the node's own; a margin for a second's rounding. */
const LAUNCH_SLACK_MS = 2000;

/**
 * Whether a trip read on `node` is of the launch `seen` shows there: a trip stamped before every
 * rank of it on that node started is an earlier launch's (a guard that did not start this time
 * leaves its last report). Unknown (no rank there, no start known): taken as the launch's.
 */
export function tripOfLaunch(trip: Pick<Trip, "atMs">, seen: Pick<SeenDeployment, "ranks"> | undefined, node: string): boolean {
  const starts = (seen?.ranks ?? []).filter((r) => r.node === node && r.started_at !== undefined).map((r) => Date.parse(r.started_at as string)).filter((t) => Number.isFinite(t));
  return starts.length === 0 || trip.atMs >= Math.min(...starts) - LAUNCH_SLACK_MS;
}

/** The record of a trip, before the other nodes were dealt with. */
export function tripRecord(cluster: string, deployment: string, boot: string, node: string, trip: Trip, readAt: number): NodeGuardTripRecord {
  return {
    cluster,
    deployment,
    boot,
    node,
    at: new Date(trip.atMs).toISOString(),
    available_kib: trip.availableKiB,
    floor_kib: trip.floorKiB,
    killed: trip.killed.length,
    stopped: [],
    unreached: [],
    message: nodeGuardTripMessage(node, deployment, trip.atMs, trip.availableKiB, trip.floorKiB),
    read_at: new Date(readAt).toISOString(),
  };
}

/** The supervisor's failure for a trip: the group is killed, not one rank dead by itself. */
export const tripFailure = (r: Pick<NodeGuardTripRecord, "node" | "message">): Failure => ({ kind: NODE_GUARD_REASON, node: r.node, message: r.message });

/** The nodes whose part of the deployment is to be killed after a trip on `tripped`: where its ranks ran (every other node when none is known). */
export function otherNodes(seen: Pick<SeenDeployment, "ranks"> | undefined, all: readonly string[], tripped: string): string[] {
  const ran = new Set((seen?.ranks ?? []).map((r) => r.node));
  return all.filter((n) => n !== tripped && (ran.size === 0 || ran.has(n)));
}

/** A rank that does not run any more, as a key that changes with each launch of its container. */
const endedKey = (d: SeenDeployment, r: SeenDeployment["ranks"][number]): string => `${d.cluster}/${d.deployment}/${r.node}/${r.container}@${r.started_at ?? "?"}`;

/**
 * The newest heartbeat the daemon read of any guard on each node (cluster/node): the node's last
 * memory sample when it is newer than the daemon's own (src/daemon/outages.ts).
 */
export class GuardBeats {
  private readonly beats = new Map<string, NodeGuardHeartbeat>();

  note(cluster: string, node: string, beat: NodeGuardHeartbeat): void {
    const k = `${cluster}/${node}`;
    if ((this.beats.get(k)?.atMs ?? -Infinity) < beat.atMs) this.beats.set(k, beat);
  }

  of(cluster: string, node: string): NodeGuardHeartbeat | undefined {
    return this.beats.get(`${cluster}/${node}`);
  }
}

/** How often a node running launcher's ranks has its guards' heartbeats read (one short command on the session held). */
export const BEAT_READ_MS = 10_000;

/** What runs on each node of the snapshot (cluster/node -> its deployments), running ranks only. */
export function runningByNode(deployments: readonly SeenDeployment[]): Map<string, { cluster: string; node: string; deployments: string[] }> {
  const by = new Map<string, { cluster: string; node: string; deployments: string[] }>();
  for (const d of deployments) {
    for (const r of d.ranks) {
      if (r.state !== "running") continue;
      const k = `${d.cluster}/${r.node}`;
      const on = by.get(k) ?? by.set(k, { cluster: d.cluster, node: r.node, deployments: [] }).get(k);
      if (on !== undefined && !on.deployments.includes(d.deployment)) on.deployments.push(d.deployment);
    }
  }
  return by;
}

export interface NodeGuardReaderDeps {
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  readonly store: Pick<StateStore, "saveNodeGuardTrip" | "saveNodeGuardKills">;
  readonly log: (line: string) => void;
  readonly now: () => number;
  /** A trip read (once per trip): the supervisor's failure. */
  readonly onTrip: (cluster: string, deployment: string, failure: Failure) => void;
  /** Where the heartbeats read are kept; none: they are not read. */
  readonly beats?: GuardBeats;
}

export class NodeGuardReader {
  /** Each deployment as the last snapshot showed it. */
  private seen = new Map<string, SeenDeployment>();
  /** Ended ranks whose node's report was read already. */
  private readonly looked = new Set<string>();
  /** Reads under way, one per cluster/deployment/node. */
  private readonly reading = new Map<string, Promise<NodeGuardTripRecord | undefined>>();
  /** Trips dealt with by this daemon (cluster/deployment/node/at). */
  private readonly handled = new Map<string, NodeGuardTripRecord>();
  /** When each node's heartbeats were last asked for (cluster/node). */
  private readonly beatAsked = new Map<string, number>();
  private stopped = false;

  constructor(private readonly deps: NodeGuardReaderDeps) {}

  /** A discovery snapshot: each rank seen ended for the first time gets its node's report read. */
  observe(deployments: readonly SeenDeployment[]): void {
    if (this.stopped) return;
    this.seen = new Map(deployments.map((d) => [`${d.cluster}/${d.deployment}`, d]));
    const now = new Set<string>();
    for (const d of deployments) {
      for (const r of d.ranks) {
        if (r.state !== "exited" && r.state !== "dead") continue;
        const k = endedKey(d, r);
        now.add(k);
        if (this.looked.has(k)) continue;
        this.looked.add(k);
        void this.read(d.cluster, d.deployment, r.node);
      }
    }
    for (const k of this.looked) if (!now.has(k)) this.looked.delete(k);
    this.readBeats(deployments);
  }

  /** Each node that runs launcher's ranks: its guards' heartbeats, at most every BEAT_READ_MS. */
  private readBeats(deployments: readonly SeenDeployment[]): void {
    const beats = this.deps.beats;
    if (beats === undefined) return;
    const at = this.deps.now();
    for (const [k, on] of runningByNode(deployments)) {
      if (at - (this.beatAsked.get(k) ?? -Infinity) < BEAT_READ_MS) continue;
      this.beatAsked.set(k, at);
      void (async () => {
        const docker = (await this.deps.session(on.cluster))?.docker.get(on.node);
        if (docker === undefined) return;
        for (const g of (await lookNodeGuards(docker.transport, on.deployments)).values()) if (g.heartbeat !== undefined) beats.note(on.cluster, on.node, g.heartbeat);
      })().catch(() => undefined);
    }
  }

  /** Docker said a rank died: its node's report is read now. */
  died(cluster: string, death: RankDeath): void {
    if (this.stopped) return;
    const seen = this.seen.get(`${cluster}/${death.deployment}`);
    // A container that only copied the deployment's labels: not its launch (src/supervise/supervisor.ts died).
    if (seen?.boot !== undefined && death.boot !== seen.boot) return;
    void this.read(cluster, death.deployment, death.node);
  }

  /** The trips of the deployment's launch on `nodes`, read now (in parallel, each bounded): a restart's cause. */
  async trips(cluster: string, deployment: string, nodes: readonly string[]): Promise<NodeGuardTripRecord[]> {
    const read = await Promise.all([...new Set(nodes)].map((n) => this.read(cluster, deployment, n)));
    return read.filter((r): r is NodeGuardTripRecord => r !== undefined);
  }

  stop(): void {
    this.stopped = true;
  }

  private read(cluster: string, deployment: string, node: string): Promise<NodeGuardTripRecord | undefined> {
    const k = `${cluster}/${deployment}/${node}`;
    const under = this.reading.get(k);
    if (under !== undefined) return under;
    const p = this.readOnce(cluster, deployment, node)
      .catch((e: unknown) => {
        this.deps.log(`node guard: ${deployment}: the report of ${node} could not be read (${(e as Error).message})`);
        return undefined;
      })
      .finally(() => this.reading.delete(k));
    this.reading.set(k, p);
    return p;
  }

  private async readOnce(cluster: string, deployment: string, node: string): Promise<NodeGuardTripRecord | undefined> {
    const session = await this.deps.session(cluster);
    const docker = session?.docker.get(node);
    if (session === undefined || docker === undefined) return undefined;
    const trip = await nodeGuardTrip(docker.transport, deployment);
    const seen = this.seen.get(`${cluster}/${deployment}`);
    if (trip === undefined || !tripOfLaunch(trip, seen, node)) return undefined;
    const record = tripRecord(cluster, deployment, seen?.boot ?? "", node, trip, this.deps.now());
    const k = `${cluster}/${deployment}/${node}/${record.at}`;
    const known = this.handled.get(k);
    if (known !== undefined) return known;
    this.handled.set(k, record);
    // Recorded by an earlier daemon already: the other nodes were dealt with then.
    if (!this.deps.store.saveNodeGuardTrip(record)) return record;
    this.deps.log(`node guard: ${record.message}`);
    const done = await this.killElsewhere(session, record, seen);
    this.handled.set(k, done);
    this.deps.store.saveNodeGuardKills(done);
    this.deps.log(`node guard: ${nodeGuardTripWords(done)}`);
    if (!this.stopped) this.deps.onTrip(cluster, deployment, tripFailure(done));
    return done;
  }

  /**
   * What runs of the deployment's launch on its other nodes is killed (docker kill, no grace: its
   * group is lost anyway, and a rank left running holds the memory the tripped node lacked). A
   * node that cannot be listed or killed is said unreached, never stopped.
   */
  private async killElsewhere(session: ClusterSession, record: NodeGuardTripRecord, seen: SeenDeployment | undefined): Promise<NodeGuardTripRecord> {
    const others = otherNodes(seen, [...session.docker.keys()], record.node);
    if (others.length === 0) return record;
    const listing = await listNodes(session, new Set(others));
    const outcomes = await Promise.all(
      listing.map(async (l): Promise<{ node: string; ok: boolean }> => {
        if (!l.reachable) return { node: l.node, ok: false };
        // Its launch's only: a newer launch of the name (a restart begun meanwhile) is not the one killed.
        const names = l.containers.filter((c) => c.c.running && c.labels.deployment === record.deployment && (c.labels.boot ?? "") === record.boot).map((c) => c.c.name);
        try {
          if (names.length > 0) await l.docker.kill(names);
          return { node: l.node, ok: true };
        } catch {
          return { node: l.node, ok: false };
        }
      }),
    );
    return { ...record, stopped: outcomes.filter((o) => o.ok).map((o) => o.node).sort(), unreached: outcomes.filter((o) => !o.ok).map((o) => o.node).sort() };
  }
}
