import { timeMs } from "../engine/boot-log.js";
import { decodeRestartPolicy, type DeploymentStatus, type RestartPolicy } from "../contract/deployment.js";
import { DEFAULTS } from "../contract/defaults.js";
import { WEDGED_REASON } from "../contract/generation.js";
import { NODE_GUARD_REASON } from "../contract/node-guard-trip.js";

/**
 * The supervisor's decisions, as a pure function of what it saw and when: the daemon
 * (./supervisor.ts) feeds it every status poll and the end of every restart it issued, and does what
 * it says. A group lives or dies whole (as LeaderWorkerSet's RecreateGroupOnPodRestart): one rank
 * lost means every rank on every node is removed and the plan booted again.
 */

/** When the supervisor acts, and how long it waits between tries. */
export interface SuperviseTiming {
  /**
   * A failure must be seen on two polls at least this far apart before the group is recreated:
   * a `down` in progress shows ranks exiting one by one for a moment, and one lost SSH answer is
   * no dead node. An exited rank is confirmed at the next poll, however soon.
   */
  readonly confirmMs: number;
  /** The wait before the second try in a row; doubled for each further one, up to maxBackoffMs. The first try is at once. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /** A deployment that served this long since its last restart starts its backoff anew. */
  readonly resetAfterMs: number;
}

export const DEFAULT_TIMING: SuperviseTiming = { confirmMs: DEFAULTS.restartConfirm.ms, backoffMs: DEFAULTS.restartBackoff.ms, maxBackoffMs: DEFAULTS.restartBackoffMax.ms, resetAfterMs: DEFAULTS.restartResetAfter.ms };

/** Why a group that served is to be recreated; `rank`/`node` name the dead rank when there is one. */
export const FAILURE_KINDS = ["rank-exited", "unhealthy", "node-unreachable", "memory-guard", WEDGED_REASON, NODE_GUARD_REASON] as const;
export interface Failure {
  /**
   * memory-guard: the guard killed the group when a node fell below its floor (src/supervise/ready-guard.ts).
   * wedged: its /health answers but it completed no generation within its bound (./generation.ts).
   * node-guard: a node's own guard killed its containers there (./node-guard-reader.ts read its report).
   */
  readonly kind: (typeof FAILURE_KINDS)[number];
  readonly message: string;
  readonly rank?: number;
  readonly node?: string;
  readonly container?: string;
}

export const SUPERVISOR_PHASES = ["watching", "ready", "backoff", "restarting", "gave-up"] as const;
export type SupervisorPhase = (typeof SUPERVISOR_PHASES)[number];

/** Per deployment. `attempts`: restarts issued over its life (never reset: `:N` bounds them all). */
export type Supervised =
  /** Not seen serving yet (a boot in progress, or one this daemon did not see succeed): not touched. */
  | { readonly phase: "watching"; readonly attempts: number }
  | {
      readonly phase: "ready";
      readonly attempts: number;
      /** Restarts in a row without a long enough run between them: what the backoff grows with. */
      readonly streak: number;
      readonly since: number;
      /** The first poll that showed the failure, still to be confirmed. */
      readonly failing?: { readonly at: number; readonly failure: Failure };
    }
  | { readonly phase: "backoff"; readonly attempts: number; readonly streak: number; readonly until: number; readonly failure: Failure }
  | { readonly phase: "restarting"; readonly attempts: number; readonly streak: number; readonly since: number; readonly failure: Failure }
  /** `since`: when it gave up, which a poll read later than that shows. */
  | { readonly phase: "gave-up"; readonly attempts: number; readonly since: number; readonly failure: Failure };

