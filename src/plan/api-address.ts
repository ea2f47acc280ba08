import { isIP } from "node:net";
import type { Cluster, ClusterNode } from "../cluster/cluster.js";

/** Where the head's engine listens, and the URL launcher's HTTP (readiness, drain, gateway, eval, bench) uses to reach it. */
export interface ApiAddress {
  /** The address the engine binds to (the engine's adapter turns it into its own flag). */
  readonly bind: string;
  /** `http://HOST:PORT`, without a path: the deployment's `endpoint` label. */
  readonly endpoint: string;
}

const LOOPBACK = "127.0.0.1";
const ANY = "0.0.0.0";

/**
 * The head's management address: where launcher's HTTP reaches it. The cluster file's `address`,
 * else (filled in by withSshDefaults from `ssh -G`) the SSH config's HostName, else `host`.
 */
export const managementAddress = (head: ClusterNode): string => head.address ?? head.host;

/** An address as written (`[fd00::1]` is how the cluster file's `address` takes IPv6) without URL brackets. */
const bare = (address: string): string => (address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address);

/** The address as it goes into a URL: IPv6 in brackets (RFC 3986, 3.2.2). */
const urlHost = (address: string): string => (isIP(bare(address)) === 6 ? `[${bare(address)}]` : address);

/**
 * The one home of the head's API address. The engine listens where launcher reaches it, and only
 * there: the engine's key may guard only its API routes (its adapter's EngineFlags.apiKey says
 * where it is checked), so an engine on every address may hand its other routes (metrics,
 * health, tokenizing) to anyone on the network, past the gateway.
 * - "management" (default): the management address (as this machine resolves it, when it is a
 *   name: see ClusterNode.address_ip), which is loopback itself when the head is this machine.
 * - "loopback": 127.0.0.1; launcher's HTTP then reaches it there, so launcher and its gateway
 *   run on the head.
 * - "any": every address (0.0.0.0), reached at the management address; parse.ts warns.
 * - an IP of the head: that address, reached there.
 */
export function apiAddress(cluster: Pick<Cluster, "api_bind">, head: ClusterNode, port: number): ApiAddress {
  const management = managementAddress(head);
  const choice = cluster.api_bind ?? "management";
  const table: Record<string, { bind: string; reach: string }> = {
    management: { bind: head.address_ip ?? bare(management), reach: management },
    loopback: { bind: LOOPBACK, reach: LOOPBACK },
    any: { bind: ANY, reach: management },
  };
  const picked = table[choice] ?? { bind: bare(choice), reach: choice };
  return { bind: picked.bind, endpoint: `http://${urlHost(picked.reach)}:${port}` };
}
