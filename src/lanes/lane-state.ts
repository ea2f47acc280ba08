import type { Plan } from "../plan/plan.js";
import type { LaneRecord } from "../store/store.js";

/*
 * A lane's state changes, each a pure function from what happened to the record the store keeps
 * (src/store/store.ts setLane). The one change not made here is the store's own: a deployment
 * recorded stopped empties the lane that served it (deploymentStopped, in the same write).
 */

/** What a lane serves, as its record names it. */
export interface Served {
  readonly deployment: string;
  readonly recipe: string;
  readonly served_model: string;
}

/** What a plan serves once it is ready. */
export const servedOf = (plan: Plan): Served => ({ deployment: plan.deployment, recipe: plan.recipe.id, served_model: plan.served_model });

/** The lane serves `d` from `since` on. */
export const serving = (lane: string, cluster: string, d: Served, since: string): LaneRecord => ({
  name: lane,
  cluster,
  deployment: d.deployment,
  recipe: d.recipe,
  served_model: d.served_model,
  state: "serving",
  since,
});

/** The lane serves nothing. */
export const empty = (lane: string, cluster: string, since: string): LaneRecord => ({ name: lane, cluster, state: "empty", since });

/**
 * The old deployment is about to be stopped for `to`: the lane answers 503 until `to` is ready,
 * and still names what it served (`from`) for the gateway's message.
 */
export const switching = (lane: string, cluster: string, from: Served | undefined, to: string, since: string): LaneRecord => ({
  name: lane,
  cluster,
  ...(from === undefined ? {} : { deployment: from.deployment, recipe: from.recipe, served_model: from.served_model }),
  state: "switching",
  switching_to: to,
  since,
});

/** A swap undone after its new deployment served (interrupted while the old one drained): the lane as it was before. */
export const restored = (before: LaneRecord | undefined, lane: string, cluster: string, at: string): LaneRecord => before ?? empty(lane, cluster, at);

/**
 * A swap that failed, with the lane as the store has it now: still switching with nothing stopped
 * yet, it serves the old deployment again (since when it served it); switching with the old one
 * stopped (or going), it is empty. Undefined: the lane is left as it is (it never switched).
 */
export function afterFailedSwap(now: LaneRecord | undefined, old: Served | undefined, stoppedAny: boolean, cluster: string, at: string): LaneRecord | undefined {
  if (now?.state !== "switching") return undefined;
  if (!stoppedAny && old !== undefined) return serving(now.name, cluster, old, now.since);
  return empty(now.name, cluster, at);
}

/**
 * An adopted boot that failed: a lane switching to it had its old deployment stopped before the
 * boot started, so it has nothing to serve. Undefined: the lane is left as it is.
 */
export const afterFailedAdoptedBoot = (now: LaneRecord | undefined, deployment: string, at: string): LaneRecord | undefined =>
  now?.state === "switching" && now.switching_to === deployment ? empty(now.name, now.cluster, at) : undefined;

/**
 * `launcher down` named the lane: it is emptied even when nothing ran in it (its launcher killed
 * mid-swap, say), but not while a node that did not answer may still run it. Undefined: left as it is.
 */
export const afterDown = (now: LaneRecord | undefined, anyUnreachable: boolean, at: string): LaneRecord | undefined =>
  now !== undefined && now.state !== "empty" && !anyUnreachable ? empty(now.name, now.cluster, at) : undefined;

/**
 * A lane as the gateway routes it: one left switching by an `up` that died (SIGKILL, a crash; its
 * lane lock no longer held by a live process, asked only of a switching lane) is served as it
 * was, else its 503 would last forever.
 */
export const asRouted = (l: LaneRecord, swapAlive: () => boolean): LaneRecord => (l.state === "switching" && !swapAlive() ? { ...l, state: "serving" } : l);
