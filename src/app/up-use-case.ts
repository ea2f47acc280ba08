import type { Cluster } from "../cluster/cluster.js";
import type { ImageFacts } from "../engine/image-contract.js";
import type { Plan } from "../plan/plan.js";
import type { StateStore } from "../store/store.js";
import { abortable } from "../config/abort.js";
import { claimPlanNodes, type NodeClaims } from "../claims/claims.js";
import { detectAndRecord, fabricBlockers, fabricCheckFailed } from "../nodes/doctor.js";
import { upInLane } from "../lanes/lane.js";
import type { LaneUpResult, UpOutcome } from "../boot/up-events.js";
import { recordedUp } from "../boot/launch.js";
import { deploymentKey, holdOrBusy, laneKey } from "../claims/locks.js";
import type { Progress } from "../nodes/progress.js";
import { openSession, type ClusterSession } from "../nodes/session.js";
import type { UpOptions, UpResult } from "../boot/up.js";
import { readPlanNodes, readsAsked, type PendingReadings } from "../boot/preflight.js";
import type { FitReport } from "../memory/fit.js";
import { traced } from "../remote/trace.js";
import type { ArgsJudge } from "../nodes/image-check.js";

/**
 * The whole `up` use case (lock, detect fabric, re-plan, check, claim, launch or swap a lane,
 * record), in one place that both hosts of it call: the CLI without a daemon (src/cli/up.ts) and
 * the daemon (src/daemon/boots-host.ts, behind `launcher serve`'s control API). Neither host decides
 * anything of the boot itself; they only say where its words go and what stops it.
 */

/** What the user asked for, as the command line says it: the daemon receives exactly this. */
export interface UpRequest {
  readonly ref: string;
  readonly lane?: string;
  readonly name?: string;
  readonly nodes?: string;
  readonly port?: string;
}

/** Plans the request on `nodes` (undefined: the nodes the request names). */
export type Planner = (nodes: readonly string[] | undefined, cluster: Cluster, gaps: "ignore" | "error") => Plan;

/** Where the use case runs: its store, its words, its clock, what stops it. */
export interface UpHost {
  readonly plan: Planner;
  readonly store: StateStore;
  /** A line for the person watching (stderr in the CLI, an event through the daemon). */
  readonly say: (text: string) => void;
  readonly progress: Progress;
  /** Aborts the boot (a signal in the CLI, `down NAME` through the daemon): everything started is rolled back. */
  readonly signal: AbortSignal;
  /**
   * The daemon stops and leaves the boot to the next daemon (src/daemon/adopt.ts); absent in the
   * CLI, where a signal rolls back. A boot that may be left is kept in the store while it runs.
   */
  readonly detach?: AbortSignal;
  readonly now: () => Date;
  readonly leaseMs: number;
  readonly timeoutMs: number;
  readonly drainMs: number;
  /** Send the image to nodes that lack it (default); false: refuse instead. */
  readonly push: boolean;
  /** Free the page cache on the nodes before the preflight (where the SSH user may). */
  readonly dropCaches?: boolean;
  /**
   * How the nodes are reached (src/app/environment.ts Environment.openSession); absent: over SSH
   * (src/nodes/session.ts openSession). The fabric probe then runs over that session's transports.
   */
  readonly openSession?: (cluster: Cluster) => Promise<ClusterSession>;
  /** The recipe's args judged again by the image's own parser in preflight (src/app/lookup.ts argsJudge). */
  readonly judgeArgs?: ArgsJudge;
}


/** The command, as "busy" messages of other launchers name it. */
export const upCommandText = (r: UpRequest): string => `launcher up ${r.ref}${r.lane === undefined ? "" : ` --lane ${r.lane}`}`;

/**
 * Runs a boot of `first` (the request planned before any node was touched, so that a recipe error
 * is reported before anything else) on `cluster`, and returns what serves.
 */
