import { isIP } from "node:net";
import type { Cluster, ClusterNode, SshSettings } from "../cluster/cluster.js";
import type { Finding } from "../cluster/detect.js";
import { DEFAULT_RUN_ARGS } from "../cluster/schema.js";
import type { DetectedCluster, DetectedNode } from "../cluster/write.js";
import { UserError } from "../config/errors.js";
import { HOST, NODE_NAME, USER, type Kind } from "../config/kinds.js";
import { resolveSshDestination } from "../remote/ssh.js";
import { doctor } from "../nodes/doctor.js";
import { openSession } from "../nodes/session.js";

/** One HOST argument of `cluster init`: `[user@]host[:port]`. */
export interface HostArg {
  readonly host: string;
  readonly user?: string;
  readonly port?: number;
}

const checked = (kind: Kind, value: string, arg: string): string => {
  const why = kind.check(value);
  if (why !== undefined) throw new UserError(`host argument ${JSON.stringify(arg)}: ${JSON.stringify(value)} is not ${kind.what}: ${why}`, kind.hint);
  return value;
};

/**
 * `[user@]host[:port]`, each part checked for its kind. An IPv6 address is given bare (its colons
 * are not a port); an alias from the SSH config carries its own user and port.
 */
export function parseHostArg(arg: string): HostArg {
  const at = arg.lastIndexOf("@");
  const user = at < 0 ? undefined : checked(USER, arg.slice(0, at), arg);
  let rest = arg.slice(at + 1);
  let port: number | undefined;
  const m = /^([^:]+):(\d+)$/.exec(rest);
  if (m && isIP(rest) === 0) {
    rest = m[1] as string;
    port = Number(m[2]);
    if (port < 1 || port > 65535) throw new UserError(`host argument ${JSON.stringify(arg)}: port ${port} is not between 1 and 65535`);
  }
  const host = checked(HOST, rest, arg);
  return { host, ...(user === undefined ? {} : { user }), ...(port === undefined ? {} : { port }) };
}

/**
 * Node names from the hosts: a host name's first label (`spark1.lan` -> `spark1`), `node<N>` for an
 * address or a label that is no node name; a name seen before gets `-<N>`.
 */
export function nodeNames(hosts: readonly string[]): string[] {
  const seen = new Set<string>();
  return hosts.map((host, i) => {
    const label = isIP(host) === 0 ? host.split(".")[0] ?? host : "";
    let name = NODE_NAME.check(label) === undefined ? label : `node${i + 1}`;
    if (seen.has(name)) name = `${name}-${i + 1}`;
    seen.add(name);
    return name;
  });
}

export interface Unreachable {
  readonly host: string;
  readonly reason: string;
}

export interface InitProbe {
  readonly detected: DetectedCluster;
  readonly unreachable: readonly Unreachable[];
}

/**
 * Probes the hosts as `doctor` does (one SSH round trip each, in parallel), in the order given,
 * which is the rank order. Peers are not pinged: their fabric IPs are what is being found.
 */
export async function probeHosts(name: string, hosts: readonly HostArg[], ssh: SshSettings, at: string): Promise<InitProbe> {
  const names = nodeNames(hosts.map((h) => h.host));
  const nodes: ClusterNode[] = await Promise.all(
    hosts.map(async (h, rank) => {
      const seen: ClusterNode = { name: names[rank] as string, rank, host: h.host, hca: [], gpus: 1, ...(h.user === undefined ? {} : { user: h.user }), ...(h.port === undefined ? {} : { port: h.port }) };
      // What SSH will use: written into the file so that it is seen, not guessed.
      const resolved = await resolveSshDestination(seen, ssh);
      const user = h.user ?? resolved.user;
      const port = h.port ?? resolved.port;
      return { ...seen, ...(user === undefined ? {} : { user }), ...(port === undefined ? {} : { port }) };
    }),
  );
  const cluster: Cluster = { file: `${name}.toml`, name, api_port: 8000, master_port: 29501, ssh, run_args: [...DEFAULT_RUN_ARGS], extra_args: [], nodes };
  const report = await doctor(await openSession(cluster), { peers: false });
  const findingsOf = (node: string): Finding[] => report.findings.filter((f) => f.node === node && f.kind !== "ssh");
  const unreachable: Unreachable[] = [];
  const detected: DetectedNode[] = [];
  report.nodes.forEach((probe, rank) => {
    const node = nodes[rank] as ClusterNode;
    if (!probe.ssh) {
      unreachable.push({ host: node.host, reason: probe.error ?? "no answer" });
      return;
    }
    detected.push({
      name: node.name,
      host: node.host,
      ...(node.user === undefined ? {} : { user: node.user }),
      ...(node.port === undefined ? {} : { port: node.port }),
      facts: probe.facts,
      ...(probe.gpus === undefined ? {} : { gpus: probe.gpus.map((g) => `${g.name} ${g.memory}`) }),
      findings: findingsOf(node.name),
    });
  });
  const sshOut = { ...(ssh.config === undefined ? {} : { config: ssh.config }), ...(ssh.identity === undefined ? {} : { identity: ssh.identity }), ...(ssh.known_hosts === undefined ? {} : { known_hosts: ssh.known_hosts }) };
  return { detected: { name, ssh: sshOut, nodes: detected, at }, unreachable };
}
