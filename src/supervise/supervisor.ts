import { setTimeout as delay } from "node:timers/promises";
import { readBoot, timeMs, type BootState } from "../engine/boot-log.js";
import { adapterOf } from "../engine/registry.js";
import { decodeSavedPlan } from "../plan/saved.js";
import type { Plan } from "../plan/plan.js";
import type { StateStore } from "../store/store.js";
import { encodeRestartPolicy, LABELS, type DeploymentStatus, type RestartPolicy } from "../contract/deployment.js";
import { checkInterrupted, Detached } from "../config/abort.js";
import { culprit, ownCause } from "../boot/blame.js";
import { stampLabel } from "../boot/boot.js";
import type { BootRegistry } from "./boots.js";
import type { RankDeath } from "./deaths.js";
import { SETTLE_MS } from "../boot/up.js";
import type { UpEvent } from "../boot/up-events.js";
import type { UpOutcome } from "../boot/up-events.js";
import { formatRemoval, removeListed, stopDeployments, unreachableOf } from "../nodes/down.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import { WEDGED_REASON } from "../contract/generation.js";
import { NODE_GUARD_REASON } from "../contract/node-guard-trip.js";
import { tripFailure, type NodeGuardReader } from "./node-guard-reader.js";
import { listNodes, type Labelled } from "../nodes/labels.js";
import { deploymentKey, holdOrBusy, laneKey } from "../claims/locks.js";
import type { ClusterSession } from "../nodes/session.js";
import { answersGaveUp, answersRestarting, INITIAL, isRestarting, policyOf, rankExited, retryAfterSeconds, supervise, type Failure, type SuperviseAction, type SuperviseEvent, type Supervised, type SuperviseTiming } from "./supervise.js";

/** A deployment as the daemon's discovery reports it: its status and the cluster it runs on. */
export type Seen = DeploymentStatus & { readonly cluster: string };

/** What the supervisor needs of the world: each piece small enough to be faked in a test. */
export interface SupervisorDeps {
  readonly store: StateStore;
  /** The cluster's session (opened once, kept): undefined for a cluster this daemon does not watch. */
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  /**
   * Boots a plan and waits until it serves, rolling back on failure (throws then), saying what it
   * does through `emit`. The daemon's one call into the `up` use case (src/daemon/reboot.ts), so
   * that a boot is the same wherever it is started from.
   */
  /** `signal`: `down NAME` (rolls back); `detach`: the daemon stops and leaves the boot to the next (src/daemon/adopt.ts). */
  /** `recreating`: the old group's removal, under way (src/boot/up.ts UpOptions.recreating). */
  readonly boot: (plan: Plan, session: ClusterSession, signal: AbortSignal, emit: (e: UpEvent) => void, detach: AbortSignal, recreating: Promise<void>) => Promise<UpOutcome>;
  /** Where restarts run: the daemon's boot registry, so that `attach NAME` follows one and `down NAME` cancels it. */
  readonly boots: Pick<BootRegistry, "start">;
  /** Look at the clusters again now: a failure seen once is confirmed (or not) by the next poll. */
  readonly refresh: () => void;
  readonly log: (line: string) => void;
  readonly now: () => number;
  readonly timing: SuperviseTiming;
  /** The memory guard after ready (src/supervise/ready-guard.ts): fed the same snapshots, stopped with the supervisor. */
  readonly memory?: { observe(deployments: readonly Seen[]): void; tripping(cluster: string, deployment: string): boolean; stop(): void };
  /** The nodes' own guards' reports (./node-guard-reader.ts): a restart reads them for its cause. */
  /** Fed every snapshot and every death (of any deployment, supervised or not), stopped with the supervisor. */
  readonly nodeGuard?: Pick<NodeGuardReader, "trips" | "observe" | "died" | "stop">;
}

/** How one restart went, filled in as it runs. */
interface Attempt {
  ok: boolean;
  /** Stopped by `launcher down` (before or while it booted): the deployment is forgotten. */
  cancelled: boolean;
  error?: string;
  /** Its row in the store's restarts, once the cause was read. */
  record?: number;
  /** The daemon stopped during its boot: the boot goes on, the next daemon adopts it and ends the row. */
  left?: boolean;
}

