import type { FabricFacts, Finding } from "./detect.js";

/** One node as `cluster init` found it. */
export interface DetectedNode {
  readonly name: string;
  readonly host: string;
  /** What `ssh -G` says SSH will use for this host (or what the user gave). */
  readonly user?: string;
  readonly port?: number;
  readonly facts: FabricFacts;
  /** undefined: no nvidia-smi on the node. */
  readonly gpus?: readonly string[];
  readonly findings: readonly Finding[];
}

export interface DetectedCluster {
  readonly name: string;
  readonly ssh: { readonly config?: string; readonly identity?: string; readonly known_hosts?: string };
  readonly nodes: readonly DetectedNode[];
  /** When it was probed (ISO time), for the header. */
  readonly at: string;
}

// JSON's string syntax is a subset of TOML's basic strings (same escapes, \uXXXX included), and
// every value written here was kind-checked before: one quoting point for the writer.
const str = (v: string): string => JSON.stringify(v);
const line = (text: string): string => text.replace(/\s*\n\s*/g, " ");

function detectedComment(n: DetectedNode): string[] {
  const f = n.facts;
  const out: string[] = [];
  out.push(
    f.fabric_iface === undefined
      ? "# not detected: the fabric interface and IP (no active RoCE port with an IPv4 address); set fabric_ip and fabric_iface for a multi-node cluster"
      : `# detected: ${f.fabric_iface} holds the fabric IP ${f.fabric_ip ?? "?"}${f.mtu === undefined ? "" : ` (MTU ${f.mtu})`}`,
  );
  out.push(
    f.hca.length === 0
      ? "# not detected: no active RoCE HCA (/sys/class/infiniband); NCCL would fall back to TCP"
      : `# detected: active RoCE HCA ${f.hca.join(", ")}, ${f.ports_up} port(s) up${f.gid_index === undefined ? "; no RoCE v2 GID found" : `; GID index ${f.gid_index} is the RoCE v2 GID of the fabric IP`}`,
  );
  return out;
}

/**
 * The cluster file `launcher cluster init` writes: every node in the order given (the rank order),
 * its SSH user and port, the fabric values its own probe found, and comments saying what was
 * detected and what to check. Pure: the probe is done before.
 */
export function renderClusterToml(c: DetectedCluster): string {
  const out: string[] = [
    `# Written by \`launcher cluster init\` at ${c.at} from what each node reported.`,
    "# Nodes are in the order the hosts were given: the first is the head (rank 0, serves the API).",
    "# The fabric values (fabric_ip, fabric_iface, hca, gid_index) are optional: `up` detects them on",
    "# every boot. Written here they are fixed and win over detection, so check them (`ibdev2netdev`,",
    "# `ip -br addr`) and delete the ones you would rather have detected each time.",
    `name = ${str(c.name)}`,
  ];
  const ssh = Object.entries(c.ssh).filter((e): e is [string, string] => e[1] !== undefined);
  if (ssh.length > 0) {
    out.push("", "[ssh]", ...ssh.map(([k, v]) => `${k} = ${str(v)}`));
  }
  for (const n of c.nodes) {
    const f = n.facts;
    out.push("", "[[nodes]]", `name = ${str(n.name)}`, `host = ${str(n.host)}`);
    if (n.user !== undefined) out.push(`user = ${str(n.user)}  # what ssh uses for this host (ssh -G)`);
    if (n.port !== undefined) out.push(`port = ${n.port}`);
    out.push(...detectedComment(n));
    if (f.fabric_ip !== undefined) out.push(`fabric_ip = ${str(f.fabric_ip)}`);
    if (f.fabric_iface !== undefined) out.push(`fabric_iface = ${str(f.fabric_iface)}`);
    if (f.hca.length > 0) out.push(`hca = [${f.hca.map(str).join(", ")}]`);
    if (f.gid_index !== undefined) out.push(`gid_index = ${f.gid_index}`);
    if (n.gpus === undefined || n.gpus.length === 0) out.push("# not detected: no GPU (nvidia-smi is missing or lists none); gpus defaults to 1");
    else out.push(`gpus = ${n.gpus.length}  # nvidia-smi: ${line(n.gpus.join(", "))}`);
    for (const finding of n.findings) out.push(`# check (${finding.severity}): ${line(finding.message)}; fix: ${line(finding.fix)}`);
  }
  return `${out.join("\n")}\n`;
}
