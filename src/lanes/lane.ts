import { RemoteError, UserError } from "../config/errors.js";
import type { Plan } from "../plan/plan.js";
import type { LaneRecord, StateStore, SwapMode } from "../store/store.js";
import type { LaneUpResult } from "../boot/up-events.js";
import { formatRemoval, stopDeployments } from "../nodes/down.js";
import { listNodes } from "../nodes/labels.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import { afterFailedSwap, restored, servedOf, serving, switching } from "./lane-state.js";
import { adapterOf } from "../engine/registry.js";
import { drain } from "./drain.js";
import { recordedUp } from "../boot/launch.js";
import { deploymentKey, holdOrBusy } from "../claims/locks.js";
import type { NodeClaims } from "../claims/claims.js";
import { placeSwap } from "./placement.js";
import { preflight } from "../boot/preflight.js";
import { dockerOf, type ClusterSession } from "../nodes/session.js";
import { ensureImage } from "../transfer/images.js";
import { clusterRoutes } from "../transfer/route.js";
import { abortable, checkInterrupted, Detached, Interrupted, interruption } from "../config/abort.js";
import { createdBy } from "../boot/boot.js";
import { judgeExisting } from "../nodes/existing.js";
import { fabricBlockers, fabricCheckFailed } from "../nodes/doctor.js";
import type { Finding } from "../cluster/detect.js";
import { clusterStatus, type DeploymentStatus } from "../nodes/status.js";
import type { UpOptions, UpResult } from "../boot/up.js";

export interface LaneUpOptions extends UpOptions {
  readonly lane: string;
  readonly store: StateStore;
  readonly now: () => Date;
  /** How long a replaced deployment may finish its running requests before it is stopped. */
  readonly drainMs: number;
  /** The command, for "busy" messages. */
  readonly what: string;
  /** Claims the plan's nodes on the nodes themselves, or fails with "busy" (src/claims/claims.ts). */
  readonly claim: (plan: Plan) => Promise<NodeClaims>;
  /** What the fabric probe found; those on the nodes finally chosen stop the swap. */
  readonly findings: readonly Finding[];
}

function runningNodes(d: DeploymentStatus): string[] {
  return d.ranks.filter((r) => r.state === "running").map((r) => r.node);
}

/**
 * Drains each deployment a lane's new one replaces (its running requests get `drainMs`), then
 * stops it on every node and records it (src/nodes/down.ts stopDeployments); `stopping` is told
 * just before the first removal. Also what a daemon does for a swap whose boot it adopted
 * (src/daemon/adopt.ts).
 */
export async function stopReplacedIn(
  session: ClusterSession,
  replacing: readonly DeploymentStatus[],
  options: Pick<LaneUpOptions, "lane" | "store" | "now" | "drainMs" | "signal" | "progress"> & { readonly cluster: string },
  stopping: () => void = () => undefined,
): Promise<void> {
  const { lane, store, now, cluster } = options;
  for (const d of replacing) {
    options.progress.note(`lane ${lane}: draining ${d.deployment} (up to ${Math.round(options.drainMs / 1000)} s for running requests) ...`);
    const drained = await drain(d.endpoint, options.drainMs, options.signal, adapterOf(d.engine), store.engineKey(cluster, d.deployment));
    if (!drained.drained) options.progress.note(`lane ${lane}: ${d.deployment} still runs ${drained.running} request(s); stopping it anyway`);
    checkInterrupted(options.signal, `before stopping ${d.deployment}: nothing was stopped`);
    stopping();
    const nodes = [...new Set(d.ranks.map((r) => r.node))];
    const { outcomes, stopped } = await stopDeployments(await listNodes(session), [d.deployment], { store, cluster, now }, { graceSeconds: seconds(DEFAULTS.stopGrace), nodesOf: () => nodes });
    // Recorded stopped only when it is: a node that did not answer may still run it.
    if (stopped.length === 0) for (const line of formatRemoval(outcomes, `launcher down deployment/${d.deployment}`, "summary").slice(1)) options.progress.note(`lane ${lane}: ${line}`);
    options.progress.note(`lane ${lane}: stopped ${d.deployment}`);
  }
}

