import { decodeSavedPlan } from "../plan/saved.js";
import type { StateStore } from "../store/store.js";
import type { DeploymentStatus, StatusPhase } from "../contract/deployment.js";
import { fitFromKept } from "../memory/fit.js";
import { startGuard, type Guard } from "../memory/guard.js";
import { nodeFloorGiB, type MemorySample, type Trip } from "../memory/memory-watch.js";
import { dockerOf, type ClusterSession } from "../nodes/session.js";

/**
 * The memory guard after ready, run by the daemon (`launcher serve`) for every deployment it sees
 * serving, until it is gone (`down`): `up`'s own guard (src/boot/up.ts) ends with the boot's
 * watch, and a serving engine can still run a node out of memory (a long context filling the KV
 * cache is budgeted; /dev/shm filling, a second model, page cache the GPU does not get back are
 * not). The same guard as the boot's: one sampler stream per node, the kill on every node at once.
 */

/** The phase a trip after ready happened in: the deployment served. */
export const SERVING: StatusPhase = "serving";

/** How often a node's sample is written for `status` (a sample comes 5 times a second). */
export const WATCHED_WRITE_MS = 2000;

/** A sample older than this in the store is no longer watched (the daemon stopped, or the guard): `status` shows none. */
export const WATCHED_FRESH_MS = 5 * WATCHED_WRITE_MS;

/**
 * After a node's sampler stream ended (SSH dropped, sshd restarted) or the guard could not start,
 * how long until the next discovery snapshot starts it again: the n-th try in a row waits the n-th
 * figure, the last one from then on. Bounded, so a node that stays away costs one SSH attempt per
 * 10 s, and one that comes back is watched again within 10 s.
 */
export const WATCH_RETRY_MS: readonly number[] = [1000, 2000, 5000, 10_000];

const retryDelay = (tries: number): number => WATCH_RETRY_MS[Math.min(tries, WATCH_RETRY_MS.length - 1)] ?? 10_000;

/** A deployment as the daemon's discovery reports it (src/supervise/supervisor.ts Seen). */
export type Watched = DeploymentStatus & { readonly cluster: string };

export interface ReadyGuardDeps {
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  readonly store: Pick<StateStore, "saveWatchedMemory" | "saveMemoryTrip" | "savedPlan" | "memory" | "weights">;
  readonly log: (line: string) => void;
  readonly now: () => number;
  /** The containers are killed on every node already and the trip recorded: the supervisor's turn. */
  readonly onTrip: (cluster: string, deployment: string, trip: Trip) => void;
  /** Seconds between samples (tests). */
  readonly interval?: number;
}

interface Running {
  /** Which containers it watches: a group recreated (restart, `up` again) is another group. */
  readonly group: string;
  readonly stop: AbortController;
  guard?: Guard;
  /** Starts of this guard in a row that lost a node: the backoff's step (back to 0 once every node is watched again). */
  tries: number;
  /** Set once a node was lost: from then on the next snapshot starts the guard again. */
  retryAt?: number;
  /** The nodes said to be not watched (and why), until a sample of theirs says they are watched again. */
  readonly unwatched: Map<string, string>;
}

const keyOf = (d: { readonly cluster: string; readonly deployment: string }): string => `${d.cluster}/${d.deployment}`;

/** The group a status shows: its containers and when each started (a recreated one keeps its name). */
const groupOf = (d: DeploymentStatus): string => d.ranks.map((r) => `${r.node}/${r.container}@${r.started_at ?? "?"}`).join(" ");

/** Serving with every rank running: the group is whole, the boot's guard is done with it. */
const whole = (d: DeploymentStatus): boolean => d.status === "serving" && d.ranks.length > 0 && d.ranks.every((r) => r.state === "running");

export class ReadyGuards {
  private readonly running = new Map<string, Running>();
  private readonly written = new Map<string, number>();
  private stopped = false;

  constructor(private readonly deps: ReadyGuardDeps) {}

  /** One discovery snapshot: a group seen whole gets a guard; a deployment no longer seen loses its own. */
  observe(deployments: readonly Watched[]): void {
    if (this.stopped) return;
    const present = new Set<string>();
    for (const d of deployments) {
      const k = keyOf(d);
      present.add(k);
      if (!whole(d)) continue;
      const group = groupOf(d);
      const current = this.running.get(k);
      if (current?.group === group) {
        // A node was lost while the group still serves: its guard starts again once the backoff is over.
        if (current.retryAt === undefined || this.deps.now() < current.retryAt || current.guard?.tripped() !== undefined) continue;
        current.stop.abort();
        this.start(k, d, group, { tries: current.tries + 1, unwatched: current.unwatched });
        continue;
      }
      current?.stop.abort();
      this.start(k, d, group);
    }
    for (const k of [...this.running.keys()]) if (!present.has(k)) this.end(k);
  }

  /** Its guard crossed a floor and is killing it; the trip's report (onTrip) follows. */
  tripping(cluster: string, deployment: string): boolean {
    return this.running.get(keyOf({ cluster, deployment }))?.guard?.tripped() !== undefined;
  }

