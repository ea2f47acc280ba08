import { RemoteError, UserError } from "../config/errors.js";
import { decodeError, type UpEvent } from "../boot/up-events.js";
import type { StopAnswer, StopNode, StopRequest } from "../contract/control-api.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import { down, type DownResult, type DownStore } from "../app/down.js";
import type { NodeOutcome } from "../nodes/down.js";
import type { ClusterSession } from "../nodes/session.js";
import type { StateStore } from "../store/store.js";
import type { BootEntry, BootRegistry } from "../supervise/boots.js";
import type { Snapshot } from "./discovery.js";

/**
 * The control API's stop of a deployment (POST CONTROL_ROUTES.stop): `launcher down` as the CLI
 * runs it (src/app/down.ts), on the session of the cluster the daemon watches the deployment on,
 * after cancelling a boot of it the daemon runs (its rollback), as the CLI's `down` does. The page
 * and the CLI stop through this one path.
 */

/** What a stop comes to: the answer, or a refusal the route sends with its status. */
export type StopOutcome =
  | { readonly kind: "answer"; readonly answer: StopAnswer }
  | { readonly kind: "refused"; readonly status: 400 | 404 | 409; readonly code: string; readonly message: string; readonly hint?: string };

export type Stopper = (name: string, request: StopRequest) => Promise<StopOutcome>;

/** What a stop reads and runs on. */
export interface StopParts {
  readonly discovery: { snapshot(): Snapshot };
  readonly registry: Pick<BootRegistry, "find">;
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  readonly store: DownStore & Pick<StateStore, "lanes">;
  readonly now: () => Date;
  readonly log: (line: string) => void;
}

/** A node's outcome as the answer says it: a node not reached is never said stopped. */
export function stopNode(o: NodeOutcome): StopNode {
  if (o.kind === "unreachable") return { node: o.node, outcome: "unreachable", reason: o.reason };
  if (o.removed.length === 0) return { node: o.node, outcome: "nothing" };
  return { node: o.node, outcome: "removed", containers: o.removed.map((r) => ({ container: r.container, deployment: r.deployment, was_running: r.wasRunning })) };
}

/** Back from the answer to the outcomes `down` prints (the CLI renders a daemon's stop as its own). */
export function outcomeOf(n: StopNode): NodeOutcome {
  if (n.outcome === "unreachable") return { node: n.node, kind: "unreachable", reason: n.reason, deployments: [] };
  const removed = n.outcome === "nothing" ? [] : n.containers.map((c) => ({ node: n.node, container: c.container, deployment: c.deployment, wasRunning: c.was_running }));
  return { node: n.node, kind: "removed", removed };
}

/** A cancelled boot's final event as the answer says it: rolled back (with its report lines) or ready after all. */
export function cancelledOf(final: UpEvent): NonNullable<StopAnswer["cancelled"]> {
  const ended = final.type === "error" ? decodeError(final.error) : undefined;
  const detail = ended instanceof RemoteError ? (ended.detail ?? "") : "";
  return {
    outcome: final.type === "error" ? "rolled_back" : "ready",
    message: ended?.message ?? "it had become ready",
    rollback: detail.split("\n").filter((l) => l.startsWith("rolled back:") || l.startsWith("NOT stopped")),
    event: { ...final },
  };
}

/**
 * The answer from down's result: `stopped` when no node that answered holds the deployment and
 * none that may run it failed to answer (down then recorded it stopped); `again` only when a node
 * did not answer.
 */
export function stopAnswer(name: string, cluster: string, result: DownResult, emptied: string | undefined, cancelled?: UpEvent): StopAnswer {
  // Not among what down found (a cancelled boot's rollback removed it all): gone, if every node answered.
  const stopped = result.chosen.has(name) ? result.stopped.includes(name) : result.unreachable.length === 0;
  return {
    deployment: name,
    cluster,
    stopped,
    deployments: [...result.chosen].sort(),
    ...(cancelled === undefined ? {} : { cancelled: cancelledOf(cancelled) }),
    nodes: result.outcomes.map(stopNode),
    ...(emptied === undefined ? {} : { lane: emptied }),
    ...(result.unreachable.length === 0 ? {} : { again: result.again }),
  };
}

/** The one cluster `name` is seen on (discovery's last poll, else the boot the daemon runs), or why not. */
export function clusterOf(snapshot: Snapshot, name: string, asked: string | undefined, boot: BootEntry | undefined): { cluster: string } | Extract<StopOutcome, { kind: "refused" }> {
  const seen = new Set(snapshot.deployments.filter((d) => d.deployment === name).map((d) => d.cluster));
  if (boot !== undefined) seen.add(boot.identity.cluster);
  const clusters = [...seen].filter((c) => asked === undefined || c === asked).sort();
  if (clusters.length === 1) return { cluster: clusters[0] as string };
  const quoted = JSON.stringify(name.slice(0, 200));
  if (clusters.length === 0) return { kind: "refused", status: 404, code: "no_deployment", message: `the daemon sees no deployment ${quoted}${asked === undefined ? "" : ` on ${asked}`} (in its last poll, nor booting)` };
  return { kind: "refused", status: 400, code: "ambiguous_deployment", message: `${name} runs on ${clusters.join(" and ")}`, hint: "name the cluster (its name in the request's cluster field, or launcher down -c CLUSTER)" };
}

/** The stop of a deployment the daemon sees, cancelling its boot first when the daemon runs one. */
export function stopper(parts: StopParts): Stopper {
  return async (name, request) => {
    const running = parts.registry.find(name);
    const boot = running?.running === true ? running : undefined;
    const where = clusterOf(parts.discovery.snapshot(), name, request.cluster, boot);
    if ("kind" in where) return where;
    const session = await parts.session(where.cluster);
    if (session === undefined) return { kind: "refused", status: 404, code: "no_cluster", message: `the daemon no longer watches ${where.cluster}` };
    const cancelled = boot === undefined ? undefined : await boot.cancel("launcher down");
    const serving = parts.store.lanes().filter((l) => l.cluster === where.cluster && l.deployment === name && l.state === "serving");
    const target = request.bare === true ? name : `deployment/${name}`;
    const graceSeconds = request.grace_seconds ?? seconds(DEFAULTS.stopGrace);
    let result: DownResult;
    try {
      result = await down(session, { target, all: false, graceSeconds, now: parts.now, warn: parts.log }, (fn) => fn(parts.store));
    } catch (e) {
      // down's own refusal, before it stops anything: a bare name that fits several deployments.
      if (e instanceof UserError) return { kind: "refused", status: 409, code: "target_refused", message: e.message, ...(e.hint === undefined ? {} : { hint: e.hint }) };
      throw e;
    }
    // The store empties a lane whose deployment it records stopped; down empties a lane the target names.
    const emptied = result.lane?.name ?? serving.find((l) => parts.store.lane(l.name)?.state === "empty")?.name;
    const answer = stopAnswer(name, where.cluster, result, emptied, cancelled);
    parts.log(`stopped ${target} on ${where.cluster} for a client (launcher down): ${answer.stopped ? "no container of it is left" : `NOT finished, ${result.unreachable.map((u) => u.node).join(", ")} did not answer`}`);
    return { kind: "answer", answer };
  };
}