/** Where the new deployment goes and how the swap runs, from what the lane's old ones hold. */
function placeInLane(
  planOn: (nodes?: readonly string[]) => Plan,
  wanted: Plan,
  explicitNodes: boolean,
  session: ClusterSession,
  lane: { readonly name: string; readonly deployments: readonly DeploymentStatus[]; readonly replacing: readonly DeploymentStatus[]; readonly same: boolean },
): { plan: Plan; mode: SwapMode } {
  const replacingNames = new Set(lane.replacing.map((d) => d.deployment));
  const heldBy = new Map<string, string>();
  for (const d of lane.deployments) for (const n of runningNodes(d)) heldBy.set(n, d.deployment);
  // One name cannot run twice: the old version goes first.
  if (lane.same) return { plan: wanted, mode: "same" };
  if (explicitNodes) {
    const overlap = wanted.nodes.some((n) => replacingNames.has(heldBy.get(n.node) ?? ""));
    return { plan: wanted, mode: lane.replacing.length === 0 ? "first" : overlap ? "overlap" : "disjoint" };
  }
  const placed = placeSwap(session.cluster.nodes.map((n) => n.name), wanted.nodes.length, heldBy, replacingNames);
  if (!placed.ok) throw new UserError(`no room for ${wanted.deployment} in lane ${lane.name}: ${placed.message}`, "stop a deployment (launcher down NAME) or name the nodes with --nodes");
  return { plan: planOn(placed.nodes), mode: lane.replacing.length === 0 ? "first" : placed.mode };
}

/**
 * Puts a recipe in a lane. With free nodes the new deployment boots beside the old one, the lane
 * switches when it is ready, and the old one is drained and stopped: no downtime. Otherwise the
 * old one is stopped first and the lane answers "switching" until the new one is ready. A failed
 * boot leaves the lane on the old deployment whenever the old one is still up.
 *
 * `planOn(nodes)` plans the recipe on the named nodes (undefined: the nodes the user chose).
 */
export async function upInLane(planOn: (nodes?: readonly string[]) => Plan, explicitNodes: boolean, session: ClusterSession, options: LaneUpOptions): Promise<LaneUpResult> {
  const { lane, store, now } = options;
  // Until the new deployment's containers run, a daemon that stops (options.detach) leaves nothing
  // behind: it interrupts the steps before them like a signal (the boot itself is left, not undone).
  const early = options.detach === undefined ? options.signal : AbortSignal.any([options.signal, options.detach]);
  const { deployments, unreachable } = await abortable(clusterStatus(session, now()), early, `before lane ${lane} changed; nothing was started or stopped`);
  if (unreachable.length > 0) {
    throw new UserError(`cannot change lane ${lane}: ${unreachable.join(", ")} unreachable, so what runs there is unknown`, "bring the node back or remove it from the cluster file");
  }
  const wanted = planOn(undefined);
  const olds = deployments.filter((d) => d.lane === lane && d.deployment !== wanted.deployment);
  const same = deployments.find((d) => d.lane === lane && d.deployment === wanted.deployment);
  // Already running only when it serves this recipe with these options (nodes as asked, or where
  // it runs when none were named); anything else of this name in the lane is replaced below.
  const asked = same === undefined || explicitNodes ? wanted : planOn([...same.ranks].sort((a, b) => a.rank - b.rank).map((r) => r.node));
  if (same !== undefined && olds.length === 0 && judgeExisting(asked, same).same) {
    store.setLane(serving(lane, wanted.cluster, same, store.lane(lane)?.since ?? now().toISOString()));
    return { status: "already-running", deployment: same.deployment, endpoint: same.endpoint, served_model: same.served_model, seconds: 0, mode: "same", replaced: [] };
  }
  const replacing = [...olds, ...(same === undefined ? [] : [same])];
  const { plan, mode } = placeInLane(planOn, wanted, explicitNodes, session, { name: lane, deployments, replacing, same: same !== undefined });
  const blocking = fabricBlockers(options.findings, plan.nodes.map((n) => n.node));
  if (blocking.length > 0) throw fabricCheckFailed(blocking);
  const releaseName = holdOrBusy(store, [deploymentKey(plan.cluster, plan.deployment)], options.what, now);
  let claims: NodeClaims;
  try {
    claims = await options.claim(plan);
  } catch (e) {
    releaseName();
    throw e;
  }
  try {
    return await swapLane({ plan, mode, replacing, session, options, early, stoppedAny: false });
  } finally {
    await claims.release();
    releaseName();
  }
}

/** One swap of a lane, under its claims: what it runs and how far it got. */
interface Swap {
  readonly plan: Plan;
  readonly mode: SwapMode;
  readonly replacing: readonly DeploymentStatus[];
  readonly session: ClusterSession;
  readonly options: LaneUpOptions;
  /** The interrupt, and the daemon stopping, until the new deployment's containers run. */
  readonly early: AbortSignal;
  /** Has any old deployment begun to be stopped? */
  stoppedAny: boolean;
  /** The boot id of the new deployment once it serves: what an interrupt after that removes. */
  booted?: string | undefined;
}

