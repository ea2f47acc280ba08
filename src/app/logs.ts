import { UserError } from "../config/errors.js";
import type { ContainerInfo, Docker } from "../remote/docker.js";
import { listNodes, targetDeployments } from "../nodes/labels.js";
import type { ClusterSession } from "../nodes/session.js";

/** One container whose log `logs` reads, on its node. */
export interface LogSource {
  readonly node: string;
  readonly docker: Docker;
  readonly c: ContainerInfo;
}

/** What `launcher logs TARGET` reads: the deployments the target names, their containers, and the nodes that could not be read. */
export interface LogSources {
  readonly chosen: ReadonlySet<string>;
  readonly sources: readonly LogSource[];
  /** Each node that could not be read, with why: `n2 (SSH unreachable: ...)`. */
  readonly lost: readonly string[];
}

/**
 * The containers `launcher logs TARGET [--node NODE]` reads, the target resolved from the labels
 * as `down` resolves it (a name that fits several deployments is refused, UserError). A node
 * that could not be read is in `lost`, and what it logged is unknown, never "nothing".
 */
export async function logSources(session: ClusterSession, target: string, node: string | undefined): Promise<LogSources> {
  if (node !== undefined && !session.docker.has(node)) {
    throw new UserError(`no node ${node} in ${session.cluster.file}`, `nodes: ${[...session.docker.keys()].join(", ")}`);
  }
  const listing = await listNodes(session, node === undefined ? undefined : new Set([node]));
  const chosen = targetDeployments(target, listing.flatMap((l) => (l.reachable ? l.containers : [])), "logs");
  const sources = listing.flatMap((l) => (l.reachable ? l.containers.filter((c) => chosen.has(c.labels.deployment)).map((c) => ({ node: l.node, docker: l.docker, c: c.c })) : []));
  const lost = listing.flatMap((l) => (l.reachable ? [] : [`${l.node} (${l.reason})`]));
  return { chosen, sources, lost };
}