export type SuperviseEvent =
  /**
   * One poll's view of the deployment (undefined: no node shows a container of it).
   * `recordedReady`: the store says it served and was not stopped since (a daemon started after
   * the deployment served, or after it failed, still knows it was ready).
   */
  | { readonly kind: "observed"; readonly at: number; readonly status: DeploymentStatus | undefined; readonly recordedReady: boolean }
  /**
   * The restart issued ended: the group serves again, or the boot failed (and was rolled back), or
   * it was `cancelled`: the deployment was stopped (`launcher down`) before or while it booted.
   */
  | { readonly kind: "restart-ended"; readonly at: number; readonly ok: boolean; readonly error?: string; readonly cancelled?: boolean }
  /**
   * Docker said one of its ranks' containers died (a `die` event read from the node as it
   * happened): confirmed by itself, as the container's end is Docker's own record.
   */
  | { readonly kind: "died"; readonly at: number; readonly failure: Failure }
  /** Time passed (a backoff may be over). */
  | { readonly kind: "tick"; readonly at: number }
  /**
   * Restart number `attempt`, issued by a daemon that died during its boot, was adopted by this one
   * (src/daemon/adopt.ts): its boot owns the group until it ends (`restart-ended`), as one this
   * daemon issued would.
   */
  | { readonly kind: "adopted"; readonly at: number; readonly attempt: number; readonly failure: Failure }
  /**
   * The restart under way named the rank to blame from the group it took down (src/boot/blame.ts
   * via the supervisor's takeDown): the failure it records in the store's history. From then on
   * the restart says that one (the gateway's 503, a later try), not the first sighting.
   */
  | { readonly kind: "blamed"; readonly at: number; readonly failure: Failure };

export type SuperviseAction =
  /** Remove the whole group on every node, then boot its plan again. */
  | { readonly kind: "restart"; readonly attempt: number; readonly failure: Failure }
  /** No more tries: the deployment is left as it is (degraded), and this is said once. */
  | { readonly kind: "give-up"; readonly attempts: number; readonly failure: Failure }
  /** Nothing of it runs any more and nothing was pending: forget it. */
  | { readonly kind: "forget" };

export interface Decision {
  readonly state: Supervised | undefined;
  readonly actions: readonly SuperviseAction[];
}

export const INITIAL: Supervised = { phase: "watching", attempts: 0 };

/** Orders containers' ends as Docker records them (timeMs: nanoseconds kept); unknown ends last. */
export function byEnd(a: string | undefined, b: string | undefined): number {
  const ms = (t: string | undefined): number => (t === undefined ? Number.POSITIVE_INFINITY : (timeMs(t) ?? Number.POSITIVE_INFINITY));
  const d = ms(a) - ms(b);
  return Number.isNaN(d) ? 0 : d;
}

/** A rank whose container is no longer running (a poll's rank state, or docker's `die` event). */
export const rankExited = (rank: number, node: string, container: string, state: string, exitCode: number | undefined): Failure => ({
  kind: "rank-exited",
  rank,
  node,
  container,
  message: `rank ${rank} on ${node} ${state}${exitCode === undefined ? "" : ` (exit ${exitCode})`}`,
});

/** What is wrong with a deployment that served, from one status poll; undefined: nothing. */
export function failureOf(d: DeploymentStatus): Failure | undefined {
  // The rank that exited first: the others most likely only lost it as a peer.
  const dead = d.ranks
    .filter((r) => r.state !== "running" && r.state !== "unreachable")
    .sort((a, b) => byEnd(a.finished_at, b.finished_at) || a.rank - b.rank)[0];
  if (dead !== undefined) return rankExited(dead.rank, dead.node, dead.container, dead.state, dead.exit_code);
  if (d.missing.length > 0 && d.status === "degraded") return { kind: "rank-exited", message: `missing ${d.missing.join("; ")}` };
  const lost = d.ranks.find((r) => r.state === "unreachable");
  // A node that does not answer SSH while the head still serves: the engine works (its ranks talk
  // over the fabric), and no boot could pass preflight on that node now. Not a failure yet; it is
  // one once the head stops answering too (status "unreachable").
  if (d.status === "serving") return undefined;
  if (lost !== undefined || d.unreachable.length > 0) {
    const node = lost?.node ?? d.unreachable[0];
    return { kind: "node-unreachable", ...(lost === undefined ? {} : { rank: lost.rank }), ...(node === undefined ? {} : { node }), message: `node ${d.unreachable.join(", ") || node} does not answer` };
  }
  // Every rank runs but the head's engine no longer answers /health; its log may say why (status's fault).
  const why = d.fault === undefined ? `(${d.status}, phase ${d.phase})` : `(${d.status}): its log says ${d.fault}`;
  return { kind: "unhealthy", rank: 0, ...(d.ranks[0] === undefined ? {} : { node: d.ranks[0].node, container: d.ranks[0].container }), message: `the engine does not answer /health ${why}` };
}

/** The policy a deployment's labels carry; undefined: not supervised. */
export function policyOf(d: DeploymentStatus): RestartPolicy | undefined {
  if (d.restart === undefined) return undefined;
  const p = decodeRestartPolicy(d.restart);
  return p.ok ? p.policy : undefined;
}