/** The swap recorded from its start to its end, and on a failure the lane set back as far as it can be. */
async function swapLane(s: Swap): Promise<LaneUpResult> {
  const { plan, mode, replacing, options } = s;
  const at = (): string => options.now().toISOString();
  const swapId = options.store.beginSwap({
    lane: options.lane,
    mode,
    ...(replacing[0] === undefined ? {} : { from_deployment: replacing.map((d) => d.deployment).join(","), from_recipe: replacing.map((d) => d.recipe).join(",") }),
    to_deployment: plan.deployment,
    to_recipe: plan.recipe.id,
    started_at: at(),
  });
  const laneBefore = options.store.lane(options.lane);
  try {
    const result = mode === "first" || mode === "disjoint" ? await bootBeside(s) : await bootInPlace(s);
    options.store.endSwap(swapId, "ok", at());
    return { ...result, deployment: plan.deployment, mode, replaced: replacing.map((d) => d.deployment) };
  } catch (e) {
    // The daemon stopped and left the boot to the next one: the swap stays as it is (src/daemon/adopt.ts).
    if (e instanceof Detached) throw e;
    throw await swapFailed(s, e, swapId, laneBefore);
  }
}

const stopReplaced = (s: Swap, signal: AbortSignal): Promise<void> =>
  stopReplacedIn(s.session, s.replacing, { ...s.options, signal, cluster: s.plan.cluster }, () => (s.stoppedAny = true));

/** Free nodes: the new deployment boots beside the old ones, the lane switches once it serves, then the old ones go. */
async function bootBeside(s: Swap): Promise<UpResult> {
  const { plan, session, options } = s;
  const result = await recordedUp(plan, session, options, options.store, options.now);
  s.booted = result.boot;
  options.store.setLane(serving(options.lane, plan.cluster, servedOf(plan), options.now().toISOString()));
  if (s.mode === "disjoint") options.progress.note(`lane ${options.lane} now serves ${plan.deployment}`);
  await stopReplaced(s, options.signal);
  return result;
}

/** The new deployment needs the old one's nodes (or name): the lane switches, the old one goes, then the new one boots. */
async function bootInPlace(s: Swap): Promise<UpResult> {
  const { plan, session, options, early, replacing } = s;
  const { lane, store, now } = options;
  // Check everything but the nodes the old deployment frees before stopping it: a typo must
  // not cost the lane its model.
  if (options.push !== false) await ensureImage(plan.recipe.docker_image, plan.nodes.map((n) => dockerOf(session, n.node)), (t) => options.progress.note(t), early, clusterRoutes(session.cluster.nodes));
  await preflight(plan, session, early, new Set(replacing.map((d) => d.deployment)), undefined, options.judgeArgs);
  checkInterrupted(early, `before switching lane ${lane}: nothing was stopped`);
  store.setLane(switching(lane, plan.cluster, replacing[0], plan.deployment, now().toISOString()));
  options.progress.note(`lane ${lane} is switching: it answers 503 until ${plan.deployment} is ready`);
  await stopReplaced(s, early);
  // The image went out before the old deployment stopped: no second look.
  const result = await recordedUp(plan, session, { ...options, push: false }, store, now);
  store.setLane(serving(lane, plan.cluster, servedOf(plan), now().toISOString()));
  return result;
}

/** A swap that failed or was interrupted: recorded so, the lane set back (or emptied), and the error to throw. */
async function swapFailed(s: Swap, e: unknown, swapId: number, laneBefore: LaneRecord | undefined): Promise<unknown> {
  const { plan, options, replacing } = s;
  const { lane, store } = options;
  const at = (): string => options.now().toISOString();
  const outcome = s.early.aborted ? "interrupted" : "failed";
  const old = replacing[0];
  if (options.signal.aborted && s.booted !== undefined && !s.stoppedAny) {
    // Interrupted while the old one drained: the new one already serves, but the swap was
    // stopped and the old one still runs, so it is undone; nothing else is touched.
    const { outcomes } = await stopDeployments(await listNodes(s.session), [plan.deployment], { store, cluster: plan.cluster, now: options.now }, { graceSeconds: seconds(DEFAULTS.stopGrace), match: createdBy(s.booted) });
    store.setLane(restored(laneBefore, lane, plan.cluster, at()));
    const back = old === undefined ? `lane ${lane} is empty` : `lane ${lane} serves ${old.deployment} again`;
    const err = interruption(options.signal, `the swap of lane ${lane} was undone (the new ${plan.deployment}: ${formatRemoval(outcomes, `launcher down deployment/${plan.deployment}`, "summary").join("; ")}); ${back}; nothing was stopped`);
    store.endSwap(swapId, outcome, at(), err.message);
    return err;
  }
  store.endSwap(swapId, outcome, at(), e instanceof Error ? e.message : String(e));
  const next = afterFailedSwap(store.lane(lane), old, s.stoppedAny, plan.cluster, at());
  if (next !== undefined) store.setLane(next);
  if (next?.state !== "empty") return e;
  // The old deployment is gone (or going): the lane has nothing to serve.
  const empty = `lane ${lane} is now empty (its old deployment was stopped for this one)`;
  if (e instanceof RemoteError) return new RemoteError(e.node, `${e.message}; ${empty}`, e.detail);
  if (e instanceof Interrupted) return new Interrupted(e.signalName, `${e.what}; ${empty}`);
  return e;
}
