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
 * Fills in what only the SSH config knows: the user SSH will log in as (for a node without one,
 * the user `ssh -G` prints, which is the user of ~/.ssh/config's matching Host block or else the
 * local user: openssh-portable readconf.c dump_client_config prints it first) and the real host
 * name behind an alias, so that `~`, the API endpoint and what is shown are right. It runs ssh
 * locally only: no node is contacted.
 */
export async function withSshDefaults(cluster: Cluster): Promise<Cluster> {
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
  return { ...cluster, nodes };
}

/** The cluster with withSshDefaults' values, and one Docker client per node. */
export async function openSession(cluster: Cluster): Promise<ClusterSession> {
  const enriched = await withSshDefaults(cluster);
  const nodes = enriched.nodes;
  const docker = new Map(nodes.map((n) => [n.name, new DockerClient(sshTransport(n, cluster.ssh))]));
  return { cluster: enriched, docker };
}

export function dockerOf(session: ClusterSession, node: string): DockerClient {
  const d = session.docker.get(node);
  if (d === undefined) throw new Error(`no node ${node} in the session`);
  return d;
}
