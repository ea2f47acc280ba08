/**
 * The memory guard's pure core: the remote sampler loop, the parser of its lines, the running
 * state of one node (peak per phase, the floor crossed) and the words of a trip. The shell that
 * runs it (one long-lived stream per node, the kill) is src/memory/guard.ts.
 *
 * A DGX Spark's CPU and GPU share one memory pool; when a boot exhausts it the machine freezes
 * instead of killing the engine (NVIDIA open-gpu-kernel-modules issue 1358), so the guard watches
 * MemAvailable, which is what the kernel estimates can still be given out without swapping
 * (Documentation/filesystems/proc.rst, "MemAvailable"), and not MemFree.
 */

import { DEFAULT_MEMORY_FLOOR_GIB } from "../cluster/schema.js";
import { KIB_PER_GIB } from "../contract/units.js";

export { KIB_PER_GIB };


/** A node's floor: its own memory_floor, else the cluster's, else the default. */
export const memoryFloorGiB = (cluster: { readonly memory_floor?: number }, node: { readonly memory_floor?: number } | undefined): number =>
  node?.memory_floor ?? cluster.memory_floor ?? DEFAULT_MEMORY_FLOOR_GIB;

/**
 * A floor at or above the node's total memory trips at the first sample whatever runs: a user
 * error, named with node, floor and total, before any container starts (preflight). Undefined: fine.
 */
export function floorProblem(node: string, floorGiB: number, totalKiB: number): string | undefined {
  const totalGiB = totalKiB / KIB_PER_GIB;
  if (floorGiB < totalGiB) return undefined;
  return `${node}: memory_floor ${floorGiB} GiB is not below the node's total memory (MemTotal ${totalGiB.toFixed(1)} GiB): the memory guard would kill the deployment at its first sample; set memory_floor (in GiB) well below ${totalGiB.toFixed(1)} in the cluster file`;
}

/** The floor of the node named `node` in `cluster`. */
export const nodeFloorGiB = (cluster: { readonly memory_floor?: number; readonly nodes: readonly { readonly name: string; readonly memory_floor?: number }[] }, node: string): number =>
  memoryFloorGiB(cluster, cluster.nodes.find((c) => c.name === node));

/** Samples per second is 1 / this: several a second, so that a loader's burst is seen in time. */
export const SAMPLE_INTERVAL_SECONDS = 0.2;

/** What every sampler line starts with; anything else on the stream (a shell's complaint) is not a sample. */
const SAMPLE_TAG = "mem";

/**
 * One remote shell loop per node, run over the node's one SSH connection: each turn reads
 * /proc/meminfo with the shell's own `read` (no process per sample but `sleep`) and prints
 * `mem TOTAL_KIB AVAILABLE_KIB`. MemTotal comes first and MemAvailable third in /proc/meminfo
 * (fs/proc/meminfo.c meminfo_proc_show), so the read stops early. The interval comes as $1 only.
 */
export const SAMPLER_SCRIPT = `while :; do
  t= a=
  while read -r k v _; do
    case $k in MemTotal:) t=$v ;; MemAvailable:) a=$v; break ;; esac
  done </proc/meminfo
  echo "${SAMPLE_TAG} $t $a" || exit 0
  sleep "$1"
done`;

export interface MemorySample {
  readonly totalKiB: number;
  readonly availableKiB: number;
}

/** A line of the sampler loop, or undefined when the line is not one (or a kernel without MemAvailable). */
export function parseSampleLine(line: string): MemorySample | undefined {
  const m = /^mem (\d+) (\d+)$/.exec(line.trim());
  if (m === null || m[1] === undefined || m[2] === undefined) return undefined;
  const totalKiB = Number(m[1]);
  const availableKiB = Number(m[2]);
  return totalKiB > 0 && availableKiB <= totalKiB ? { totalKiB, availableKiB } : undefined;
}

const gib = (kib: number): string => (kib / KIB_PER_GIB).toFixed(1);

/** `mem 97.3/119.7 GiB`: available of total, as `up` shows it per node. */
export const describeSample = (s: MemorySample): string => `mem ${gib(s.availableKiB)}/${gib(s.totalKiB)} GiB`;

/** One phase's worst moment on one node: the least available memory seen while it lasted. */
export interface PhasePeak {
  readonly phase: string;
  readonly minAvailableKiB: number;
  readonly totalKiB: number;
}

/** What the guard knows of one node. */
export interface NodeMemory {
  readonly node: string;
  readonly floorKiB: number;
  /** The first sample, taken before the deployment's first container on that node did much. */
  readonly first?: MemorySample;
  readonly last?: MemorySample;
  /** Per boot phase, in the order the phases came. */
  readonly peaks: readonly PhasePeak[];
  /** Set by the sample that went below the floor; the guard trips once. */
  readonly crossed?: { readonly phase: string; readonly sample: MemorySample };
}

