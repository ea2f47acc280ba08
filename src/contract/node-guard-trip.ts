/**
 * A node's own memory guard (src/memory/node-guard.ts) killed a deployment's containers there: the
 * record the daemon keeps once it read the guard's report (src/supervise/node-guard-reader.ts),
 * what `status`, `history`, the read API and a restart's reason say of it.
 */

import { gibText } from "./units.js";

/**
 * How many of the newest trips a reader takes: status reads a whole cluster's, for every launch
 * that runs there; the read API one deployment's, for its one launch. Enough for the launches
 * that run now (an older launch's trip is history's).
 */
export const GUARD_TRIPS_OF_CLUSTER = 200;
export const GUARD_TRIPS_OF_DEPLOYMENT = 20;

/** The restart reason (and the supervisor's failure kind) of a group its node's own guard killed. */
export const NODE_GUARD_REASON = "node-guard";

export interface NodeGuardTripRecord {
  readonly cluster: string;
  readonly deployment: string;
  /** The launch it killed (its launcher.boot label; '' when it carries none). */
  readonly boot: string;
  readonly node: string;
  /** ISO, the node's own clock: when its guard killed. */
  readonly at: string;
  readonly available_kib: number;
  readonly floor_kib: number;
  /** How many containers the guard killed on its node. */
  readonly killed: number;
  /** The other nodes on which the daemon then killed what ran of the deployment (nothing of it runs there now). */
  readonly stopped: readonly string[];
  /** The other nodes the daemon could not reach: what ran there dies by losing its peer, or still runs. */
  readonly unreached: readonly string[];
  readonly message: string;
  /** ISO, the daemon's clock: when it read the trip. */
  readonly read_at: string;
}

/** "node guard on n2 killed NAME at T: MemAvailable X GiB below its floor Y GiB". */
export function nodeGuardTripMessage(node: string, deployment: string, atMs: number, availableKiB: number, floorKiB: number): string {
  return `node guard on ${node} killed ${deployment} at ${new Date(atMs).toISOString()}: MemAvailable ${gibText(availableKiB)} GiB below its floor ${gibText(floorKiB)} GiB`;
}

/** The message, then what became of the other nodes: a node not reached is never said to be stopped. */
export function nodeGuardTripWords(r: Pick<NodeGuardTripRecord, "message" | "stopped" | "unreached">): string {
  const stopped = r.stopped.length === 0 ? "" : `; killed on ${r.stopped.join(", ")} too`;
  const unreached = r.unreached.length === 0 ? "" : `; ${r.unreached.join(", ")} could not be reached (what ran there is not known to be stopped)`;
  return `${r.message}${stopped}${unreached}`;
}

/**
 * The trips that speak of the deployments the nodes show now: each deployment's newest one, of
 * the launch its containers carry. A trip of an earlier launch says nothing of what runs now.
 */
export function currentNodeGuardTrips(deployments: readonly { readonly deployment: string; readonly boot?: string }[], trips: readonly NodeGuardTripRecord[]): Map<string, NodeGuardTripRecord> {
  const out = new Map<string, NodeGuardTripRecord>();
  for (const d of deployments) {
    const mine = trips.filter((t) => t.deployment === d.deployment && t.boot === (d.boot ?? "")).sort((a, b) => b.at.localeCompare(a.at))[0];
    if (mine !== undefined) out.set(d.deployment, mine);
  }
  return out;
}
