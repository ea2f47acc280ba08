import { RemoteError, UserError } from "../config/errors.js";
import type { Plan } from "../plan/plan.js";
import type { StateStore, SwapMode } from "../store/store.js";
import type { LaneUpResult } from "../boot/up-events.js";
import { formatRemoval, fullyStopped, removeContainers, unreachableOf } from "../nodes/down.js";
import { adapterOf } from "../engine/registry.js";
import { drain } from "./drain.js";
import { recordedUp } from "./launch.js";
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
  /** Claims the plan's nodes on the nodes themselves, or fails with "busy" (./claims.ts). */
  readonly claim: (plan: Plan) => Promise<NodeClaims>;
  /** What the fabric probe found; those on the nodes finally chosen stop the swap. */
  readonly findings: readonly Finding[];
}


const STOP_GRACE_SECONDS = 10;

function runningNodes(d: DeploymentStatus): string[] {
  return d.ranks.filter((r) => r.state === "running").map((r) => r.node);
}

/**
 * Drains each deployment a lane's new one replaces (its running requests get `drainMs`), then
 * stops it on every node; `stopping` is told just before the first removal. Also what a daemon
 * does for a swap whose boot it adopted (src/app/adopt.ts).
 */
export async function stopReplacedIn(
  session: ClusterSession,
  replacing: readonly DeploymentStatus[],
  options: Pick<LaneUpOptions, "lane" | "store" | "now" | "drainMs" | "signal" | "progress"> & { readonly cluster: string },
  stopping: () => void = () => undefined,
): Promise<void> {
  const { lane, store } = options;
  for (const d of replacing) {
    options.progress.note(`lane ${lane}: draining ${d.deployment} (up to ${Math.round(options.drainMs / 1000)} s for running requests) ...`);
    const drained = await drain(d.endpoint, options.drainMs, options.signal, adapterOf(d.engine), store.engineKey(options.cluster, d.deployment));
    if (!drained.drained) options.progress.note(`lane ${lane}: ${d.deployment} still runs ${drained.running} request(s); stopping it anyway`);
    checkInterrupted(options.signal, `before stopping ${d.deployment}: nothing was stopped`);
    stopping();
    const outcomes = await removeContainers(session, (c) => c.labels.deployment === d.deployment, STOP_GRACE_SECONDS);
    // Recorded stopped only when it is: a node that did not answer may still run it.
    if (fullyStopped(outcomes, d.deployment, () => [...new Set(d.ranks.map((r) => r.node))])) store.deploymentStopped(options.cluster, d.deployment, options.now().toISOString());
    else for (const line of formatRemoval(outcomes, `launcher down deployment/${d.deployment}`, "summary").slice(1)) options.progress.note(`lane ${lane}: ${line}`);
    options.progress.note(`lane ${lane}: stopped ${d.deployment}`);
  }
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
  const at = (): string => now().toISOString();
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
    store.setLane({ name: lane, cluster: wanted.cluster, deployment: same.deployment, recipe: same.recipe, served_model: same.served_model, state: "serving", since: store.lane(lane)?.since ?? at() });
    return { status: "already-running", deployment: same.deployment, endpoint: same.endpoint, served_model: same.served_model, seconds: 0, mode: "same", replaced: [] };
  }
  const replacing = [...olds, ...(same === undefined ? [] : [same])];
  const replacingNames = new Set(replacing.map((d) => d.deployment));

  let plan = wanted;
  let mode: SwapMode;
  const heldBy = new Map<string, string>();
  for (const d of deployments) for (const n of runningNodes(d)) heldBy.set(n, d.deployment);
  if (same !== undefined) {
    // One name cannot run twice: the old version goes first.
    mode = "same";
  } else if (explicitNodes) {
    const overlap = wanted.nodes.some((n) => replacingNames.has(heldBy.get(n.node) ?? ""));
    mode = replacing.length === 0 ? "first" : overlap ? "overlap" : "disjoint";
  } else {
    const placed = placeSwap(session.cluster.nodes.map((n) => n.name), wanted.nodes.length, heldBy, replacingNames);
    if (!placed.ok) throw new UserError(`no room for ${wanted.deployment} in lane ${lane}: ${placed.message}`, "stop a deployment (launcher down NAME) or name the nodes with --nodes");
    plan = planOn(placed.nodes);
    mode = replacing.length === 0 ? "first" : placed.mode;
  }
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
  const swapId = store.beginSwap({
    lane,
    mode,
    ...(replacing[0] === undefined ? {} : { from_deployment: replacing.map((d) => d.deployment).join(","), from_recipe: replacing.map((d) => d.recipe).join(",") }),
    to_deployment: plan.deployment,
    to_recipe: plan.recipe.id,
    started_at: at(),
  });
  const laneServing = (): void =>
    store.setLane({ name: lane, cluster: plan.cluster, deployment: plan.deployment, recipe: plan.recipe.id, served_model: plan.served_model, state: "serving", since: at() });
  const laneBefore = store.lane(lane);
  let stoppedAny = false;
  /** The boot id of the new deployment once it serves: what an interrupt after that removes. */
  let booted: string | undefined;
  const notInterrupted = (what: string): void => checkInterrupted(early, `before ${what}: nothing was stopped`);
  const stopReplaced = (signal: AbortSignal): Promise<void> => stopReplacedIn(session, replacing, { ...options, signal, cluster: plan.cluster }, () => (stoppedAny = true));

  try {
    if (mode === "first" || mode === "disjoint") {
      const result = await recordedUp(plan, session, options, store, now);
      booted = result.boot;
      laneServing();
      if (mode === "disjoint") options.progress.note(`lane ${lane} now serves ${plan.deployment}`);
      await stopReplaced(options.signal);
      store.endSwap(swapId, "ok", at());
      return { ...result, deployment: plan.deployment, mode, replaced: replacing.map((d) => d.deployment) };
    }
    // Check everything but the nodes the old deployment frees before stopping it: a typo must
    // not cost the lane its model.
    if (options.push !== false) await ensureImage(plan.recipe.docker_image, plan.nodes.map((n) => dockerOf(session, n.node)), (t) => options.progress.note(t), early, clusterRoutes(session.cluster.nodes));
    await preflight(plan, session, early, replacingNames);
    notInterrupted(`switching lane ${lane}`);
    store.setLane({
      name: lane,
      cluster: plan.cluster,
      ...(replacing[0] === undefined ? {} : { deployment: replacing[0].deployment, recipe: replacing[0].recipe, served_model: replacing[0].served_model }),
      state: "switching",
      switching_to: plan.deployment,
      since: at(),
    });
    options.progress.note(`lane ${lane} is switching: it answers 503 until ${plan.deployment} is ready`);
    await stopReplaced(early);
    // The image went out before the old deployment stopped: no second look.
    const result = await recordedUp(plan, session, { ...options, push: false }, store, now);
    laneServing();
    store.endSwap(swapId, "ok", at());
    return { ...result, deployment: plan.deployment, mode, replaced: replacing.map((d) => d.deployment) };
  } catch (e) {
    // The daemon stopped and left the boot to the next one: the swap stays as it is (src/app/adopt.ts).
    if (e instanceof Detached) throw e;
    const outcome = early.aborted ? "interrupted" : "failed";
    const old = replacing[0];
    if (options.signal.aborted && booted !== undefined && !stoppedAny) {
      // Interrupted while the old one drained: the new one already serves, but the swap was
      // stopped and the old one still runs, so it is undone; nothing else is touched.
      const removed = await removeContainers(session, createdBy(booted), STOP_GRACE_SECONDS);
      if (unreachableOf(removed).length === 0) store.deploymentStopped(plan.cluster, plan.deployment, at());
      if (laneBefore === undefined) store.setLane({ name: lane, cluster: plan.cluster, state: "empty", since: at() });
      else store.setLane(laneBefore);
      const back = old === undefined ? `lane ${lane} is empty` : `lane ${lane} serves ${old.deployment} again`;
      const err = interruption(options.signal, `the swap of lane ${lane} was undone (the new ${plan.deployment}: ${formatRemoval(removed, `launcher down deployment/${plan.deployment}`, "summary").join("; ")}); ${back}; nothing was stopped`);
      store.endSwap(swapId, outcome, at(), err.message);
      throw err;
    }
    store.endSwap(swapId, outcome, at(), e instanceof Error ? e.message : String(e));
    const laneNow = store.lane(lane);
    if (laneNow?.state === "switching" && !stoppedAny && old !== undefined) {
      // Nothing was stopped yet: the lane goes back to what it served.
      store.setLane({ name: lane, cluster: plan.cluster, deployment: old.deployment, recipe: old.recipe, served_model: old.served_model, state: "serving", since: laneNow.since });
    } else if (laneNow?.state === "switching") {
      // The old deployment is gone (or going): the lane has nothing to serve.
      store.setLane({ name: lane, cluster: plan.cluster, state: "empty", since: at() });
      const empty = `lane ${lane} is now empty (its old deployment was stopped for this one)`;
      if (e instanceof RemoteError) throw new RemoteError(e.node, `${e.message}; ${empty}`, e.detail);
      if (e instanceof Interrupted) throw new Interrupted(e.signalName, `${e.what}; ${empty}`);
    }
    throw e;
  } finally {
    await claims.release();
    releaseName();
  }
}
