/**
 * What doctor reads of a node's protections and versions, and what it says of them. Pure: the
 * probe's sections (src/nodes/doctor.ts PROBE_SCRIPT) in, facts and findings out. Everything here
 * comes from the node: it is bounded and only ever shown, never run nor used as a path.
 */
import type { FabricFacts, Finding } from "../cluster/detect.js";
import type { ClusterNode } from "../cluster/cluster.js";
import { dumpTree, type Hca } from "../cluster/sysfs.js";

/** A daemon whose death cuts the node off (sshd) or kills every container (dockerd). */
export interface ProcessOom {
  readonly name: string;
  readonly pid?: number;
  /** /proc/PID/oom_score_adj: -1000 (OOM_SCORE_ADJ_MIN) exempts it from the kernel's OOM killer (proc_pid_oom_score_adj(5)). */
  readonly oom_score_adj?: number;
}

/** A user-space OOM killer: it acts before the kernel's, while the node still answers. */
export interface OomHelper {
  readonly name: string;
  /** `systemctl is-active`'s word, or "unknown" without systemd. */
  readonly state: string;
  readonly pid?: number;
  readonly active: boolean;
}

export interface NodeSystem {
  readonly kernel?: string;
  readonly nvidia_driver?: string;
  readonly cuda?: string;
}

export interface NodeProtection {
  readonly processes: readonly ProcessOom[];
  readonly oom_helpers: readonly OomHelper[];
  /** SwapTotal of /proc/meminfo: on a Spark, whose GPU shares the memory, swap is a choice. */
  readonly swap_total_kib?: number;
}

/** One RoCE port's link: sysfs state and rate (/sys/class/infiniband/HCA/ports/N/{state,rate}). */
export interface PortLink {
  readonly hca: string;
  readonly port: number;
  readonly state: string;
  readonly active: boolean;
  /** As sysfs writes it, e.g. "200 Gb/sec (4X HDR)". */
  readonly rate?: string;
  readonly rate_gbps?: number;
}

export interface NodeHealth {
  readonly system: NodeSystem;
  readonly protection: NodeProtection;
  readonly links: readonly PortLink[];
}

/**
 * At or below this, a daemon counts as protected. Docker's own unit (moby contrib/init/systemd/
 * docker.service, OOMScoreAdjust=-500) does not: half the kernel's range still leaves dockerd a
 * candidate, and with it every container.
 */
export const PROTECTED_ADJ = -900;
const MAX_WORD = 80;

/** One line of node output, bounded and without control characters: only ever shown. */
function word(text: string | undefined): string | undefined {
  const line = text?.split("\n")[0]?.replace(/[\p{Cc}]/gu, "").trim().slice(0, MAX_WORD);
  return line === undefined || line === "" ? undefined : line;
}

const int = (text: string | undefined): number | undefined => (text !== undefined && /^-?\d{1,7}$/.test(text) ? Number(text) : undefined);

/** `NAME PID ADJ` or `NAME none` lines of the @@oom section. */
export function parseOom(text: string): ProcessOom[] {
  return text.split("\n").flatMap((l): ProcessOom[] => {
    const [name, pid, adj] = l.trim().split(/\s+/);
    if (name === undefined || !/^[a-z-]{1,20}$/.test(name)) return [];
    const p = int(pid);
    const a = int(adj);
    return [{ name, ...(p === undefined ? {} : { pid: p }), ...(a === undefined ? {} : { oom_score_adj: a }) }];
  });
}

/** `NAME STATE PID|none` lines of the @@oom-helpers section. */
export function parseHelpers(text: string): OomHelper[] {
  return text.split("\n").flatMap((l): OomHelper[] => {
    const [name, state, pid] = l.trim().split(/\s+/);
    if (name === undefined || !/^[a-z-]{1,20}$/.test(name) || state === undefined) return [];
    const p = int(pid);
    const s = /^[a-z-]{1,20}$/.test(state) ? state : "unknown";
    return [{ name, state: s, ...(p === undefined ? {} : { pid: p }), active: s === "active" || p !== undefined }];
  });
}

/** A dotted version (580.95.05, 13.0), else undefined: never the words of a tool that failed. */
const VERSION = /^\d+(\.\d+){1,3}$/;
const versionOf = (text: string | undefined): string | undefined => {
  const w = word(text);
  return w !== undefined && VERSION.test(w) ? w : undefined;
};

/** `kernel X`, `driver X`, `cuda X`, `driver-proc LINE` lines of the @@versions section. */
export function parseVersions(text: string): NodeSystem {
  const lines = new Map<string, string>();
  for (const l of text.split("\n")) {
    const m = /^([a-z-]+) (.*)$/.exec(l.trim());
    if (m && !lines.has(m[1] as string)) lines.set(m[1] as string, m[2] as string);
  }
  // /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build ..."
  const fromProc = /Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s/.exec(`${lines.get("driver-proc") ?? ""} `)?.[1];
  // nvidia-smi prints its failures on stdout ("NVIDIA-SMI has failed because it couldn't
  // communicate with the NVIDIA driver..."): only a version is one, else the kernel module's.
  const driver = versionOf(lines.get("driver")) ?? fromProc;
  const cuda = versionOf(lines.get("cuda"));
  const kernel = word(lines.get("kernel"));
  return { ...(kernel === undefined ? {} : { kernel }), ...(driver === undefined ? {} : { nvidia_driver: driver }), ...(cuda === undefined ? {} : { cuda }) };
}

