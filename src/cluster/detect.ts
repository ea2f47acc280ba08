import type { Cluster, ClusterNode } from "./cluster.js";
import type { Hca } from "./sysfs.js";

export interface NetIface {
  readonly name: string;
  readonly mtu: number;
  readonly up: boolean;
  /** IPv4 addresses with their prefix, e.g. 10.0.0.2/24. */
  readonly ipv4: readonly string[];
}

/** `ip -o link show` and `ip -o -4 addr show`, as one node printed them. */
export function parseIp(links: string, addrs: string): NetIface[] {
  const ifaces = new Map<string, { name: string; mtu: number; up: boolean; ipv4: string[] }>();
  for (const line of links.split("\n")) {
    const m = /^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>.*?\bmtu (\d+)/.exec(line);
    if (m) ifaces.set(m[1] as string, { name: m[1] as string, mtu: Number(m[3]), up: (m[2] as string).split(",").includes("UP"), ipv4: [] });
  }
  for (const line of addrs.split("\n")) {
    const m = /^\d+:\s+(\S+)\s+inet (\d+\.\d+\.\d+\.\d+\/\d+)/.exec(line);
    if (m) ifaces.get(m[1] as string)?.ipv4.push(m[2] as string);
  }
  return [...ifaces.values()];
}

const toInt = (ip: string): number => ip.split(".").reduce((a, o) => a * 256 + Number(o), 0);
function subnet(cidr: string): string {
  const [ip, bits] = cidr.split("/");
  const n = Number(bits);
  const mask = n === 0 ? 0 : (0xffffffff << (32 - n)) >>> 0;
  const net = (toInt(ip ?? "0.0.0.0") & mask) >>> 0;
  return `${[net >>> 24, (net >>> 16) & 255, (net >>> 8) & 255, net & 255].join(".")}/${n}`;
}

export interface Finding {
  readonly severity: "error" | "warning";
  /**
   * fabric findings break a boot on that node (its errors); the others are the doctor's to report:
   * drift names a node whose versions or MTU differ from the others', protection one whose sshd,
   * dockerd or OOM helper leave it exposed to running out of memory.
   */
  readonly kind: "fabric" | "docker" | "gpu" | "peer" | "ssh" | "drift" | "protection";
  readonly node: string;
  readonly message: string;
  readonly fix: string;
}

/** What one node's own sysfs and interfaces say about its fabric. */
export interface FabricFacts {
  readonly fabric_iface?: string;
  readonly fabric_ip?: string;
  readonly mtu?: number;
  readonly hca: readonly string[];
  readonly gid_index?: number;
  readonly ports_up: number;
}

const ipOf = (cidr: string): string => cidr.split("/")[0] ?? cidr;

/** The interface that holds `ip` among its IPv4 addresses, if any. */
export const ipHolder = (ip: string, ifaces: readonly NetIface[]): NetIface | undefined => ifaces.find((i) => i.ipv4.some((c) => ipOf(c) === ip));

/** The finding for a node none of whose interfaces holds its fabric IP. */
export const noFabricIpHolder = (node: string, fabricIp: string): Finding => ({ severity: "error", kind: "fabric", node, message: `no interface holds the fabric IP ${fabricIp}`, fix: `set the address on the fabric port, or fix fabric_ip for ${node} in the cluster file` });

/**
 * A node's fabric from its own facts. The cluster file's values win where it gives them;
 * detection fills only what it leaves out, and never from another node. The rules D1-D6 are the
 * list in src/export/fabric-start.ts, which the export's start script follows too.
 */