export const nodeMemory = (node: string, floorGiB: number): NodeMemory => ({ node, floorKiB: Math.round(floorGiB * KIB_PER_GIB), peaks: [] });

/** The node's state after one sample taken during `phase`. */
export function observe(state: NodeMemory, phase: string, sample: MemorySample): NodeMemory {
  const last = state.peaks[state.peaks.length - 1];
  const peaks =
    last !== undefined && last.phase === phase
      ? [...state.peaks.slice(0, -1), sample.availableKiB < last.minAvailableKiB ? { phase, minAvailableKiB: sample.availableKiB, totalKiB: sample.totalKiB } : last]
      : [...state.peaks, { phase, minAvailableKiB: sample.availableKiB, totalKiB: sample.totalKiB }];
  const crossed = state.crossed ?? (sample.availableKiB < state.floorKiB ? { phase, sample } : undefined);
  return { ...state, first: state.first ?? sample, last: sample, peaks, ...(crossed === undefined ? {} : { crossed }) };
}

/** The least available memory of all phases (the node's peak use), or undefined before any sample. */
export function worstPeak(state: NodeMemory): PhasePeak | undefined {
  return [...state.peaks].sort((a, b) => a.minAvailableKiB - b.minAvailableKiB)[0];
}

/** Whose memory it was: after the deployment's containers were killed, did the node get it back? */
export type Culprit = "deployment" | "outside" | "unknown";

/**
 * Decided from the first sample after the kill: back above the floor means the deployment held
 * what was missing; still below means something outside it (another process, another
 * deployment, page cache that the kernel does not count as available) holds it.
 */
export const culpritOf = (floorKiB: number, after: MemorySample | undefined): Culprit =>
  after === undefined ? "unknown" : after.availableKiB >= floorKiB ? "deployment" : "outside";

/** What to change when the deployment itself crossed the floor: the knobs that size its memory. */
export const GUARD_HINT =
  "lower --gpu-memory-utilization or set a smaller --kv-cache-memory, lower --max-model-len, try a load format that maps the weights (e.g. --load-format safetensors) or a smaller shm_size; memory_floor in the cluster file sets the floor (per node or for all)";

const OUTSIDE_HINT = "free the memory on that node first (another deployment, leftover processes, page cache: echo 3 > /proc/sys/vm/drop_caches as root), then boot again";

export interface Trip {
  readonly node: string;
  readonly phase: string;
  readonly message: string;
  readonly detail: readonly string[];
  readonly hint: string;
  readonly culprit: Culprit;
}

/**
 * The report of a trip: the node, the phase, the figures, the nodes whose containers were killed
 * and what to change. `after` is the tripped node's first sample after the kill; `fit` is that
 * node's arithmetic from the fit check (src/memory/fit.ts), when one was made.
 */
export function describeTrip(state: NodeMemory, killedOn: readonly string[], after: MemorySample | undefined, failedKills: readonly string[] = [], fit: readonly string[] = []): Trip {
  const crossed = state.crossed;
  if (crossed === undefined) throw new Error(`describeTrip: ${state.node} did not cross its floor`);
  const culprit = culpritOf(state.floorKiB, after);
  const peak = worstPeak(state);
  const detail = [
    `floor: ${gib(state.floorKiB)} GiB available; ${state.node} had ${gib(crossed.sample.availableKiB)} of ${gib(crossed.sample.totalKiB)} GiB during ${crossed.phase}`,
    ...(state.first === undefined ? [] : [`when the guard started: ${gib(state.first.availableKiB)} GiB available`]),
    ...(peak === undefined ? [] : [`peak: ${gib(peak.totalKiB - peak.minAvailableKiB)} GiB in use on ${state.node} (everything on it) during ${peak.phase}`]),
    ...state.peaks.map((p) => `  ${p.phase.padEnd(13)} least available ${gib(p.minAvailableKiB)} GiB`),
    `killed (docker kill) the deployment's containers on ${killedOn.join(", ") || "no node"}`,
    ...(failedKills.length === 0 ? [] : [`the kill failed on ${failedKills.join("; ")}`]),
    ...(after === undefined ? [] : [`after the kill: ${gib(after.availableKiB)} GiB available on ${state.node}`]),
    // What the boot was expected to take: the gap between it and the peak is what to size down.
    ...(fit.length === 0 ? [] : [`the fit check before the boot (GiB):`, ...fit.map((l) => `  ${l}`)]),
  ];
  const who = culprit === "outside" ? "; the memory is held outside the deployment (still below the floor after its containers were killed)" : "";
  return {
    node: state.node,
    phase: crossed.phase,
    culprit,
    message: `memory guard: ${state.node} fell below its floor of ${gib(state.floorKiB)} GiB available during ${crossed.phase} (${gib(crossed.sample.availableKiB)} GiB left)${who}`,
    detail,
    hint: culprit === "outside" ? OUTSIDE_HINT : GUARD_HINT,
  };
}