/** The wait before restart number `streak` in a row (1: at once). */
export function backoffMs(streak: number, timing: SuperviseTiming): number {
  if (streak <= 1) return 0;
  return Math.min(timing.maxBackoffMs, timing.backoffMs * 2 ** Math.min(streak - 2, 30));
}

const canRetry = (attempts: number, policy: RestartPolicy): boolean => policy.max === undefined || attempts < policy.max;

/** The next restart, now or after its backoff; or giving up when the policy allows no more. */
function next(attempts: number, streak: number, failure: Failure, at: number, policy: RestartPolicy, timing: SuperviseTiming): Decision {
  if (!canRetry(attempts, policy)) return { state: { phase: "gave-up", attempts, since: at, failure }, actions: [{ kind: "give-up", attempts, failure }] };
  const wait = backoffMs(streak + 1, timing);
  if (wait === 0) return { state: { phase: "restarting", attempts: attempts + 1, streak: streak + 1, since: at, failure }, actions: [{ kind: "restart", attempt: attempts + 1, failure }] };
  return { state: { phase: "backoff", attempts, streak: streak + 1, until: at + wait, failure }, actions: [] };
}

/**
 * One step of one deployment's supervision. `policy` is the one its labels carry (the caller keeps
 * the last one seen while the group is down for a restart).
 */
export function supervise(state: Supervised, event: SuperviseEvent, policy: RestartPolicy, timing: SuperviseTiming = DEFAULT_TIMING): Decision {
  const stay: Decision = { state, actions: [] };
  // A cause learnt once the group is down (the restart's blame, a node guard's report read after the death) is what it says from then on.
  if (event.kind === "blamed") return state.phase === "restarting" || state.phase === "backoff" ? { state: { ...state, failure: event.failure }, actions: [] } : stay;
  if (event.kind === "adopted" && state.phase !== "restarting") {
    // Its streak is not known here (the daemon that counted it died): at least this try, so a
    // failure waits the first backoff before the next one, whatever this daemon saw before.
    return { state: { phase: "restarting", attempts: Math.max(state.attempts, event.attempt), streak: Math.max(1, "streak" in state ? state.streak : 0), since: event.at, failure: event.failure }, actions: [] };
  }
  switch (state.phase) {
    case "restarting":
      // The boot issued owns the group until it ends; what the polls show meanwhile is its doing.
      if (event.kind !== "restart-ended") return stay;
      if (event.cancelled === true) return { state: undefined, actions: [{ kind: "forget" }] };
      if (event.ok) return { state: { phase: "ready", attempts: state.attempts, streak: state.streak, since: event.at }, actions: [] };
      // The failed boot rolled its containers back: try again (after the backoff), or give up.
      return next(state.attempts, state.streak, state.failure, event.at, policy, timing);
    case "backoff": {
      // The group is down already: a death now is one of its leftovers, and the backoff decides.
      if (event.kind === "restart-ended" || event.kind === "died") return stay;
      // A `launcher up` of it meanwhile (or a boot this daemon issued before a restart) serves: fine.
      if (event.kind === "observed" && event.status?.status === "serving" && failureOf(event.status) === undefined) {
        return { state: { phase: "ready", attempts: state.attempts, streak: state.streak, since: event.at }, actions: [] };
      }
      if (event.at < state.until) return stay;
      return { state: { phase: "restarting", attempts: state.attempts + 1, streak: state.streak, since: event.at, failure: state.failure }, actions: [{ kind: "restart", attempt: state.attempts + 1, failure: state.failure }] };
    }
    case "gave-up":
      if (event.kind !== "observed") return stay;
      if (event.status === undefined) return { state: undefined, actions: [{ kind: "forget" }] };
      // Booted again by hand and serving: supervised again, within what is left of its restarts.
      if (event.status.status === "serving" && failureOf(event.status) === undefined) return { state: { phase: "ready", attempts: state.attempts, streak: 0, since: event.at }, actions: [] };
      return stay;
    case "watching": {
      if (event.kind !== "observed") return stay;
      if (event.status === undefined) return { state: undefined, actions: [{ kind: "forget" }] };
      const failure = failureOf(event.status);
      if (failure === undefined) return { state: { phase: "ready", attempts: state.attempts, streak: 0, since: event.at }, actions: [] };
      // It never served while watched: a boot (someone's `up`) that fails is that `up`'s to roll back,
      // unless the store says it had served (the daemon was down when it died).
      if (!event.recordedReady || event.status.status === "booting") return stay;
      return { state: { phase: "ready", attempts: state.attempts, streak: 0, since: event.at, failing: { at: event.at, failure } }, actions: [] };
    }
    case "ready": {
      if (event.kind === "died") {
        // A death of the group before this one (the restart's own removal) is no news.
        if (event.at < state.since) return stay;
        // Docker's own word that the container ended needs no second look (a poll's "exited" is read
        // from the same state; its confirmation guards against a poll caught mid-`down`, which the
        // restart checks in the store under the deployment's lock anyway). Which rank ended first is
        // decided by the restart from the containers it removes (src/supervise/supervisor.ts).
        const streak = event.at - state.since >= timing.resetAfterMs ? 0 : state.streak;
        return next(state.attempts, streak, event.failure, event.at, policy, timing);
      }
      if (event.kind !== "observed") return stay;
      // Read before the group served again (a poll that began during the restart): it says nothing new.
      if (event.at < state.since) return stay;
      // Begun before the failure was seen (a die event comes between a poll's start and its end): it
      // can neither confirm the failure nor clear it.
      if (state.failing !== undefined && event.at < state.failing.at) return stay;
      // Removed on every node (`launcher down`, a lane swap): nothing to restart.
      if (event.status === undefined) return { state: undefined, actions: [{ kind: "forget" }] };
      const failure = failureOf(event.status);
      if (failure === undefined) {
        const streak = event.at - state.since >= timing.resetAfterMs ? 0 : state.streak;
        return { state: { phase: "ready", attempts: state.attempts, streak, since: state.since }, actions: [] };
      }
      if (state.failing === undefined) return { state: { ...state, failing: { at: event.at, failure } }, actions: [] };
      // Confirmed: still failing on a later poll. An exited rank needs no more time: its container says so.
      const confirmed = failure.kind === "rank-exited" || event.at - state.failing.at >= timing.confirmMs;
      if (!confirmed) return stay;
      const streak = event.at - state.since >= timing.resetAfterMs ? 0 : state.streak;
      // The confirming poll names the rank that exited first by its container's end (failureOf), which
      // the order deaths were heard in from several nodes does not (each node's events come over
      // their own stream); one that names no rank (its container is gone) keeps the first sighting's.
      const named = failure.kind === state.failing.failure.kind && failure.rank === undefined ? state.failing.failure : failure;
      return next(state.attempts, streak, named, event.at, policy, timing);
    }
  }
}