export function detectFabric(node: ClusterNode, hcas: readonly Hca[], ifaces: readonly NetIface[], hasGpu: boolean): { facts: FabricFacts; findings: Finding[] } {
  const findings: Finding[] = [];
  // D1
  const active = hcas.filter((h) => h.ports.some((p) => p.active));
  const portsUp = hcas.reduce((n, h) => n + h.ports.filter((p) => p.active).length, 0);
  const byName = new Map(ifaces.map((i) => [i.name, i]));
  // D2: a known interface's own HCA, so that the address is that interface's.
  const known = node.fabric_iface;
  const addressed = known === undefined ? active : active.filter((h) => h.netdevs.includes(known)).slice(0, 1);
  const hcaIp = addressed.flatMap((h) => h.netdevs.filter((d) => known === undefined || d === known).flatMap((d) => byName.get(d)?.ipv4 ?? []))[0];
  const fabricIp = node.fabric_ip ?? (hcaIp === undefined ? undefined : ipOf(hcaIp));
  // D3
  const holder = fabricIp === undefined ? undefined : ifaces.find((i) => i.ipv4.some((c) => ipOf(c) === fabricIp));
  const fabricIface = node.fabric_iface ?? holder?.name;
  const iface = fabricIface === undefined ? undefined : byName.get(fabricIface);
  // D4, D5
  const onFabric = active.find((h) => fabricIface !== undefined && h.netdevs.includes(fabricIface)) ?? active[0];
  const gid = onFabric?.ports.find((p) => p.active && p.rocev2 !== undefined && (fabricIp === undefined || p.rocev2.ipv4 === fabricIp))?.rocev2 ?? onFabric?.ports.find((p) => p.rocev2 !== undefined)?.rocev2;

  if (active.length === 0) {
    findings.push({
      severity: hasGpu ? "error" : "warning",
      kind: "fabric",
      node: node.name,
      message: hcas.length === 0 ? "no RoCE HCA found (/sys/class/infiniband is empty)" : `no active RoCE port (${hcas.map((h) => `${h.name}: ${h.ports.map((p) => p.state).join(", ")}`).join("; ")})`,
      fix: hasGpu ? "check the QSFP cable and `ibdev2netdev`; without RDMA, NCCL falls back to slow TCP" : "fine for a host without GPUs (the practice cluster); a Spark needs an active port",
    });
  }
  if (fabricIp !== undefined && holder === undefined) findings.push(noFabricIpHolder(node.name, fabricIp));
  if (iface !== undefined && !iface.up) findings.push({ severity: "error", kind: "fabric", node: node.name, message: `fabric interface ${iface.name} is down`, fix: `ip link set ${iface.name} up` });
  const subnets = new Map<string, string[]>();
  for (const i of ifaces) for (const c of i.ipv4) if (!c.startsWith("127.")) (subnets.get(subnet(c)) ?? subnets.set(subnet(c), []).get(subnet(c)))?.push(i.name);
  for (const [net, names] of subnets) {
    const distinct = [...new Set(names)];
    if (distinct.length > 1) {
      findings.push({ severity: "error", kind: "fabric", node: node.name, message: `interfaces ${distinct.join(" and ")} are both on subnet ${net}: replies leave by either one and RDMA connects fail`, fix: "give each fabric port its own subnet, or remove the address from all but one" });
    }
  }
  const facts: FabricFacts = {
    ...(fabricIface === undefined ? {} : { fabric_iface: fabricIface }),
    ...(fabricIp === undefined ? {} : { fabric_ip: fabricIp }),
    ...(iface === undefined ? {} : { mtu: iface.mtu }),
    // D6
    hca: node.hca.length > 0 ? node.hca : active.map((h) => h.name),
    ...(node.gid_index !== undefined ? { gid_index: node.gid_index } : gid === undefined ? {} : { gid_index: gid.index }),
    ports_up: portsUp,
  };
  return { facts, findings };
}

/** Findings between nodes: MTUs that differ on the fabric. */
export function crossNodeFindings(facts: ReadonlyMap<string, FabricFacts>): Finding[] {
  const mtus = new Map<number, string[]>();
  for (const [node, f] of facts) if (f.mtu !== undefined) (mtus.get(f.mtu) ?? mtus.set(f.mtu, []).get(f.mtu))?.push(node);
  if (mtus.size <= 1) return [];
  const [common] = [...mtus].sort((a, b) => b[1].length - a[1].length || b[0] - a[0])[0] ?? [9000];
  return [...mtus]
    .filter(([mtu]) => mtu !== common)
    .flatMap(([mtu, nodes]) => nodes.map((node): Finding => ({ severity: "error", kind: "fabric", node, message: `fabric MTU ${mtu} differs from the other nodes' ${common}`, fix: `set MTU ${common} on ${node}'s fabric interface (ip link set DEV mtu ${common}) and on the switch` })));
}

/** One value a plan took from detection, because the cluster file left it out. */
export interface DetectedValue {
  readonly field: "fabric_ip" | "fabric_iface" | "hca" | "gid_index" | "ports_up";
  readonly value: string;
}

/**
 * The cluster with detected facts filled in where the cluster file left them out, and per node
 * the values that really came from detection (none where the file gives them all), so that `plan`
 * says "detected" only for those. Four ports up counts: it adds NCCL settings; fewer changes nothing.
 */
export function mergeDetected(cluster: Cluster, facts: ReadonlyMap<string, FabricFacts>): { cluster: Cluster; detected: ReadonlyMap<string, readonly DetectedValue[]> } {
  const detected = new Map<string, DetectedValue[]>();
  const nodes = cluster.nodes.map((n): ClusterNode => {
    const f = facts.get(n.name);
    if (f === undefined) return n;
    const taken: DetectedValue[] = [];
    if (n.fabric_ip === undefined && f.fabric_ip !== undefined) taken.push({ field: "fabric_ip", value: f.fabric_ip });
    if (n.fabric_iface === undefined && f.fabric_iface !== undefined) taken.push({ field: "fabric_iface", value: f.fabric_iface });
    if (n.hca.length === 0 && f.hca.length > 0) taken.push({ field: "hca", value: f.hca.join(",") });
    if (n.gid_index === undefined && f.gid_index !== undefined) taken.push({ field: "gid_index", value: String(f.gid_index) });
    if (n.ports_up === undefined && f.ports_up >= 4) taken.push({ field: "ports_up", value: String(f.ports_up) });
    if (taken.length > 0) detected.set(n.name, taken);
    return {
      ...n,
      ...(n.fabric_ip === undefined && f.fabric_ip !== undefined ? { fabric_ip: f.fabric_ip } : {}),
      ...(n.fabric_iface === undefined && f.fabric_iface !== undefined ? { fabric_iface: f.fabric_iface } : {}),
      hca: n.hca.length > 0 ? n.hca : f.hca,
      ...(n.gid_index === undefined && f.gid_index !== undefined ? { gid_index: f.gid_index } : {}),
      ...(n.ports_up === undefined ? { ports_up: f.ports_up } : {}),
    };
  });
  return { cluster: { ...cluster, nodes }, detected };
}

/** The cluster with detected facts filled in where the cluster file left them out. */
export function withDetected(cluster: Cluster, facts: ReadonlyMap<string, FabricFacts>): Cluster {
  return mergeDetected(cluster, facts).cluster;
}
