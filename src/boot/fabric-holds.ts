import type { ClusterNode } from "../cluster/cluster.js";
import { ipHolder, noFabricIpHolder, parseIp } from "../cluster/detect.js";
import type { ExecResult } from "../remote/transport.js";

/**
 * Where a worker listens on its fabric address and its head dials it there
 * (EngineAdapter.headAwaitsWorkersPort), the node must hold that address: else the worker cannot
 * bind it, or another machine answers. Doctor's check (src/cluster/detect.ts), made at preflight on
 * each worker from the `ip -o link show` and `ip -o -4 addr show` it read. A node whose `ip`
 * answered nothing usable is not judged. Pure.
 */
export function fabricIpProblems(
  workers: readonly string[],
  cluster: readonly Pick<ClusterNode, "name" | "fabric_ip">[],
  read: (node: string) => { readonly links: ExecResult; readonly addrs: ExecResult } | undefined,
): string[] {
  return workers.flatMap((node) => {
    const ip = cluster.find((n) => n.name === node)?.fabric_ip;
    const r = read(node);
    if (ip === undefined || r === undefined || r.links.code !== 0 || r.addrs.code !== 0) return [];
    const ifaces = parseIp(r.links.stdout, r.addrs.stdout);
    if (ifaces.length === 0 || ipHolder(ip, ifaces) !== undefined) return [];
    const f = noFabricIpHolder(node, ip);
    return [`${node}: ${f.message}, which its worker listens on and its head dials: ${f.fix}`];
  });
}