export async function upUseCase(request: UpRequest, cluster: Cluster, first: Plan, host: UpHost): Promise<UpOutcome> {
  const { store, now } = host;
  // Until a container runs a daemon that stops leaves nothing behind: it interrupts these steps.
  const signal = host.detach === undefined ? host.signal : AbortSignal.any([host.signal, host.detach]);
  const what = upCommandText(request);
  const release: (() => void | Promise<void>)[] = [];
  try {
    // This machine's lock of the lane, or else of the deployment (a lane swap takes its deployment's itself), before any node is asked.
    release.push(holdOrBusy(store, [request.lane === undefined ? deploymentKey(first.cluster, first.deployment) : laneKey(request.lane)], what, now));
    // Each node's own fabric fills what the cluster file leaves out; the findings are checked once
    // the nodes are known (a lane picks its own).
    const opened = await abortable(traced("open session (ssh -G, DNS)", undefined, () => (host.openSession ?? openSession)(cluster)), signal, PROBING);
    const probe = traced("fabric probe", undefined, () => detectAndRecord(opened, store, now().toISOString(), { peers: false }));
    probe.catch(() => undefined);
    if (request.lane === undefined) return await launchWhileProbing(first, { opened, probe, signal }, host, what);
    const detected = await abortable(probe, signal, PROBING);
    const session = withImageFacts(detected.session, store, now);
    const findings = detected.report.findings;
    const step = bootStep(session, host, what);
    const lane = request.lane;
    host.say(`launcher: putting ${first.recipe.id} in lane ${lane}`);
    return await upInLane((nodes) => host.plan(nodes, session.cluster, "error"), request.nodes !== undefined, session, {
      ...step.options,
      lane,
      store,
      now,
      drainMs: host.drainMs,
      what,
      claim: step.claim,
      findings,
    });
  } finally {
    for (const r of release.reverse()) await r();
  }
}

const PROBING = "while probing the nodes' fabric; nothing was started";
type Probe = ReturnType<typeof detectAndRecord>;

/**
 * A boot outside a lane, its nodes claimed and read while the fabric probe runs: which nodes, and
 * what each is asked (image, containers, mounts, memory, weights), the fabric does not decide, so
 * `first` (planned before any node was touched) says them. The plan made once the probe's findings
 * fill the cluster boots under those claims, with those reads where it asks the same of the same
 * nodes (else it claims, or reads, again). What the probe says of the plan's nodes (a fabric
 * problem, a node it cannot plan) is said before a failed claim: the nodes' own state is what to
 * fix first. However it ends, the reads end before the claims are given back (giveBack).
 */
async function launchWhileProbing(first: Plan, probing: { opened: ClusterSession; probe: Probe; signal: AbortSignal }, host: UpHost, what: string): Promise<UpOutcome> {
  const { opened, probe, signal } = probing;
  const step = bootStep(opened, host, what);
  const planned = async (): Promise<{ plan: Plan; session: ClusterSession }> => {
    const detected = await abortable(probe, signal, PROBING);
    const session = withImageFacts(detected.session, host.store, host.now);
    const plan = host.plan(undefined, session.cluster, "error");
    const blocking = fabricBlockers(detected.report.findings, plan.nodes.map((n) => n.node));
    if (blocking.length > 0) throw fabricCheckFailed(blocking);
    return { plan, session };
  };
  const claiming = traced("claims", undefined, () => step.claim(first));
  let claims: NodeClaims;
  try {
    claims = await abortable(claiming, signal, PROBING);
  } catch (e) {
    // Interrupted while claiming: the claims that still come are given back as they come.
    void claiming.then((c) => c.release(), () => undefined);
    await planned();
    throw e;
  }
  let held: Held = { claims };
  let planning: Awaited<ReturnType<typeof planned>>;
  try {
    const early = host.dropCaches === true ? undefined : readPlanNodes(first, opened, AbortSignal.any([step.options.signal, signal]));
    held = { claims, ...(early === undefined ? {} : { reads: early }) };
    planning = await planned();
  } catch (e) {
    await giveBack(held);
    throw e;
  }
  const { plan, session } = planning;
  if (plan.deployment !== first.deployment || plan.nodes.map((n) => n.node).join() !== first.nodes.map((n) => n.node).join()) {
    await giveBack(held);
    return launchPlan(plan, session, host, step);
  }
  // From here the boot (launchPlan) gives back what is held, however it ends.
  if (held.reads !== undefined && readsAsked(plan) === readsAsked(first)) return launchPlan(plan, session, host, { ...step, options: { ...step.options, readings: held.reads } }, held);
  await held.reads?.end();
  return launchPlan(plan, session, host, step, { claims });
}

/** The nodes' claims a boot holds, and the reads asked under them that it may use. */
interface Held {
  readonly claims: NodeClaims;
  readonly reads?: PendingReadings;
}

/** Gives back what a boot held: the reads end first, so that none outlives the claims it was asked under. */
async function giveBack(held: Held): Promise<void> {
  await held.reads?.end();
  await traced("claims released", undefined, () => held.claims.release());
}