interface Entry {
  state: Supervised;
  /** The last policy and status seen: a group down for a restart shows neither. */
  policy: RestartPolicy;
  seen: Seen;
  /** What the last restart was for: the gateway says so until a poll shows the group serving. */
  failure?: Failure;
  /** When the labels of the last poll that was taken into account were read. */
  polledAt?: number;
  timer?: NodeJS.Timeout;
}

const key = (cluster: string, deployment: string): string => `${cluster}/${deployment}`;

/** How an adopted restart's boot ended: it serves, or it failed (rolled back), was cancelled (`down`), or was left to the next daemon. */
export interface AdoptedEnd {
  readonly ok: boolean;
  readonly cancelled: boolean;
  readonly left: boolean;
  readonly error?: string;
}

/**
 * A deployment as the supervisor knows it before any poll showed it: from the plan its boot runs
 * (what the gateway's answers and the log lines name), booting, with no rank read yet.
 */
const seenOf = (plan: Plan, restarts: number): Seen => ({
  cluster: plan.cluster,
  deployment: plan.deployment,
  recipe: plan.recipe.id,
  recipe_hash: plan.recipe_hash,
  engine: plan.recipe.engine,
  ...(plan.lane === undefined ? {} : { lane: plan.lane }),
  ...(plan.restart === undefined ? {} : { restart: encodeRestartPolicy(plan.restart) }),
  restarts,
  served_model: plan.served_model,
  endpoint: plan.endpoint,
  status: "booting",
  phase: "-",
  missing: [],
  unreachable: [],
  ranks: [],
});

/** How much of a dead rank's log is read for its root cause. */
const CAUSE_TAIL_LINES = 2000;

/**
 * The daemon's supervisor: fed every discovery snapshot, it recreates (with src/supervise/supervise.ts
 * deciding when) the groups whose labels ask for it. Labels and the store are all it starts from,
 * so a daemon started again after SIGKILL adopts what serves, with no state of its own.
 */
export class Supervisor {
  private readonly entries = new Map<string, Entry>();
  /**
   * When each deployment was forgotten, until a snapshot read after that arrives. A poll whose
   * labels were read before the drop (a cancelled restart's group, still there then) must not
   * adopt it again: its containers were removed since.
   */
  private readonly droppedAt = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  /** Bumped whenever what restarting() returns may have changed: the gateway rebuilds its routes. */
  version = 0;

  constructor(private readonly deps: SupervisorDeps) {}

  /** One discovery snapshot: `at` is when its labels were read. */
  observe(deployments: readonly Seen[], at: number): void {
    if (this.stopping.signal.aborted) return;
    this.deps.memory?.observe(deployments);
    this.deps.nodeGuard?.observe(deployments);
    const now = new Map(deployments.map((d) => [key(d.cluster, d.deployment), d]));
    for (const [k, t] of this.droppedAt) if (at > t) this.droppedAt.delete(k);
    for (const d of deployments) {
      const policy = policyOf(d);
      const k = key(d.cluster, d.deployment);
      const entry = this.entries.get(k);
      // Read no later than it was forgotten: what this snapshot shows of it is gone or going.
      if (entry === undefined && this.droppedAt.has(k)) continue;
      if (policy === undefined) {
        // Not (or no longer) supervised: a later `up` without --restart replaced it.
        if (entry !== undefined && !isRestarting(entry.state)) this.drop(k);
        continue;
      }
      // Adopted (a daemon started again): its labels say how many restarts it had.
      if (entry === undefined) this.entries.set(k, { state: { ...INITIAL, attempts: d.restarts ?? 0 }, policy, seen: d });
      else {
        entry.policy = policy;
        entry.seen = d;
      }
    }
    for (const [k, entry] of this.entries) {
      const d = now.get(k);
      entry.polledAt = at;
      // Killed by its memory guard, whose report (the failure) is on its way: not a rank's death.
      if (this.deps.memory?.tripping(entry.seen.cluster, entry.seen.deployment) === true) continue;
      this.step(k, entry, { kind: "observed", at, status: d, recordedReady: this.deps.store.deploymentServed(entry.seen.cluster, entry.seen.deployment) });
    }
  }

