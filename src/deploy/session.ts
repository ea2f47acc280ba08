import type { Cluster, ClusterNode } from "../cluster/cluster.js";
import { defaultHome } from "../cluster/parse.js";
import { DockerClient } from "../remote/docker.js";
import { resolveSshDestination, sshTransport } from "../remote/ssh.js";
import type { ImageFactsCache } from "./image-check.js";

export interface ClusterSession {
  readonly cluster: Cluster;
  readonly docker: ReadonlyMap<string, DockerClient>;
  /** What earlier runs read of images, by ID (the store); none: every preflight reads them. */
  readonly images?: ImageFactsCache;
}

/**
 * Fills in what only the SSH config knows (the user and real host name behind an alias), so that
 * `~` and the API endpoint are right, then opens one Docker client per node.
 */
export async function openSession(cluster: Cluster): Promise<ClusterSession> {
  const nodes: ClusterNode[] = await Promise.all(
    cluster.nodes.map(async (n) => {
      if (n.user !== undefined && n.address !== undefined) return n;
      const resolved = await resolveSshDestination(n, cluster.ssh);
      const user = n.user ?? resolved.user;
      const home = n.home ?? defaultHome(user);
      const address = n.address ?? resolved.hostname;
      return {
        ...n,
        ...(user === undefined ? {} : { user }),
        ...(home === undefined ? {} : { home }),
        ...(address === undefined ? {} : { address }),
      };
    }),
  );
  const enriched: Cluster = { ...cluster, nodes };
  const docker = new Map(nodes.map((n) => [n.name, new DockerClient(sshTransport(n, cluster.ssh))]));
  return { cluster: enriched, docker };
}

export function dockerOf(session: ClusterSession, node: string): DockerClient {
  const d = session.docker.get(node);
  if (d === undefined) throw new Error(`no node ${node} in the session`);
  return d;
}