/** What a boot of a plan already made needs of its host: no planner, no lane to drain. */
export type BootHost = Omit<UpHost, "plan" | "drainMs">;

/** What earlier boots read of an image (entrypoint, engine version) is kept by image ID, in the store. */
const withImageFacts = (session: ClusterSession, store: StateStore, now: () => Date): ClusterSession => ({
  ...session,
  images: { get: (id: string) => store.imageFacts(id), put: (id: string, facts: ImageFacts) => store.saveImageFacts(id, facts, now().toISOString()) },
});

/** How every boot is run: its options, and how it claims its nodes (a claim lost stops it). */
function bootStep(session: ClusterSession, host: BootHost, what: string): { options: UpOptions; claim: (plan: Plan) => Promise<NodeClaims> } {
  const progress = host.progress;
  // A claim taken over by another launcher (this one froze past its lease) stops the boot.
  const claimLost = new AbortController();
  const options = { timeoutMs: host.timeoutMs, signal: AbortSignal.any([host.signal, claimLost.signal]), progress, push: host.push, ...(host.dropCaches === true ? { dropCaches: true } : {}), fitted: (plan: Plan, fit: FitReport) => keepWeights(host.store, plan, fit, host.now()), ...(host.detach === undefined ? {} : { detach: host.detach }), ...(host.judgeArgs === undefined ? {} : { judgeArgs: host.judgeArgs }) };
  const onLost = (message: string): void => {
    progress.note(message);
    claimLost.abort();
  };
  const claim = (plan: Plan): Promise<NodeClaims> => claimPlanNodes(session, plan, { command: what, leaseMs: host.leaseMs, now: host.now, note: (t) => progress.note(t), onLost });
  return { options, claim };
}

/**
 * The plan's nodes claimed (or held already, with reads asked under those claims and handed to
 * the boot), then the plan booted and recorded: how every boot but a lane swap ends. However it
 * ends, the reads are over before the claims are given back.
 */
async function launchPlan(plan: Plan, session: ClusterSession, host: BootHost, step: ReturnType<typeof bootStep>, held?: Held): Promise<UpOutcome> {
  const holding = held ?? { claims: await traced("claims", undefined, () => step.claim(plan)) };
  try {
    host.say(`launcher: starting ${plan.deployment} (${plan.recipe.id}) on ${plan.nodes.map((n) => n.node).join(", ")}`);
    return { ...(await traced("up", undefined, () => recordedUp(plan, session, step.options, host.store, host.now))), deployment: plan.deployment };
  } finally {
    await giveBack(holding);
  }
}

/**
 * A kept plan booted again, as `up` boots it (claims, push, preflight, starts, the watch, the
 * rollback of its own containers, the boot recorded): a supervisor's restart of a group that
 * failed. The caller holds the deployment's and lane's locks and removes the old group (done
 * before, or `recreating`: under way, and waited for before the first container starts). The fabric
 * is not probed again: the kept plan carries what its first `up` found, preflight still checks
 * every node, and a probe is SSH round trips on every node before the `docker run`s that a
 * restart must issue fast (README, "Supervision").
 */
export function bootKept(plan: Plan, session: ClusterSession, host: BootHost, what: string, recreating?: Promise<void>): Promise<UpOutcome> {
  const kept = withImageFacts(session, host.store, host.now);
  const step = bootStep(kept, host, what);
  // Its claims and checks go on while the old group is removed (src/boot/up.ts UpOptions.recreating).
  return launchPlan(plan, kept, host, recreating === undefined ? step : { ...step, options: { ...step.options, recreating } });
}

/** The snapshot sizes preflight read, for `plan`'s memory fit. */
function keepWeights(store: StateStore, plan: Plan, fit: FitReport, at: Date): void {
  store.saveWeights(plan.cluster, plan.recipe.model, new Map(fit.nodes.flatMap((n) => (n.weightsBytes === undefined ? [] : [[n.node, n.weightsBytes] as const]))), at.toISOString());
}

/** The line `up` prints on stdout when it succeeds, wherever the boot ran. */
export function upSummary(outcome: UpOutcome, lane: string | undefined): string {
  if (outcome.status === "already-running") {
    return `${outcome.deployment} is already running this recipe with these options: ${outcome.endpoint}/v1 (model "${outcome.served_model}"); nothing started`;
  }
  const laneText = lane === undefined ? "" : `; lane ${lane} serves it`;
  return `${outcome.deployment} is ready in ${outcome.seconds.toFixed(1)} s: ${outcome.endpoint}/v1 (model "${outcome.served_model}")${laneText}`;
}