  /** Docker said a rank of a deployment on `cluster` died: a first sighting, which the next poll confirms (asked for now). */
  died(cluster: string, death: RankDeath): void {
    if (this.stopping.signal.aborted) return;
    this.deps.nodeGuard?.died(cluster, death);
    const k = key(cluster, death.deployment);
    const entry = this.entries.get(k);
    if (entry === undefined) return;
    // A container that only copied the deployment's labels: its death is not the deployment's.
    // The polls stay the truth for the deployment's own ranks (a death of a launch newer than the
    // last poll's, a restart's, is seen there).
    if (entry.seen.boot !== undefined && death.boot !== entry.seen.boot) {
      this.deps.log(`supervise: ${death.deployment}: ignoring docker on ${death.node}: a container of launch ${JSON.stringify((death.boot ?? "(none)").slice(0, 64))} died, not of ${entry.seen.boot}`);
      return;
    }
    // Said as docker said it, whatever the supervisor makes of it: where a restart's first sighting came from.
    this.deps.log(`supervise: ${death.deployment}: docker on ${death.node} says ${death.failure.message}`);
    if (this.deps.memory?.tripping(cluster, death.deployment) === true) return;
    this.step(k, entry, { kind: "died", at: this.deps.now(), failure: death.failure });
  }

  /** The memory guard killed a serving group on every node: a failure, as a rank's death is (restarted under --restart on-failure). */
  memoryTripped(cluster: string, deployment: string, trip: { readonly node: string; readonly message: string }): void {
    const k = key(cluster, deployment);
    const entry = this.entries.get(k);
    if (this.stopping.signal.aborted || entry === undefined) return;
    this.step(k, entry, { kind: "died", at: this.deps.now(), failure: { kind: "memory-guard", node: trip.node, message: trip.message } });
  }

  /**
   * A node's own guard killed its containers there (./node-guard-reader.ts read the report, and
   * killed the rest): a failure as a death is; when its death was heard first (the group is down
   * for a restart already), the trip becomes what the restart says.
   */
  nodeGuardTripped(cluster: string, deployment: string, failure: Failure): void {
    const k = key(cluster, deployment);
    const entry = this.entries.get(k);
    if (this.stopping.signal.aborted || entry === undefined) return;
    // The daemon's own guard's trip (its whole report) stays what a restart says when both crossed.
    if (isRestarting(entry.state)) {
      if (entry.failure?.kind !== "memory-guard") this.blamed(entry, failure);
    } else this.step(k, entry, { kind: "died", at: this.deps.now(), failure });
  }

  /**
   * Its /health answers but two probes in a row got no token, with no other evidence of generation
   * meanwhile (./generation-watch.ts hands only a confirmed wedge on): a failure, restarted under
   * --restart on-failure as a death is, with the reason `wedged`. Its containers all run, so the
   * restart's takeDown blames no rank by its end.
   */
  wedged(cluster: string, deployment: string, message: string): void {
    const k = key(cluster, deployment);
    const entry = this.entries.get(k);
    if (this.stopping.signal.aborted || entry === undefined) return;
    this.step(k, entry, { kind: "died", at: this.deps.now(), failure: { kind: WEDGED_REASON, message } });
  }

