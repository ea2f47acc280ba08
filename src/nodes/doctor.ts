import type { ClusterNode } from "../cluster/cluster.js";
import { UserError } from "../config/errors.js";
import { crossNodeFindings, detectFabric, parseIp, withDetected, type FabricFacts, type Finding, type NetIface } from "../cluster/detect.js";
import type { StateStore } from "../store/store.js";
import { dumpTree, readHcas, SYSFS_DUMP_SCRIPT, type Hca } from "../cluster/sysfs.js";
import { expandHome } from "../plan/plan.js";
import type { ClusterSession } from "./session.js";
import { parseMeminfo, type Meminfo } from "../memory/meminfo.js";
import { portFindings, protectionFindings, rateFindings, readHealth, type NodeHealth, type RecordedFabric } from "./health.js";
import { driftFindings, type DriftRow } from "./drift.js";

export interface GpuFacts {
  readonly name: string;
  readonly memory: string;
}

export interface NodeProbe {
  readonly node: string;
  readonly ssh: boolean;
  readonly error?: string;
  readonly docker?: { readonly version: string; readonly root: string; readonly free_gib?: number };
  /** undefined: no nvidia-smi on the node. */
  readonly gpus?: readonly GpuFacts[];
  readonly gpu_processes: readonly string[];
  readonly hcas: readonly Hca[];
  readonly ifaces: readonly NetIface[];
  readonly facts: FabricFacts;
  readonly hf_cache: { readonly path: string; readonly free_gib?: number };
  readonly peers: Readonly<Record<string, boolean>>;
  /** /proc/meminfo, read (undefined: not readable). On a Spark it is the GPU's memory too. */
  readonly memory?: Meminfo;
  /** Doctor's own probe only (not up's): kernel, NVIDIA driver and CUDA versions. */
  readonly system?: NodeHealth["system"];
  /** Doctor's own probe only: sshd's and dockerd's OOM score, the OOM helpers, swap. */
  readonly protection?: NodeHealth["protection"];
  /** Doctor's own probe only: each RoCE port's state and rate. */
  readonly links?: NodeHealth["links"];
}

export interface DoctorReport {
  readonly nodes: readonly NodeProbe[];
  readonly findings: readonly Finding[];
}

/**
 * Doctor's own sections (up's probe leaves them out: they cost a boot time and decide nothing).
 * The main pid of sshd and dockerd is the oldest process of that name (pgrep -o -x, procps); its
 * oom_score_adj is what the kernel's OOM killer adds to its badness (proc_pid_oom_score_adj(5)).
 * `systemctl is-active` prints one state word per unit (systemctl(1)); without systemd the process
 * is looked for. The ports' rates are dumped in the sysfs dump's own format (src/cluster/sysfs.ts).
 * nvidia-smi's header line carries "CUDA Version: X", the highest CUDA its driver supports. A
 * driver that lost its GPU makes nvidia-smi hang or print an error on stdout ("NVIDIA-SMI has
 * failed because it couldn't communicate with the NVIDIA driver"), so it runs under coreutils'
 * timeout(1) and its words are taken only when they are a version (./health.ts parseVersions).
 */
const HEALTH_SCRIPT = `echo "@@oom"
for p in sshd dockerd; do
  pid=$(pgrep -o -x "$p" 2>/dev/null)
  if [ -n "$pid" ]; then echo "$p $pid $(cat /proc/$pid/oom_score_adj 2>/dev/null)"; else echo "$p none"; fi
done
echo "@@oom-helpers"
for u in earlyoom systemd-oomd; do
  s=$(systemctl is-active "$u" 2>/dev/null | head -1); pid=$(pgrep -o -x "$u" 2>/dev/null)
  echo "$u \${s:-unknown} \${pid:-none}"
done
echo "@@versions"
echo "kernel $(uname -r)"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "driver $(timeout 10 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "cuda $(timeout 10 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\\([0-9.]*\\).*/\\1/p' | head -1)"
fi
[ -r /proc/driver/nvidia/version ] && echo "driver-proc $(head -1 /proc/driver/nvidia/version)"
echo "@@ib-rate"
for port in /sys/class/infiniband/*/ports/*; do
  [ -f "$port/rate" ] || continue
  printf '==> %s <==\\n' "$port/rate"; cat "$port/rate" 2>/dev/null
done
true`;

