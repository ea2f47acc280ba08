import { DEPLOYMENT_LABEL } from "../contract/deployment.js";
import { listNodes, reasonOf, type Labelled, type NodeListing } from "./labels.js";
import type { ClusterSession } from "./session.js";
import type { StateStore } from "../store/store.js";
import type { Docker } from "../remote/docker.js";
import { stopNodeGuards } from "../memory/node-guard-shell.js";

export interface Removed {
  readonly node: string;
  readonly container: string;
  readonly deployment: string;
  readonly wasRunning: boolean;
}

/** What stopping did on one node: its containers are gone, or it could not be reached. */
export type NodeOutcome =
  | { readonly node: string; readonly kind: "removed"; readonly removed: readonly Removed[] }
  | { readonly node: string; readonly kind: "unreachable"; readonly reason: string; readonly deployments: readonly string[] };

/**
 * Stops (SIGTERM, a grace period, then kill) and removes the listed containers that `match`, on
 * every node in parallel. Labels decide what matches, so it works without any local state; a node
 * that cannot be reached is said so, and a later run finishes there.
 */
export async function removeListed(
  listing: readonly NodeListing[],
  match: (c: Labelled) => boolean,
  graceSeconds: number,
  strays = false,
  /** Up to one container per node whose last log lines are read in the same round trip as its node's removal (no grace then): a restart's blame and root cause. */
  lastWords?: { readonly containers: ReadonlyMap<string, string>; readonly tail: number; readonly heard: (node: string, lines: readonly string[]) => void },
): Promise<NodeOutcome[]> {
  return Promise.all(
    listing.map(async (l): Promise<NodeOutcome> => {
      if (!l.reachable) return { node: l.node, kind: "unreachable", reason: l.reason, deployments: [] };
      const removed = [
        ...l.containers.filter(match).map((c) => ({ node: l.node, container: c.c.name, deployment: c.labels.deployment, wasRunning: c.c.running })),
        // `--all` means every container that says it is launcher's, readable labels or not.
        ...(strays ? l.strays.map((c) => ({ node: l.node, container: c.name, deployment: c.labels[DEPLOYMENT_LABEL] ?? "?", wasRunning: c.running })) : []),
      ];
      try {
        const names = removed.map((r) => r.container);
        const reading = lastWords?.containers.get(l.node);
        const guards = removeGuards(l.docker, removed);
        if (lastWords !== undefined && reading !== undefined) lastWords.heard(l.node, await l.docker.logsThenRemove(reading, lastWords.tail, names));
        else await l.docker.stopAndRemove(names, graceSeconds);
        await guards;
        return { node: l.node, kind: "removed", removed };
      } catch (e) {
        return { node: l.node, kind: "unreachable", reason: reasonOf(e), deployments: [...new Set(removed.map((r) => r.deployment))] };
      }
    }),
  );
}

/**
 * The guards on the node itself (src/memory/node-guard.ts) of the deployments whose containers go:
 * ended and removed in the same moment as their containers. A guard missed here (the node stopped
 * answering between the listing and this) ends by itself once its containers are gone.
 */
async function removeGuards(docker: Docker, removed: readonly Removed[]): Promise<void> {
  if (removed.length === 0) return;
  await stopNodeGuards(docker.transport, removed.map((r) => r.deployment)).catch(() => undefined);
}

/** What a stop is recorded in: the store's marks of a deployment being stopped and stopped. */
export interface StopRecord {
  readonly store: Pick<StateStore, "deploymentStopping" | "deploymentStopped">;
  readonly cluster: string;
  readonly now: () => Date;
}

export interface StopHow {
  readonly graceSeconds: number;
  /** Which containers go (default: every container of the named deployments). */
  readonly match?: (c: Labelled) => boolean;
  /** `--all`: launcher's containers whose labels cannot be read go too. */
  readonly strays?: boolean;
  /** The nodes each deployment runs on, from its labels (see fullyStopped); default: unknown, so any node that does not answer may run it. */
  readonly nodesOf?: (deployment: string) => readonly string[] | undefined;
}

/**
 * Stops deployments on every node and records it, the one way `down`, a lane swap and a cancelled
 * restart do it: each is marked stopping before anything is removed (a daemon supervising it must
 * not take the removal for a failure and boot it again), and stopped once no node that may run it
 * failed to answer. The deployments recorded stopped are returned with the removal's outcomes.
 */
export async function stopDeployments(listing: readonly NodeListing[], names: readonly string[], record: StopRecord, how: StopHow): Promise<{ outcomes: NodeOutcome[]; stopped: string[] }> {
  const { store, cluster, now } = record;
  for (const name of names) store.deploymentStopping(cluster, name, now().toISOString());
  const outcomes = await removeListed(listing, how.match ?? ((c) => names.includes(c.labels.deployment)), how.graceSeconds, how.strays === true);
  const stopped = names.filter((name) => fullyStopped(outcomes, name, how.nodesOf ?? (() => undefined)));
  const at = now().toISOString();
  for (const name of stopped) store.deploymentStopped(cluster, name, at);
  return { outcomes, stopped };
}

/** Lists the nodes and removes what matches: rollbacks, lane swaps, the demo's teardown (with strays). */
export async function removeContainers(session: ClusterSession, match: (c: Labelled) => boolean, graceSeconds: number, strays = false): Promise<NodeOutcome[]> {
  return removeListed(await listNodes(session), match, graceSeconds, strays);
}

export const removedOf = (outcomes: readonly NodeOutcome[]): Removed[] => outcomes.flatMap((o) => (o.kind === "removed" ? o.removed : []));
export const unreachableOf = (outcomes: readonly NodeOutcome[]): Extract<NodeOutcome, { kind: "unreachable" }>[] =>
  outcomes.filter((o): o is Extract<NodeOutcome, { kind: "unreachable" }> => o.kind === "unreachable");

/**
 * Is this deployment gone from every node? Not when one of its nodes (from its labels; any node
 * when the labels do not say) could not be reached.
 */
export function fullyStopped(outcomes: readonly NodeOutcome[], deployment: string, nodesOf: (deployment: string) => readonly string[] | undefined): boolean {
  const nodes = nodesOf(deployment);
  return unreachableOf(outcomes).every((u) => !u.deployments.includes(deployment) && nodes !== undefined && !nodes.includes(u.node));
}

/**
 * What stopping did, as `down` prints it (a line per container) and a rollback reports it (one
 * summary line): then every node that could not be reached, with the reason and the command that
 * finishes there once it answers.
 */
export function formatRemoval(outcomes: readonly NodeOutcome[], again: string, detail: "per-container" | "summary"): string[] {
  const removed = removedOf(outcomes);
  const lines =
    detail === "summary"
      ? [`removed ${removed.length} container${removed.length === 1 ? "" : "s"} (${removed.map((r) => `${r.node}/${r.container}`).join(", ") || "none"})`]
      : removed.map((r) => `stopped ${r.deployment}: ${r.node} ${r.container}${r.wasRunning ? "" : " (had already exited)"}`);
  for (const u of unreachableOf(outcomes)) {
    lines.push(`NOT stopped on ${u.node}: unreachable (${u.reason}); what runs there stays until \`${again}\` is run again once it answers`);
  }
  return lines;
}