  /**
   * A restart's boot that a daemon which died had issued, adopted by this daemon (src/daemon/adopt.ts):
   * supervised as a restart under way from now on, so that its end is handed to the supervision
   * the same way whatever the polls saw meanwhile (none may see it: a boot that fails fast is
   * rolled back before the first poll): ready, or failed and tried again after the backoff (at
   * most N in all), or cancelled by `launcher down` and forgotten. `plan`: the one it boots.
   */
  adoptedRestart(plan: Plan, attempt: number, failure: Failure, ended: Promise<AdoptedEnd>): void {
    if (this.stopping.signal.aborted || plan.restart === undefined) return;
    const k = key(plan.cluster, plan.deployment);
    let entry = this.entries.get(k);
    if (entry === undefined) {
      entry = { state: INITIAL, policy: plan.restart, seen: seenOf(plan, attempt) };
      this.entries.set(k, entry);
    }
    const adopted = entry;
    adopted.failure = failure;
    this.step(k, adopted, { kind: "adopted", at: this.deps.now(), attempt, failure });
    const p = ended
      .then((end) => {
        // Left again (this daemon stops too): the next one adopts it.
        if (end.left || this.entries.get(k) !== adopted) return;
        this.step(k, adopted, { kind: "restart-ended", at: this.deps.now(), ok: end.ok, cancelled: end.cancelled, ...(end.error === undefined ? {} : { error: end.error }) });
      })
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }

  /** Time passed: a backoff may be over. */
  tick(): void {
    for (const [k, entry] of this.entries) if (entry.state.phase === "backoff") this.step(k, entry, { kind: "tick", at: this.deps.now() });
  }

  /** The deployments being recreated (or just given up), as the gateway answers for them. */
  restarting(): { cluster: string; deployment: string; served_model: string; lane?: string; attempt: number; max?: number; retryAfter: number; reason: string; gaveUp?: true }[] {
    const at = this.deps.now();
    return [...this.entries.values()].flatMap((e) => {
      const s = e.state;
      const gaveUp = answersGaveUp(s, e.polledAt);
      if (!gaveUp && !answersRestarting(s, e.polledAt)) return [];
      const reason = s.phase === "backoff" || s.phase === "restarting" || s.phase === "gave-up" ? s.failure.message : (e.failure?.message ?? "a failure");
      const { cluster, deployment, served_model, lane } = e.seen;
      return [
        {
          cluster,
          deployment,
          served_model,
          ...(lane === undefined ? {} : { lane }),
          attempt: s.phase === "backoff" ? s.attempts + 1 : s.attempts,
          ...(e.policy.max === undefined ? {} : { max: e.policy.max }),
          retryAfter: retryAfterSeconds(s, at, this.deps.store.lastBootSeconds(cluster, deployment)),
          reason,
          ...(gaveUp ? { gaveUp: true as const } : {}),
        },
      ];
    });
  }

  /** What the supervisor is doing, per deployment (for the daemon's /health). */
  describe(): Record<string, string> {
    return Object.fromEntries([...this.entries].map(([k, e]) => [k, `${e.state.phase}${e.state.attempts > 0 ? ` (${e.state.attempts} restart${e.state.attempts === 1 ? "" : "s"})` : ""}`]));
  }