/**
 * How long a client is told to wait (Retry-After, in seconds) for a deployment being restarted:
 * what is left of the backoff, plus the time its last boot took (10 s when none is known).
 */
export function retryAfterSeconds(state: Supervised, at: number, lastBootSeconds: number | undefined): number {
  // Booted again, not yet seen by a poll: a moment.
  if (state.phase === "ready") return 1;
  const boot = Math.max(1, Math.ceil(lastBootSeconds ?? 10));
  if (state.phase === "backoff") return Math.ceil(Math.max(0, state.until - at) / 1000) + boot;
  if (state.phase === "restarting") return Math.max(1, boot - Math.floor((at - state.since) / 1000));
  return boot;
}

/** Is the group down on purpose for a restart (the gateway says deployment_restarting)? */
export const isRestarting = (state: Supervised | undefined): boolean => state?.phase === "backoff" || state?.phase === "restarting";

/**
 * Does the gateway still answer deployment_restarting? While the group is down for a restart, and
 * after its boot served until a poll read after that shows it (the last poll still shows it booting
 * or gone, which would say model_booting or lane_empty for a moment).
 */
export const answersRestarting = (state: Supervised, lastPollAt: number | undefined): boolean =>
  isRestarting(state) || (state.phase === "ready" && state.attempts > 0 && (lastPollAt === undefined || lastPollAt < state.since));

/**
 * Does the gateway answer deployment_degraded whatever the last poll shows? Given up until a poll
 * read after that: the last one may still show its last restart booting (model_booting), which
 * no one is doing any more.
 */
export const answersGaveUp = (state: Supervised, lastPollAt: number | undefined): boolean =>
  state.phase === "gave-up" && (lastPollAt === undefined || lastPollAt < state.since);
