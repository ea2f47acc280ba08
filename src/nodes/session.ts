import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { Cluster, ClusterNode } from "../cluster/cluster.js";
import { defaultHome } from "../cluster/parse.js";
import { SshDocker, type Docker } from "../remote/docker.js";
import { resolveSshDestination, sshTransport } from "../remote/ssh.js";
import type { ImageFactsCache } from "./image-check.js";
import { tracedTransport } from "../remote/trace.js";

export interface ClusterSession {
  readonly cluster: Cluster;
  readonly docker: ReadonlyMap<string, Docker>;
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
  const head = nodes[0];
  if (head !== undefined) nodes[0] = await withAddressIp(head);
  return { ...cluster, nodes };
}

/** How long the head's name may take to resolve before the engine binds to the name itself. */
const RESOLVE_MS = 5_000;

/** dns.lookup's shape, as far as the bind address needs it: one address of the family asked (0: any). */
export type AddressLookup = (name: string, family: 0 | 4) => Promise<string>;

const systemLookup: AddressLookup = async (name, family) => (await lookup(name, { family })).address;

/**
 * A link-local IPv6 address (fe80::/10: a first group fe80 to febf) names a host only together
 * with an interface scope (`%eth0`, RFC 4007), and a scope found here names this machine's
 * interface, not the head's: neither is a bind address for the head.
 */
export const isLinkLocalV6 = (ip: string): boolean => isIP(ip) === 6 && /^fe[89ab][0-9a-f]:/i.test(ip);

/**
 * The address the engine binds to for `name`, as this machine resolves it: IPv4 first (the
 * address family most clusters route, and the one a dual-stack name's A record gives), then any
 * family; an unscoped link-local IPv6 is never used. Undefined when nothing usable resolves in
 * `ms`, and the name stays unresolved.
 */
export async function bindAddressOf(name: string, resolve: AddressLookup = systemLookup, ms = RESOLVE_MS): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((done) => (timer = setTimeout(() => done(undefined), ms)));
  const usable = (family: 0 | 4): Promise<string | undefined> =>
    resolve(name, family).then(
      (ip) => (isIP(ip) === 0 || isLinkLocalV6(ip) ? undefined : ip),
      () => undefined,
    );
  try {
    return await Promise.race([(async () => (await usable(4)) ?? (await usable(0)))(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The head's management address as this machine resolves it, which is where the gateway here
 * connects: the engine binds there (src/plan/api-address.ts). An address that is already an IP,
 * or a name that does not resolve in time to a usable address, is left as it is.
 */
async function withAddressIp(head: ClusterNode): Promise<ClusterNode> {
  const address = head.address ?? head.host;
  if (isIP(address.replace(/^\[|\]$/g, "")) !== 0) return head;
  const found = await bindAddressOf(address);
  return found === undefined ? head : { ...head, address_ip: found };
}

/** The cluster with withSshDefaults' values, and one Docker client per node. */
export async function openSession(cluster: Cluster): Promise<ClusterSession> {
  const enriched = await withSshDefaults(cluster);
  const nodes = enriched.nodes;
  const docker = new Map(nodes.map((n) => [n.name, new SshDocker(tracedTransport(sshTransport(n, cluster.ssh)))]));
  return { cluster: enriched, docker };
}

export function dockerOf(session: ClusterSession, node: string): Docker {
  const d = session.docker.get(node);
  if (d === undefined) throw new Error(`no node ${node} in the session`);
  return d;
}