  /** Resolves once no restart is under way. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /** Stops: restarts under way are interrupted before their new group starts, and left to the next daemon once it runs (src/daemon/adopt.ts); waited for. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.deps.memory?.stop();
    this.deps.nodeGuard?.stop();
    for (const e of this.entries.values()) clearTimeout(e.timer);
    await Promise.allSettled([...this.running]);
  }

  private drop(k: string): void {
    const e = this.entries.get(k);
    if (e !== undefined) clearTimeout(e.timer);
    this.entries.delete(k);
    this.droppedAt.set(k, this.deps.now());
    this.version++;
  }

  private step(k: string, entry: Entry, event: SuperviseEvent): void {
    const before = entry.state;
    const d = supervise(entry.state, event, entry.policy, this.deps.timing);
    if (d.state === undefined) {
      this.drop(k);
      return;
    }
    entry.state = d.state;
    if (before.phase !== d.state.phase) this.version++;
    // A failure seen once: the next poll, now, confirms it or not.
    if (d.state.phase === "ready" && d.state.failing !== undefined && (before.phase !== "ready" || before.failing === undefined)) {
      this.deps.log(`supervise: ${entry.seen.deployment}: ${d.state.failing.failure.message}; looking again`);
      this.deps.refresh();
    }
    if (d.state.phase === "backoff" && before.phase !== "backoff") {
      const wait = d.state.until - this.deps.now();
      this.deps.log(`supervise: ${entry.seen.deployment}: restarting in ${Math.max(0, Math.round(wait / 1000))} s`);
      clearTimeout(entry.timer);
      entry.timer = setTimeout(() => this.tick(), Math.max(0, wait));
      entry.timer.unref();
    }
    for (const a of d.actions) this.act(k, entry, a);
  }

  private act(k: string, entry: Entry, action: SuperviseAction): void {
    const name = entry.seen.deployment;
    if (action.kind === "forget") return;
    if (action.kind === "give-up") {
      this.deps.log(`supervise: ${name}: ${action.failure.message}; not restarting it: it was restarted ${action.attempts} time${action.attempts === 1 ? "" : "s"}, the most its --restart ${entry.seen.restart ?? ""} allows (launcher up it again, or launcher down it)`);
      return;
    }
    entry.failure = action.failure;
    const p = this.restart(k, entry, action.attempt, action.failure).finally(() => this.running.delete(p));
    this.running.add(p);
  }

  /**
   * Recreates the whole group as a boot of the daemon's registry (`attach NAME` follows it from
   * its start, `down NAME` cancels it): its root cause read, every rank removed, its plan booted
   * again through the `up` use case.
   */
  private async restart(k: string, entry: Entry, attempt: number, failure: Failure): Promise<void> {
    const { cluster, deployment, lane } = entry.seen;
    const tried: Attempt = { ok: false, cancelled: false };
    try {
      const run = this.deps.boots.start({ deployment, cluster, ...(lane === undefined ? {} : { lane }) }, (emit, signal, detach) => this.recreate(entry, attempt, failure, tried, emit, signal, detach));
      await run.ended;
    } catch (e) {
      // Refused at once: an `up` of this name or lane runs in this daemon. This try counts as failed.
      tried.error = (e as Error).message;
      this.deps.log(`supervise: ${deployment}: restart ${attempt} not started: ${tried.error}`);
    }
    if (tried.left === true) return;
    if (tried.record !== undefined) this.deps.store.endRestart(tried.record, tried.ok ? "ready" : tried.cancelled ? "cancelled" : "failed", new Date(this.deps.now()).toISOString(), tried.error);
    if (this.entries.get(k) === entry) this.step(k, entry, { kind: "restart-ended", at: this.deps.now(), ok: tried.ok, cancelled: tried.cancelled, ...(tried.error === undefined ? {} : { error: tried.error }) });
  }

