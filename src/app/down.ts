import { listNodes, parseTarget, targetDeployments, type Labelled } from "../nodes/labels.js";
import { stopDeployments, unreachableOf, type NodeOutcome, type StopRecord } from "../nodes/down.js";
import type { ClusterSession } from "../nodes/session.js";
import { afterDown } from "../lanes/lane-state.js";
import type { LaneRecord, StateStore } from "../store/store.js";

/** What `down` writes: each deployment's marks of being stopped, and the lane it names. */
export type DownStore = StopRecord["store"] & Pick<StateStore, "lane" | "setLane">;

/**
 * The store for as long as `fn` runs, closed after (the CLI's withStore). It is opened only once
 * the target is known: a name refused for fitting several deployments opens no store.
 */
export type StoreScope = <T>(fn: (store: DownStore) => Promise<T>) => Promise<T>;

export interface DownRequest {
  /** A deployment, lane or recipe name (src/nodes/labels.ts parseTarget). */
  readonly target: string | undefined;
  /** --all: every launcher deployment, and launcher's containers whose labels do not decode. */
  readonly all: boolean;
  readonly graceSeconds: number;
  readonly now: () => Date;
  /** Said of each container whose launcher labels do not decode, unless --all (which removes it). */
  readonly warn: (line: string) => void;
}

export interface DownResult {
  /** The deployments the target named. */
  readonly chosen: ReadonlySet<string>;
  /** What happened on each node. */
  readonly outcomes: readonly NodeOutcome[];
  /** The deployments recorded stopped: no node that may run them failed to answer. */
  readonly stopped: readonly string[];
  readonly unreachable: readonly Extract<NodeOutcome, { kind: "unreachable" }>[];
  /** The command that finishes the job once every node answers. */
  readonly again: string;
  /** The lane the target named, as it was recorded after the stop (emptied); undefined: left as it was. */
  readonly lane?: LaneRecord;
}

/** The lane a target may name: `lane/NAME`, or a bare name. */
const laneNamed = (target: string | undefined): string | undefined => {
  const t = target === undefined ? undefined : parseTarget(target);
  return t !== undefined && (t.kind === undefined || t.kind === "lane") ? t.name : undefined;
};

/**
 * `launcher down TARGET` or `--all` on the nodes of `session`: the target is resolved from the
 * containers' labels alone (a name that fits several deployments is refused, UserError, before
 * anything is stopped), each deployment it names is stopped on every node and recorded, and a lane
 * it names is emptied once no node that did not answer may still run it.
 */
export async function down(session: ClusterSession, request: DownRequest, withStore: StoreScope): Promise<DownResult> {
  const { target, all, graceSeconds, now } = request;
  const listing = await listNodes(session);
  const found = listing.flatMap((l) => (l.reachable ? l.containers : []));
  if (!all) for (const l of listing) for (const p of l.reachable ? l.undecodable : []) request.warn(p);
  const chosen = targetDeployments(all ? undefined : target, found, "down");
  const nodesOf = (name: string): readonly string[] | undefined => found.find((c) => c.labels.deployment === name && c.labels.nodes !== undefined)?.labels.nodes;
  const how = { graceSeconds, match: (c: Labelled) => chosen.has(c.labels.deployment), strays: all, nodesOf };
  const laneName = laneNamed(target);
  return withStore(async (store) => {
    const { outcomes, stopped } = await stopDeployments(listing, [...chosen], { store, cluster: session.cluster.name, now }, how);
    const unreachable = unreachableOf(outcomes);
    const lane = laneName === undefined ? undefined : afterDown(store.lane(laneName), unreachable.length > 0, now().toISOString());
    if (lane !== undefined) store.setLane(lane);
    return { chosen, outcomes, stopped, unreachable, again: `launcher down ${all || target === undefined ? "--all" : target}`, ...(lane === undefined ? {} : { lane }) };
  });
}