  /** The deployments watched now (cluster/deployment). */
  watching(): string[] {
    return [...this.running.keys()];
  }

  stop(): void {
    this.stopped = true;
    for (const k of [...this.running.keys()]) this.end(k);
  }

  private end(k: string): void {
    this.running.get(k)?.stop.abort();
    this.running.delete(k);
  }

  private start(k: string, d: Watched, group: string, prior?: Pick<Running, "tries" | "unwatched">): void {
    const stop = new AbortController();
    const running: Running = { group, stop, tries: prior?.tries ?? 0, unwatched: prior?.unwatched ?? new Map() };
    this.running.set(k, running);
    void this.watch(d, running).then((guard) => {
      if (guard !== undefined && this.running.get(k) === running) running.guard = guard;
    }).catch((e: unknown) => {
      this.lost(k, running, d, [...new Set(d.ranks.map((r) => r.node))], (e as Error).message);
    });
  }

  /**
   * Nodes of a serving group whose sampler ended or never started: said once per node (not on
   * every failed try), and the guard is started again after the backoff (observe).
   */
  private lost(k: string, running: Running, d: Watched, nodes: readonly string[], why: string): void {
    if (this.running.get(k) !== running || running.stop.signal.aborted) return;
    running.retryAt ??= this.deps.now() + retryDelay(running.tries);
    for (const node of nodes) {
      if (!running.unwatched.has(node)) this.deps.log(`memory guard: ${d.deployment}: ${node} is not watched (${why}); trying again in ${Math.ceil(retryDelay(running.tries) / 1000)} s`);
      running.unwatched.set(node, why);
    }
  }

  /** A node's sample arrived: if it was said to be not watched, it is watched again. */
  private back(running: Running, d: Watched, node: string): void {
    if (!running.unwatched.delete(node)) return;
    this.deps.log(`memory guard: ${d.deployment}: ${node} is watched again`);
    if (running.unwatched.size === 0) running.tries = 0;
  }

  private async watch(d: Watched, running: Running): Promise<Guard | undefined> {
    const signal = running.stop.signal;
    const k = keyOf(d);
    const session = await this.deps.session(d.cluster);
    if (session === undefined || signal.aborted) return undefined;
    const containers = new Map<string, string[]>();
    for (const r of d.ranks) containers.set(r.node, [...(containers.get(r.node) ?? []), r.container]);
    return startGuard({
      nodes: [...containers].map(([node, names]) => ({
        node,
        docker: dockerOf(session, node),
        floorGiB: nodeFloorGiB(session.cluster, node),
        containers: names,
      })),
      // Read at the trip: `up` keeps the plan once it saw the deployment ready, which may be after this poll.
      fit: (node) => this.keptFit(d, [...containers.keys()]).get(node) ?? [],
      phaseOf: () => SERVING,
      signal,
      onSample: (node, sample) => {
        this.back(running, d, node);
        this.sampled(d, node, sample);
      },
      onLost: (node, why) => this.lost(k, running, d, [node], why),
      onTrip: (trip) => this.tripped(d, signal, trip),
      ...(this.deps.interval === undefined ? {} : { interval: this.deps.interval }),
    });
  }

  /** The fit check's lines per node, from the kept plan and what up's probe and preflight last read. */
  private keptFit(d: Watched, nodes: readonly string[]): Map<string, readonly string[]> {
    const saved = this.deps.store.savedPlan(d.cluster, d.deployment);
    const plan = saved === undefined ? undefined : decodeSavedPlan(saved);
    if (plan === undefined || !plan.ok) return new Map();
    const fit = fitFromKept(plan.plan.recipe, nodes, this.deps.store.memory(d.cluster), this.deps.store.weights(d.cluster, plan.plan.recipe.model));
    return new Map(fit.nodes.map((n) => [n.node, n.lines]));
  }

  private sampled(d: Watched, node: string, sample: MemorySample): void {
    const at = this.deps.now();
    const k = `${d.cluster}/${node}`;
    if (at - (this.written.get(k) ?? -Infinity) < WATCHED_WRITE_MS) return;
    this.written.set(k, at);
    this.deps.store.saveWatchedMemory(d.cluster, node, d.deployment, sample, new Date(at).toISOString());
  }

  private tripped(d: Watched, signal: AbortSignal, trip: Trip): void {
    // The group is killed: nothing of it is left to watch. A group booted again is watched anew.
    const k = keyOf(d);
    if (this.running.get(k)?.stop.signal === signal) this.end(k);
    this.deps.log(`memory guard: ${d.deployment}: ${trip.message}`);
    for (const line of [...trip.detail, `hint: ${trip.hint}`]) this.deps.log(`  | ${line}`);
    this.deps.store.saveMemoryTrip({ cluster: d.cluster, deployment: d.deployment, node: trip.node, phase: trip.phase, culprit: trip.culprit, message: trip.message, detail: [...trip.detail, `hint: ${trip.hint}`], at: new Date(this.deps.now()).toISOString() });
    this.deps.onTrip(d.cluster, d.deployment, trip);
  }
}