  /** The restart's boot, run by the registry: `emit` says it to whoever attaches, `signal` is `down NAME`. */
  private async recreate(entry: Entry, attempt: number, failure: Failure, tried: Attempt, emit: (e: UpEvent) => void, signal: AbortSignal, detach: AbortSignal): Promise<UpOutcome> {
    const { cluster, deployment, lane } = entry.seen;
    const store = this.deps.store;
    const at = (): string => new Date(this.deps.now()).toISOString();
    const say = (line: string): void => {
      this.deps.log(`supervise: ${deployment}: ${line}`);
      emit({ type: "say", text: `launcher serve: ${line}`, t: this.deps.now() });
    };
    const of = entry.policy.max === undefined ? "" : ` of at most ${entry.policy.max}`;
    // The daemon stopping interrupts the steps before the new group starts (nothing of it is left
    // then), and leaves its boot, once started, to the next daemon as every boot of a daemon is
    // (src/daemon/adopt.ts): that is no `down`, the deployment stays known.
    const leaving = AbortSignal.any([detach, this.stopping.signal]);
    const stop = AbortSignal.any([signal, leaving]);
    const cancelledByDown = (): boolean => signal.aborted && !leaving.aborted;
    say(`${failure.message}; recreating the whole group (restart ${attempt}${of})`);
    const releases: (() => void | Promise<void>)[] = [];
    let session: ClusterSession | undefined;
    let old: Promise<void> | undefined;
    try {
      session = await this.deps.session(cluster);
      if (session === undefined) throw new Error(`cluster ${cluster} is not one this daemon watches`);
      // What allows the restart is all in this machine's store (no node is touched): read first,
      // so that a restart that may not run stops nothing.
      let plan: Plan | undefined;
      let refused: unknown;
      try {
        plan = this.keptPlan(entry, attempt, tried, releases);
      } catch (e) {
        refused = e;
      }
      // The old group goes while the new one is claimed and checked (src/boot/up.ts
      // UpOptions.recreating): its first container starts once both are done.
      old = this.takeDown(session, entry, failure, attempt, tried, plan, stop, say);
      old.catch(() => undefined);
      if (plan === undefined) {
        await old;
        throw refused;
      }
      checkInterrupted(stop, `before anything of ${deployment} was removed`);
      const outcome = await this.deps.boot(stampLabel(plan, LABELS.restarts, String(attempt)), session, signal, emit, leaving, old);
      tried.ok = true;
      say(`${deployment} serves again (restart ${attempt}${of})`);
      return outcome;
    } catch (e) {
      // The old group's removal is over before anything else is done about this try.
      await old?.catch(() => undefined);
      tried.error = (e as Error).message;
      if (e instanceof Detached) {
        // Its row stays open for the daemon that adopts the boot, which ends it.
        tried.left = true;
        say(`restart ${attempt} left to the next daemon: ${tried.error}`);
        throw e;
      }
      if (cancelledByDown()) {
        // `launcher down NAME` cancelled it: as any down, nothing of the deployment is left (the old
        // group too, when the cancel came before its removal), and it is not booted again.
        tried.cancelled = true;
        if (session === undefined) store.deploymentStopping(cluster, deployment, at());
        else {
          const { outcomes } = await stopDeployments(await listNodes(session), [deployment], { store, cluster, now: () => new Date(this.deps.now()) }, { graceSeconds: seconds(DEFAULTS.rollbackGrace) });
          for (const line of formatRemoval(outcomes, `launcher down deployment/${deployment}`, "summary")) say(line);
        }
      }
      say(`restart ${attempt} ${tried.cancelled ? "cancelled" : "failed"}: ${tried.error.split("\n")[0] ?? ""}`);
      throw e;
    } finally {
      for (const r of releases.reverse()) await r();
    }
  }

  /**
   * The plan a restart boots again (the one kept when the group served), with the deployment's and
   * lane's locks taken (pushed on `releases`); throws when there is none, when an `up` or a swap
   * holds a lock (this try counts as failed, tried again after its backoff), or when `launcher
   * down` stopped it since it served (cancelled).
   */
  private keptPlan(entry: Entry, attempt: number, tried: Attempt, releases: (() => void | Promise<void>)[]): Plan {
    const { cluster, deployment, lane } = entry.seen;
    const store = this.deps.store;
    const saved = store.savedPlan(cluster, deployment);
    if (saved === undefined) throw new Error(`no plan of ${deployment} is kept in this machine's store (it was started by another machine's launcher, or before launcher kept plans): launcher up it again here`);
    const plan = decodeSavedPlan(saved);
    if (!plan.ok) throw new Error(`the kept plan of ${deployment} cannot be read (${plan.problem}): launcher up it again`);
    releases.push(holdOrBusy(store, [deploymentKey(cluster, deployment), ...(lane === undefined ? [] : [laneKey(lane)])], `launcher serve (restart ${attempt} of ${deployment})`, () => new Date(this.deps.now())));
    // `launcher down` marks it stopped once its containers are gone (also during an earlier try's boot): not to be booted again.
    if (!store.deploymentServed(cluster, deployment)) {
      tried.cancelled = true;
      throw new Error(`${deployment} was stopped (launcher down) since it served: not restarting it`);
    }
    return plan.plan;
  }