/** Each port of the node's HCAs with its rate (the @@ib-rate section, in the sysfs dump's format). */
export function parseLinks(hcas: readonly Hca[], rates: string): PortLink[] {
  const tree = dumpTree(rates);
  return hcas.flatMap((h) =>
    h.ports.map((p): PortLink => {
      const rate = word(tree.read(`/sys/class/infiniband/${h.name}/ports/${p.port}/rate`));
      const gbps = rate === undefined ? undefined : Number(/^(\d+(?:\.\d+)?) Gb\/sec/.exec(rate)?.[1] ?? Number.NaN);
      return { hca: h.name, port: p.port, state: p.state, active: p.active, ...(rate === undefined ? {} : { rate }), ...(gbps === undefined || Number.isNaN(gbps) ? {} : { rate_gbps: gbps }) };
    }),
  );
}

export function parseSwapKib(meminfo: string): number | undefined {
  const m = /^SwapTotal:\s+(\d+)/m.exec(meminfo);
  return m ? Number(m[1]) : undefined;
}

/** The probe's health sections, read; undefined when the probe ran without them (up's). */
export function readHealth(s: ReadonlyMap<string, string>, hcas: readonly Hca[]): NodeHealth | undefined {
  if (!s.has("versions")) return undefined;
  const swap = parseSwapKib(s.get("meminfo") ?? "");
  return {
    system: parseVersions(s.get("versions") ?? ""),
    protection: { processes: parseOom(s.get("oom") ?? ""), oom_helpers: parseHelpers(s.get("oom-helpers") ?? ""), ...(swap === undefined ? {} : { swap_total_kib: swap }) },
    links: parseLinks(hcas, s.get("ib-rate") ?? ""),
  };
}

const PROTECT_FIX = "`launcher nodes protect` shows the systemd drop-ins it would write; `launcher nodes protect --apply` writes them";
const LOSS: Record<string, string> = { sshd: "the node can no longer be reached", dockerd: "every container on the node goes with it" };

/** sshd and dockerd not strongly negative, and no OOM helper active. */
export function protectionFindings(node: string, p: NodeProtection): Finding[] {
  const out: Finding[] = [];
  for (const proc of p.processes) {
    if (proc.oom_score_adj === undefined || proc.oom_score_adj <= PROTECTED_ADJ) continue;
    out.push({
      severity: "warning",
      kind: "protection",
      node,
      message: `${proc.name} (pid ${proc.pid ?? "?"}) has oom_score_adj ${proc.oom_score_adj}: under memory pressure the kernel's OOM killer may pick it, and ${LOSS[proc.name] ?? "the node loses it"}; a protected ${proc.name} has -1000 (OOMScoreAdjust=-1000 in a systemd drop-in, systemd.exec(5))`,
      fix: PROTECT_FIX,
    });
  }
  if (!p.oom_helpers.some((h) => h.active)) {
    const seen = p.oom_helpers.map((h) => `${h.name}: ${h.state}`).join(", ") || "none found";
    out.push({
      severity: "warning",
      kind: "protection",
      node,
      message: `no OOM helper is active (${seen}): when a Spark's unified memory runs out, the machine can freeze before the kernel's OOM killer acts`,
      fix: "install earlyoom (sudo apt-get install earlyoom); `launcher nodes protect --apply` then sets it to the cluster's memory floor",
    });
  }
  return out;
}

/** What doctor or up last recorded of a node (the store's facts), and when. */
export interface RecordedFabric {
  readonly facts?: FabricFacts;
  readonly at?: string;
}

const PORT_FIX = "check the QSFP cable and `ibdev2netdev`; after a warm reboot a ConnectX-7 can lose ports until a cold boot";

/**
 * Ports down or missing against what is recorded: the cluster file's HCAs, and the HCAs and count
 * of ports up that the store kept from the last probe (read before this probe replaces it).
 */
export function portFindings(node: ClusterNode, links: readonly PortLink[], recorded: RecordedFabric): Finding[] {
  const out: Finding[] = [];
  const warn = (message: string): void => void out.push({ severity: "warning", kind: "fabric", node: node.name, message, fix: PORT_FIX });
  const since = recorded.at === undefined ? "" : ` at ${recorded.at}`;
  const expected = [...new Set([...node.hca, ...(recorded.facts?.hca ?? [])])];
  for (const hca of expected) {
    const ports = links.filter((l) => l.hca === hca);
    const source = node.hca.includes(hca) ? "the cluster file names it" : `it was active${since}`;
    if (ports.length === 0) warn(`RoCE HCA ${hca} is missing (${source})`);
    for (const l of ports.filter((p) => !p.active)) warn(`RoCE port ${hca}/${l.port} is ${l.state} (${source})`);
  }
  const up = links.filter((l) => l.active).length;
  const was = recorded.facts?.ports_up;
  if (was !== undefined && up < was) warn(`${up} RoCE port(s) up, ${was} were${since}`);
  return out;
}

/** Active ports slower than most active ports of the cluster (the fastest rate when there is a tie). */
export function rateFindings(links: ReadonlyMap<string, readonly PortLink[]>): Finding[] {
  const counts = new Map<number, number>();
  for (const ls of links.values()) for (const l of ls) if (l.active && l.rate_gbps !== undefined) counts.set(l.rate_gbps, (counts.get(l.rate_gbps) ?? 0) + 1);
  const [common] = [...counts].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0] ?? [];
  if (common === undefined) return [];
  return [...links].flatMap(([node, ls]) =>
    ls
      .filter((l) => l.active && l.rate_gbps !== undefined && l.rate_gbps < common)
      .map((l): Finding => ({ severity: "warning", kind: "fabric", node, message: `RoCE port ${l.hca}/${l.port} runs at ${l.rate ?? `${l.rate_gbps} Gb/sec`}, slower than the ${common} Gb/sec of the cluster's other ports`, fix: PORT_FIX })),
  );
}
