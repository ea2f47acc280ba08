/**
 * Drift between nodes: the same software and settings are expected on every node of a cluster, and
 * a node that differs is named with its value and the value it was compared with. Pure: the probe
 * (src/nodes/doctor.ts) reads the values; this only compares them.
 */
import type { Finding } from "../cluster/detect.js";

/** What is compared across nodes; `mtu` is per fabric interface name. */
export type DriftKey = "kernel" | "nvidia_driver" | "cuda" | "docker";

/** One node's values. Undefined: the node did not say (its probe failed, or it lacks the tool). */
export interface DriftRow {
  readonly node: string;
  readonly values: Readonly<Partial<Record<DriftKey, string>>>;
  /** MTU of each fabric interface by name (those not compared by crossNodeFindings). */
  readonly mtus: Readonly<Record<string, number>>;
}

const LABEL: Record<DriftKey, string> = { kernel: "kernel", nvidia_driver: "NVIDIA driver", cuda: "CUDA", docker: "Docker" };

const FIX: Record<DriftKey, (value: string) => string> = {
  kernel: (v) => `run kernel ${v} on every node (a kernel without the NVIDIA DKMS module can run a driver that does not match it)`,
  nvidia_driver: (v) => `install NVIDIA driver ${v} on every node and reboot it`,
  cuda: (v) => `install the driver that supports CUDA ${v} on every node (nvidia-smi's header names it)`,
  docker: (v) => `install Docker Engine ${v} on every node`,
};

/** What a node without a value is shown as, when other nodes have one: a missing driver is drift too. */
export const NONE = "none";
/** Where a node without a value differs; elsewhere it is left out (a Docker that does not answer is its own error). */
const ABSENT_DIFFERS: ReadonlySet<DriftKey> = new Set(["nvidia_driver", "cuda"]);

/** The value the others have, and why it is the one compared with. */
export interface Reference {
  readonly value: string;
  readonly nodes: readonly string[];
  /** majority: more nodes have it than any other value; head: no majority, so the head's value. */
  readonly basis: "majority" | "head";
}

/**
 * The reference among node values: the value more nodes have than any other, else (a tie) the
 * head's. Undefined when every node agrees, or when there is no majority and the head has no value.
 */
export function reference(values: ReadonlyMap<string, string>, head: string): Reference | undefined {
  const groups = new Map<string, string[]>();
  for (const [node, v] of values) (groups.get(v) ?? groups.set(v, []).get(v))?.push(node);
  if (groups.size <= 1) return undefined;
  const sorted = [...groups].sort((a, b) => b[1].length - a[1].length);
  const [first, second] = sorted;
  if (first !== undefined && second !== undefined && first[1].length > second[1].length) return { value: first[0], nodes: first[1], basis: "majority" };
  const headValue = values.get(head);
  return headValue === undefined ? undefined : { value: headValue, nodes: groups.get(headValue) ?? [head], basis: "head" };
}

const basisText = (r: Reference, total: number): string =>
  r.basis === "majority" ? `the majority: ${r.nodes.length} of ${total} nodes` : `no majority among ${total} nodes, so the head's`;

/** The findings of one compared value: each node whose value is not the reference's. */
function differing(values: ReadonlyMap<string, string>, head: string, label: string, fix: (ref: string, node: string) => string): Finding[] {
  const ref = reference(values, head);
  if (ref === undefined) return [];
  return [...values]
    .filter(([, v]) => v !== ref.value)
    .map(([node, v]): Finding => ({
      severity: "warning",
      kind: "drift",
      node,
      message: `${label} ${v} differs from ${ref.value} on ${ref.nodes.join(", ")} (${basisText(ref, values.size)})`,
      fix: fix(ref.value, node),
    }));
}

/** Each node's value of `pick`; with `absentDiffers`, NONE where a node has none but another has one. */
function valuesOf(rows: readonly DriftRow[], pick: (r: DriftRow) => string | undefined, absentDiffers: boolean): Map<string, string> {
  if (!rows.some((r) => pick(r) !== undefined)) return new Map();
  return new Map(rows.flatMap((r): [string, string][] => {
    const v = pick(r);
    return v !== undefined ? [[r.node, v]] : absentDiffers ? [[r.node, NONE]] : [];
  }));
}

/**
 * Kernel, NVIDIA driver, CUDA, Docker and each fabric interface's MTU compared across the nodes
 * that answered: a node that differs is named with its value and the others'. `head` is the
 * rank 0 node, whose value is the reference when no value has a majority.
 */
export function driftFindings(rows: readonly DriftRow[], head: string): Finding[] {
  const out: Finding[] = [];
  for (const key of Object.keys(LABEL) as DriftKey[]) {
    out.push(...differing(valuesOf(rows, (r) => r.values[key], ABSENT_DIFFERS.has(key)), head, LABEL[key], (ref) => FIX[key](ref)));
  }
  const ifaces = [...new Set(rows.flatMap((r) => Object.keys(r.mtus)))].sort();
  for (const iface of ifaces) {
    const mtu = (r: DriftRow): string | undefined => (r.mtus[iface] === undefined ? undefined : String(r.mtus[iface]));
    out.push(...differing(valuesOf(rows, mtu, false), head, `MTU of ${iface}`, (ref, node) => `set MTU ${ref} on ${node}'s ${iface} (ip link set ${iface} mtu ${ref}) and on the switch`));
  }
  return out;
}