  /**
   * The old group taken down in two round trips per node: every rank stopped at once and the
   * nodes listed (the rank that failed named from it); then every container of the deployment
   * removed (listed on every node, so that none of its name is left for the new group to meet),
   * the dead rank's log read for its root cause on the way; the restart recorded. Without a `plan`
   * (the restart may not run) nothing is stopped or removed: the failure is only recorded.
   *
   * Stopping first, with no grace, is what lets the cause be read without waiting: a container's
   * end (State.FinishedAt) is when its process exited as containerd reports it (moby
   * daemon/monitor.go handleContainerExit: ExitedAt), not when Docker or this daemon heard of it,
   * so a rank that ended on its own keeps its earlier end however late it is looked at, and a rank
   * stopped here ends after every rank that died by itself. So the rank that ended first is the
   * one that failed (the others lost it as a peer; their deaths may be heard of first: the rig's
   * crash test heard the worker's die 28 ms before the head's that crashed). No grace: what a
   * failed group's ranks would do on SIGTERM serves nothing the new group needs (each container's
   * /dev/shm is its own, `--shm-size`, and goes with it; the GPU memory is freed when its process
   * ends), and a rank hung on its dead peer would hold the restart for the whole grace.
   */
  private async takeDown(session: ClusterSession, entry: Entry, seenFailure: Failure, attempt: number, tried: Attempt, plan: Plan | undefined, stop: AbortSignal, say: (line: string) => void): Promise<void> {
    const { cluster, deployment, lane } = entry.seen;
    // A node's own guard that killed its part is the cause, whatever the ranks' ends say.
    const failure = await this.guardedFailure(entry, seenFailure, plan);
    if (plan === undefined) {
      // Nothing is stopped: the rest of a failing group is let end by itself, for as long as `up`
      // lets it (its settle), before the first to end is looked for.
      await delay(SETTLE_MS, undefined, { signal: stop }).catch(() => undefined);
    } else checkInterrupted(stop, `before anything of ${deployment} was removed`);
    const byNode = new Map<string, string[]>();
    for (const n of plan?.nodes ?? []) byNode.set(n.node, [...(byNode.get(n.node) ?? []), n.container]);
    // Stopped and listed in one round trip per node; a node that does not answer is said by the removal.
    const listing = await listNodes(session, undefined, byNode);
    const group = listing.flatMap((l) => (l.reachable ? l.containers : [])).filter((c) => c.labels.deployment === deployment);
    // Only a death is attributed by the ends: a group that failed with every rank running (an
    // unhealthy head, a lost node) was just stopped whole here, in no meaningful order; nor is a
    // group its memory guard killed at once (its trip is the cause).
    const attributed = failure.kind !== "memory-guard" && failure.kind !== NODE_GUARD_REASON && (failure.kind === "rank-exited" || plan === undefined);
    const ended = attributed ? group.filter((c) => !c.c.running) : [];
    // The logs read for the blame and the cause: every ended rank's (a rank whose log only says it
    // lost a peer is not the one that failed, however early it ended), else the failure's own rank's.
    const engine = adapterOf(entry.seen.engine);
    const reading = new Map<string, string>(
      ended.length > 0 ? ended.map((c) => [c.node, c.c.name]) : failure.node === undefined || failure.container === undefined ? [] : [[failure.node, failure.container]],
    );
    const heard = new Map<string, BootState>();
    const hear = (node: string, lines: readonly string[]): void => {
      const container = reading.get(node);
      if (engine !== undefined && container !== undefined) heard.set(container, readBoot(engine, lines));
    };
    // Every rank was stopped just above, so all have ended: one this restart stopped has no cause
    // and ended last, and goes after the ranks that died by themselves (src/boot/blame.ts).
    const blame = (): Failure => {
      const at = (c: Labelled): number => timeMs(c.c.finishedAt) ?? Number.POSITIVE_INFINITY;
      // The death that started this restart ended by itself: without a cause in its read log, it is the silent one.
      const silent = (c: Labelled): boolean => c.c.name === failure.container && heard.has(c.c.name) && heard.get(c.c.name)?.cause === undefined;
      const first = culprit(ended, (c) => ({ ownCause: ownCause(heard.get(c.c.name)), silent: silent(c), atMs: at(c), order: c.labels.rank }));
      if (first === undefined) return failure;
      const named = rankExited(first.labels.rank, first.node, first.c.name, first.c.state, first.c.exitCode);
      const before = ended.filter((c) => at(c) < at(first));
      const why = silent(first) ? "it died without a word" : "its own cause";
      if (before.length > 0) say(`${named.message}: blamed for ${why} (${before.map((c) => `rank ${c.labels.rank}`).join(", ")} ended before it, only losing a peer)`);
      else if (named.rank !== failure.rank || named.node !== failure.node) say(`${named.message} first`);
      return named;
    };
    const record = (): void => {
      const named = blame();
      this.blamed(entry, named);
      const cause = named.container === undefined ? undefined : heard.get(named.container)?.cause;
      tried.record = this.deps.store.beginRestart({
        cluster,
        deployment,
        ...(lane === undefined ? {} : { lane }),
        attempt,
        reason: named.kind,
        message: named.message,
        ...(named.node === undefined ? {} : { node: named.node }),
        ...(named.rank === undefined ? {} : { rank: named.rank }),
        ...(cause === undefined ? {} : { cause }),
        started_at: new Date(this.deps.now()).toISOString(),
      });
      if (cause !== undefined) say(`cause: ${cause}`);
    };
    if (plan === undefined) {
      await this.readLogs(session, reading, hear);
      return record();
    }
    checkInterrupted(stop, `before the old group of ${deployment} was removed`);
    // The logs are read in the round trip that removes their nodes' containers.
    const removed = await removeListed(listing, (c) => c.labels.deployment === deployment, 0, false, { containers: reading, tail: CAUSE_TAIL_LINES, heard: hear });
    record();
    for (const line of formatRemoval(removed, `launcher down deployment/${deployment}`, "summary")) say(line);
    if (unreachableOf(removed).length > 0) throw new Error(`cannot recreate ${deployment} while ${unreachableOf(removed).map((u) => u.node).join(", ")} does not answer`);
  }