// One round trip per node: every section behind a marker line. $1 is the HF cache folder, $2
// the sysfs dump script, $3 "1" for doctor's own sections (HEALTH_SCRIPT), the rest the peers'
// fabric IPs.
const PROBE_SCRIPT = `hf="$1"; sysfs="$2"; health="$3"; shift 3
echo "@@sysfs"
sh -c "$sysfs" sh ""
echo "@@ip-link"; ip -o link show 2>/dev/null
echo "@@ip-addr"; ip -o -4 addr show 2>/dev/null
echo "@@docker"; docker version --format '{{.Server.Version}}' 2>&1; root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null); echo "$root"; [ -n "$root" ] && df -Pk "$root" 2>/dev/null | tail -1
echo "@@gpu"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1
  echo "@@gpu-apps"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1
else echo "none"; echo "@@gpu-apps"; fi
echo "@@hf"; d="$hf"; while [ ! -e "$d" ] && [ "$d" != "/" ]; do d=$(dirname "$d"); done; df -Pk "$d" 2>/dev/null | tail -1
echo "@@meminfo"; cat /proc/meminfo 2>/dev/null
if [ "$health" = 1 ]; then
${HEALTH_SCRIPT}
fi
echo "@@peers"
for ip in "$@"; do
  if command -v ping >/dev/null 2>&1; then ping -c 1 -W 2 "$ip" >/dev/null 2>&1; r=$?
  else timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/22"' bash "$ip" >/dev/null 2>&1; r=$?; fi
  echo "$ip $r"
done`;

/** The probe's command line: doctor's own sections with `health`, a reach test of each peer IP. */
export const probeArgv = (hfPath: string, health: boolean, peers: readonly string[]): string[] => ["sh", "-c", PROBE_SCRIPT, "sh", hfPath, SYSFS_DUMP_SCRIPT, health ? "1" : "0", ...peers];

function sections(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let name: string | undefined;
  let lines: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^@@([\w-]+)$/.exec(line);
    if (m) {
      if (name !== undefined) out.set(name, lines.join("\n"));
      name = m[1];
      lines = [];
    } else lines.push(line);
  }
  if (name !== undefined) out.set(name, lines.join("\n"));
  return out;
}

const freeGib = (dfLine: string | undefined): number | undefined => {
  const avail = dfLine?.trim().split(/\s+/)[3];
  return avail === undefined || !/^\d+$/.test(avail) ? undefined : Math.round((Number(avail) / 1048576) * 10) / 10;
};

/** One node's probe output, read. Pure, so that the parsing is tested without a node. */
export function readProbe(node: ClusterNode, hfPath: string, text: string): Omit<NodeProbe, "ssh"> & { findings: Finding[] } {
  const s = sections(text);
  const hcas = readHcas(dumpTree(s.get("sysfs") ?? ""));
  const ifaces = parseIp(s.get("ip-link") ?? "", s.get("ip-addr") ?? "");
  const [version, root, df] = (s.get("docker") ?? "").split("\n");
  const gpuText = (s.get("gpu") ?? "").trim();
  const gpus = gpuText === "none" ? undefined : gpuText.split("\n").filter(Boolean).map((l) => ({ name: l.split(",")[0]?.trim() ?? l, memory: l.split(",")[1]?.trim() ?? "?" }));
  const apps = (s.get("gpu-apps") ?? "").split("\n").map((l) => l.trim()).filter(Boolean);
  const peers: Record<string, boolean> = {};
  for (const l of (s.get("peers") ?? "").split("\n")) {
    const [ip, code] = l.trim().split(" ");
    if (ip) peers[ip] = code === "0";
  }
  const { facts, findings } = detectFabric(node, hcas, ifaces, gpus !== undefined && gpus.length > 0);
  const dockerOk = version !== undefined && /^\d+\.\d+/.test(version.trim());
  if (!dockerOk) findings.push({ severity: "error", kind: "docker", node: node.name, message: `Docker is not answering: ${version?.trim() ?? "no output"}`, fix: "start dockerd, and let the SSH user use it (the docker group)" });
  if (apps.length > 0) findings.push({ severity: "error", kind: "gpu", node: node.name, message: `the GPU is busy: ${apps.join("; ")}`, fix: "stop those processes (or the container running them) before a boot" });
  for (const [ip, ok] of Object.entries(peers)) {
    if (!ok) findings.push({ severity: "error", kind: "peer", node: node.name, message: `cannot reach peer fabric IP ${ip}`, fix: "check the cable, the addresses and the MTU on both ends" });
  }
  const dockerFree = freeGib(df);
  const mem = parseMeminfo(s.get("meminfo") ?? "");
  const health = readHealth(s, hcas);
  return {
    node: node.name,
    ...(dockerOk ? { docker: { version: (version ?? "").trim(), root: (root ?? "").trim(), ...(dockerFree === undefined ? {} : { free_gib: dockerFree }) } } : {}),
    ...(gpus === undefined ? {} : { gpus }),
    gpu_processes: apps,
    hcas,
    ifaces,
    facts,
    hf_cache: { path: hfPath, ...(freeGib(s.get("hf")?.trim()) === undefined ? {} : { free_gib: freeGib(s.get("hf")?.trim()) as number }) },
    peers,
    ...(mem.ok ? { memory: mem.meminfo } : {}),
    ...(health ?? {}),
    findings,
  };
}

export interface DoctorOptions {
  readonly hfCache?: string;
  readonly peers?: boolean;
  /** Doctor's own checks too: protections, versions, port rates (src/nodes/health.ts). */
  readonly health?: boolean;
}

