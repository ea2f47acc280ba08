import { NODE_GUARD_REASON, nodeGuardTripMessage, nodeGuardTripWords, type NodeGuardTripRecord } from "../contract/node-guard-trip.js";
import type { DeploymentStatus } from "../contract/deployment.js";
import { lookNodeGuards, nodeGuardTrip } from "../memory/node-guard-shell.js";
import type { NodeGuardEvent, NodeGuardHeartbeat } from "../memory/node-guard.js";
import { listNodes, type Labelled } from "../nodes/labels.js";
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
 * Start times before this are none: Docker gives a container that never started
 * 0001-01-01T00:00:00Z (moby api/types ContainerState.StartedAt, Go's zero time.Time), which is a
 * valid date to Date.parse.
 */
const EARLIEST_START_MS = Date.UTC(2000, 0, 1);

/** The times the given ranks on `node` started, those known only. */
export function startsOn(ranks: readonly { readonly node: string; readonly started_at?: string }[], node: string): number[] {
  return ranks.filter((r) => r.node === node && r.started_at !== undefined).map((r) => Date.parse(r.started_at as string)).filter((t) => Number.isFinite(t) && t >= EARLIEST_START_MS);
}

/**
 * Whether a trip read on a node is of the launch whose ranks there started at `starts`: a trip
 * stamped before every one of them is an earlier launch's (a guard that did not start this time
 * leaves its last report). None known: not taken as the launch's (nothing says it is).
 */
export function tripOfLaunch(trip: Pick<Trip, "atMs">, starts: readonly number[]): boolean {
  return starts.length > 0 && trip.atMs >= Math.min(...starts) - LAUNCH_SLACK_MS;
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

/** What became of another node's part after a trip: killed, nothing of the launch known there, or not reached. */
type KillOutcome = "stopped" | "none" | "unreached";

/** The ids of the running containers of the trip's launch among a node's listed ones: a newer launch of the name (a restart begun meanwhile) is not the one killed. */
export function launchIds(containers: readonly Pick<Labelled, "c" | "labels">[], record: Pick<NodeGuardTripRecord, "deployment" | "boot">): string[] {
  return containers.filter((c) => c.c.running && c.labels.deployment === record.deployment && (c.labels.boot ?? "") === record.boot).map((c) => c.c.id);
}

/** When the containers of `boot` of the deployment on `node` started, as the node lists them (none when it cannot be listed). */
async function launchStartsOn(session: ClusterSession, node: string, deployment: string, boot: string): Promise<number[]> {
  const [l] = await listNodes(session, new Set([node]));
  if (l === undefined || !l.reachable) return [];
  return startsOn(l.containers.filter((c) => c.labels.deployment === deployment && c.labels.boot === boot).map((c) => ({ node, started_at: c.c.startedAt })), node);
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
        for (const g of (await lookNodeGuards(docker.transport, on.deployments))?.values() ?? []) if (g.heartbeat !== undefined) beats.note(on.cluster, on.node, g.heartbeat);
      })().catch(() => undefined);
    }
  }

  /** Docker said a rank died: its node's report is read now. */
  died(cluster: string, death: RankDeath): void {
    if (this.stopped) return;
    const seen = this.seen.get(`${cluster}/${death.deployment}`);
    // A container that only copied the deployment's labels: not its launch (src/supervise/supervisor.ts died).
    if (seen?.boot !== undefined && death.boot !== seen.boot) return;
    // Before the first snapshot, the launch is the dead container's.
    void this.read(cluster, death.deployment, death.node, seen?.boot ?? death.boot);
  }

  /** The trips of the deployment's launch on `nodes`, read now (in parallel, each bounded): a restart's cause. */
  async trips(cluster: string, deployment: string, nodes: readonly string[]): Promise<NodeGuardTripRecord[]> {
    const read = await Promise.all([...new Set(nodes)].map((n) => this.read(cluster, deployment, n)));
    return read.filter((r): r is NodeGuardTripRecord => r !== undefined);
  }

  stop(): void {
    this.stopped = true;
  }

  private read(cluster: string, deployment: string, node: string, launch?: string): Promise<NodeGuardTripRecord | undefined> {
    const k = `${cluster}/${deployment}/${node}`;
    const under = this.reading.get(k);
    if (under !== undefined) return under;
    const p = this.readOnce(cluster, deployment, node, launch)
      .catch((e: unknown) => {
        this.deps.log(`node guard: ${deployment}: the report of ${node} could not be read (${(e as Error).message})`);
        return undefined;
      })
      .finally(() => this.reading.delete(k));
    this.reading.set(k, p);
    return p;
  }

  private async readOnce(cluster: string, deployment: string, node: string, launch: string | undefined): Promise<NodeGuardTripRecord | undefined> {
    const session = await this.deps.session(cluster);
    const docker = session?.docker.get(node);
    if (session === undefined || docker === undefined) return undefined;
    const trip = await nodeGuardTrip(docker.transport, deployment);
    if (trip === undefined) return undefined;
    const seen = this.seen.get(`${cluster}/${deployment}`);
    const boot = seen?.boot ?? launch ?? "";
    const known = startsOn(seen?.ranks ?? [], node);
    // No snapshot showed the launch there yet (a death heard first): its containers there are asked.
    const starts = known.length > 0 || boot === "" ? known : await launchStartsOn(session, node, deployment, boot);
    if (!tripOfLaunch(trip, starts)) return undefined;
    const record = tripRecord(cluster, deployment, boot, node, trip, this.deps.now());
    const k = `${cluster}/${deployment}/${node}/${record.at}`;
    const handled = this.handled.get(k);
    if (handled !== undefined) return handled;
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
   * group is lost anyway, and a rank left running holds the memory the tripped node lacked), by
   * container id: the name is the same for every launch, the id is the one listed. A node that
   * cannot be listed or killed is said unreached, never stopped; one is said stopped only when
   * containers of the launch (its id known) were listed there and killed.
   */
  private async killElsewhere(session: ClusterSession, record: NodeGuardTripRecord, seen: SeenDeployment | undefined): Promise<NodeGuardTripRecord> {
    const others = otherNodes(seen, [...session.docker.keys()], record.node);
    if (others.length === 0) return record;
    const listing = await listNodes(session, new Set(others));
    const outcomes = await Promise.all(
      listing.map(async (l): Promise<{ node: string; outcome: KillOutcome }> => {
        if (!l.reachable) return { node: l.node, outcome: "unreached" };
        const ids = launchIds(l.containers, record);
        try {
          if (ids.length > 0) await l.docker.kill(ids);
          return { node: l.node, outcome: ids.length > 0 && record.boot !== "" ? "stopped" : "none" };
        } catch {
          return { node: l.node, outcome: "unreached" };
        }
      }),
    );
    const of = (outcome: KillOutcome): string[] => outcomes.filter((o) => o.outcome === outcome).map((o) => o.node).sort();
    return { ...record, stopped: of("stopped"), unreached: of("unreached") };
  }
}
