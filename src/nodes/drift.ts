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

/** How to make a value alike on every node when no value has a majority (no node is the one to change). */
const FIX_ANY: Record<DriftKey, string> = {
  kernel: "choose one kernel and run it on every node",
  nvidia_driver: "choose one NVIDIA driver, install it on every node and reboot them",
  cuda: "choose one NVIDIA driver (it decides the CUDA version) and install it on every node",
  docker: "choose one Docker Engine version and install it on every node",
};

/** Where a node without a value is named (its driver may be missing or broken); elsewhere it is left out (a Docker that does not answer is its own error). */
const ABSENT_SAID: ReadonlySet<DriftKey> = new Set(["nvidia_driver", "cuda"]);

/** The value most nodes have, compared with: only a strict majority is one (a tie names no culprit). */
export interface Reference {
  readonly value: string;
  readonly nodes: readonly string[];
}

/**
 * The value more nodes have than any other, among the nodes that have a value (a node without
 * one is never the reference). Undefined when every node agrees, or when no value has more nodes
 * than every other (a tie: which side is wrong is not known).
 */
export function reference(values: ReadonlyMap<string, string>): Reference | undefined {
  const groups = valueGroups(values);
  if (groups.size <= 1) return undefined;
  const [first, second] = [...groups].sort((a, b) => b[1].length - a[1].length);
  return first !== undefined && second !== undefined && first[1].length > second[1].length ? { value: first[0], nodes: first[1] } : undefined;
}

function valueGroups(values: ReadonlyMap<string, string>): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const [node, v] of values) (groups.get(v) ?? groups.set(v, []).get(v))?.push(node);
  return groups;
}

interface Compared {
  readonly label: string;
  /** The node's fix, given the majority's value. */
  readonly fix: (ref: string, node: string) => string;
  /** The fix when there is no majority. */
  readonly fixAny: string;
}

/**
 * The findings of one compared value: with a majority, each node whose value is not the
 * majority's; without one, one finding that lists every node and its value and names no culprit
 * (its node is every node, in order).
 */
function differing(values: ReadonlyMap<string, string>, c: Compared): Finding[] {
  const ref = reference(values);
  if (ref !== undefined) {
    return [...values]
      .filter(([, v]) => v !== ref.value)
      .map(([node, v]): Finding => ({ severity: "warning", kind: "drift", node, message: `${c.label} ${v} differs from ${ref.value} on ${ref.nodes.join(", ")} (the majority: ${ref.nodes.length} of ${values.size} nodes)`, fix: c.fix(ref.value, node) }));
  }
  if (valueGroups(values).size <= 1) return [];
  const each = [...values].map(([node, v]) => `${node} ${v}`).join(", ");
  return [{ severity: "warning", kind: "drift", node: [...values.keys()].join(", "), message: `${c.label} differs across ${values.size} nodes with no majority: ${each}`, fix: c.fixAny }];
}

/** The nodes that did not say a value others said: "not read" there, never compared as a value. */
function notRead(rows: readonly DriftRow[], pick: (r: DriftRow) => string | undefined, label: string): Finding[] {
  const said = rows.filter((r) => pick(r) !== undefined).map((r) => r.node);
  if (said.length === 0) return [];
  return rows
    .filter((r) => pick(r) === undefined)
    .map((r): Finding => ({ severity: "warning", kind: "drift", node: r.node, message: `${label} not read on ${r.node}, while ${said.join(", ")} said one`, fix: `see why ${r.node} says no ${label}: is its driver loaded (nvidia-smi, /proc/driver/nvidia/version)?` }));
}

/** Each node's value of `pick`, for the nodes that have one. */
function valuesOf(rows: readonly DriftRow[], pick: (r: DriftRow) => string | undefined): Map<string, string> {
  return new Map(rows.flatMap((r): [string, string][] => {
    const v = pick(r);
    return v === undefined ? [] : [[r.node, v]];
  }));
}

/**
 * Kernel, NVIDIA driver, CUDA, Docker and each fabric interface's MTU compared across the nodes
 * that answered: a node that differs from the majority is named with its value and the others';
 * with no majority, every node and its value are listed; a node that said no driver or CUDA while
 * others did is said to be "not read" there.
 */
export function driftFindings(rows: readonly DriftRow[]): Finding[] {
  const out: Finding[] = [];
  for (const key of Object.keys(LABEL) as DriftKey[]) {
    const pick = (r: DriftRow): string | undefined => r.values[key];
    out.push(...differing(valuesOf(rows, pick), { label: LABEL[key], fix: (ref) => FIX[key](ref), fixAny: FIX_ANY[key] }));
    if (ABSENT_SAID.has(key)) out.push(...notRead(rows, pick, LABEL[key]));
  }
  const ifaces = [...new Set(rows.flatMap((r) => Object.keys(r.mtus)))].sort();
  for (const iface of ifaces) {
    const mtu = (r: DriftRow): string | undefined => (r.mtus[iface] === undefined ? undefined : String(r.mtus[iface]));
    const label = `MTU of ${iface}`;
    out.push(...differing(valuesOf(rows, mtu), { label, fix: (ref, node) => `set MTU ${ref} on ${node}'s ${iface} (ip link set ${iface} mtu ${ref}) and on the switch`, fixAny: `choose one MTU for ${iface}, set it on every node (ip link set ${iface} mtu N) and on the switch` }));
  }
  return out;
}