  /**
   * The failure a restart records: the newest trip of a node's own guard on the group's nodes, read
   * now (bounded), when one killed it; else the one seen. A memory-guard trip or a wedge is its own
   * cause already.
   */
  private async guardedFailure(entry: Entry, failure: Failure, plan: Plan | undefined): Promise<Failure> {
    if (this.deps.nodeGuard === undefined || failure.kind === "memory-guard" || failure.kind === WEDGED_REASON || failure.kind === NODE_GUARD_REASON) return failure;
    const nodes = [...(plan?.nodes.map((n) => n.node) ?? []), ...entry.seen.ranks.map((r) => r.node)];
    const trips = await this.deps.nodeGuard.trips(entry.seen.cluster, entry.seen.deployment, nodes).catch(() => []);
    const newest = [...trips].sort((a, b) => b.at.localeCompare(a.at))[0];
    return newest === undefined ? failure : tripFailure(newest);
  }

  /**
   * The rank a restart blamed (what the store's history records) becomes what the restart says:
   * the gateway's 503 names it from the same Failure, not the first sighting that set it off.
   */
  private blamed(entry: Entry, named: Failure): void {
    const k = key(entry.seen.cluster, entry.seen.deployment);
    if (this.entries.get(k) !== entry || named === entry.failure) return;
    entry.failure = named;
    this.step(k, entry, { kind: "blamed", at: this.deps.now(), failure: named });
    // What restarting() returns changed: the gateway rebuilds its routes.
    this.version++;
  }

  /** The last lines of one container per node, as `docker logs` gives them; a node that does not answer gives none. */
  private async readLogs(session: ClusterSession, containers: ReadonlyMap<string, string>, heard: (node: string, lines: readonly string[]) => void): Promise<void> {
    await Promise.all(
      [...containers].map(async ([node, container]) => {
        const docker = session.docker.get(node);
        if (docker === undefined) return;
        try {
          const lines: string[] = [];
          for await (const line of docker.logs(container, { tail: CAUSE_TAIL_LINES })) lines.push(line);
          heard(node, lines);
        } catch {
          // Its node stopped answering meanwhile: the restart goes on without its log.
        }
      }),
    );
  }
}