/** Probes every node in parallel over SSH; findings that will break a boot are errors. */
export async function doctor(session: ClusterSession, options: DoctorOptions = {}): Promise<DoctorReport> {
  const hfCache = options.hfCache ?? "~/.cache/huggingface";
  const findings: Finding[] = [];
  const nodes = await Promise.all(
    session.cluster.nodes.map(async (node): Promise<NodeProbe> => {
      const hfPath = expandHome(hfCache, node) ?? hfCache;
      const peers = options.peers === false ? [] : session.cluster.nodes.filter((n) => n.name !== node.name).flatMap((n) => (n.fabric_ip === undefined ? [] : [n.fabric_ip]));
      const docker = session.docker.get(node.name);
      const r = docker === undefined ? undefined : await docker.transport.exec(probeArgv(hfPath, options.health === true, peers), { timeoutMs: 60_000 });
      if (r === undefined || r.code === 255 || !r.stdout.includes("@@sysfs")) {
        const error = (r?.stderr.trim() || "no answer").split("\n").slice(-2).join(" ");
        findings.push({ severity: "error", kind: "ssh", node: node.name, message: `SSH unreachable: ${error}`, fix: `check that \`ssh ${node.host}\` works without a password` });
        return { node: node.name, ssh: false, error, gpu_processes: [], hcas: [], ifaces: [], facts: { hca: [], ports_up: 0 }, hf_cache: { path: hfPath }, peers: {} };
      }
      const { findings: own, ...probe } = readProbe(node, hfPath, r.stdout);
      findings.push(...own);
      return { ...probe, ssh: true };
    }),
  );
  findings.push(...crossNodeFindings(new Map(nodes.filter((n) => n.ssh).map((n) => [n.node, n.facts]))));
  return { nodes, findings };
}

/**
 * Before a boot: the fabric findings on the nodes it will use stop it. A busy GPU is not one of
 * them (the deployment being replaced or already running uses it; preflight knows which).
 */
export function fabricBlockers(findings: readonly Finding[], nodes: readonly string[]): Finding[] {
  return findings.filter((f) => f.severity === "error" && f.kind === "fabric" && nodes.includes(f.node));
}

export function fabricCheckFailed(blocking: readonly Finding[]): UserError {
  return new UserError(`the fabric check failed; no container was started:\n${blocking.map((f) => `  - ${f.node}: ${f.message}\n    fix: ${f.fix}`).join("\n")}`, "launcher doctor shows every node's fabric");
}

/**
 * Probes the nodes, records what each one's fabric is (for `plan`), and returns the session with
 * those values filled in where the cluster file leaves them out.
 */
export async function detectAndRecord(session: ClusterSession, store: StateStore, at: string, options: DoctorOptions = {}): Promise<{ report: DoctorReport; session: ClusterSession; recorded: ReadonlyMap<string, RecordedFabric> }> {
  // What the last probe recorded, read before this one replaces it: doctor compares the ports with it.
  const before = store.facts(session.cluster.name);
  const recorded = new Map([...before.facts].map(([node, facts]) => [node, { facts, ...(before.detected_at === undefined ? {} : { at: before.detected_at }) }]));
  const report = await doctor(session, options);
  const facts = new Map(report.nodes.filter((n) => n.ssh).map((n) => [n.node, n.facts]));
  store.saveFacts(session.cluster.name, facts, at);
  store.saveMemory(session.cluster.name, new Map(report.nodes.flatMap((n) => (n.memory === undefined ? [] : [[n.node, n.memory] as const]))), at);
  return { report, session: { ...session, cluster: withDetected(session.cluster, facts) }, recorded };
}

/**
 * Doctor's own findings between and on the nodes that answered: protections, ports against the
 * record, port rates and drift. `crossNodeFindings` already compares the fabric interface's MTU,
 * so drift compares the MTU of the HCAs' other interfaces.
 */
export function healthFindings(report: DoctorReport, cluster: ClusterSession["cluster"], recorded: ReadonlyMap<string, RecordedFabric>): Finding[] {
  const probed = report.nodes.filter((n) => n.ssh && n.protection !== undefined);
  const out: Finding[] = [];
  for (const n of probed) {
    const node = cluster.nodes.find((c) => c.name === n.node);
    if (n.protection !== undefined) out.push(...protectionFindings(n.node, n.protection));
    if (node !== undefined) out.push(...portFindings(node, n.links ?? [], recorded.get(n.node) ?? {}));
  }
  out.push(...rateFindings(new Map(probed.map((n) => [n.node, n.links ?? []]))));
  const fabricIfaces = new Set(probed.flatMap((n) => (n.facts.fabric_iface === undefined ? [] : [n.facts.fabric_iface])));
  const rows = probed.map((n): DriftRow => {
    const byName = new Map(n.ifaces.map((i) => [i.name, i.mtu]));
    const mtus = Object.fromEntries(n.hcas.flatMap((h) => h.netdevs).filter((d) => !fabricIfaces.has(d) && byName.has(d)).map((d) => [d, byName.get(d) as number]));
    const values = { ...n.system, ...(n.docker === undefined ? {} : { docker: n.docker.version }) };
    return { node: n.node, values, mtus };
  });
  out.push(...driftFindings(rows));
  return out;
}
