import type { Command } from "commander";
import { adapterOrDefault } from "../engine/registry.js";
import { detectAndRecord, healthFindings, type NodeProbe } from "../nodes/doctor.js";
import { openSession } from "../nodes/session.js";
import { loadCluster } from "../app/this-process.js";
import { withStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { colourFor, SEVERITY_STYLE } from "../app/colour.js";
import { KIB_PER_GIB, meminfoJson, type Meminfo, type MeminfoJson } from "../memory/meminfo.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

/** "97.3/119.7 GiB available (page cache 6.1)": what the fit check of up and plan compares with. */
function memoryLine(m: Meminfo | undefined): string {
  if (m === undefined) return "?";
  const g = (kib: number): string => (kib / KIB_PER_GIB).toFixed(1);
  return `${g(m.availableKiB)}/${g(m.totalKiB)} GiB available (page cache ${g(m.cachedKiB + m.reclaimableSlabKiB)})`;
}

/** A node's probe as `doctor --json` prints it: its memory in snake_case keys, and the user SSH logs in as. */
export function doctorNodeJson(n: NodeProbe, sshUser: string | undefined): Omit<NodeProbe, "memory"> & { readonly memory?: MeminfoJson; readonly ssh_user?: string } {
  const { memory, ...rest } = n;
  return { ...rest, ...(memory === undefined ? {} : { memory: meminfoJson(memory) }), ...(sshUser === undefined ? {} : { ssh_user: sshUser }) };
}

/** A node's protections, versions and ports, one line each: what doctor's own checks read. */
export function healthLines(n: NodeProbe): string[] {
  if (n.protection === undefined) return [];
  const sys = n.system ?? {};
  const procs = n.protection.processes.map((p) => `${p.name} oom_score_adj ${p.oom_score_adj ?? "?"}`);
  const helpers = n.protection.oom_helpers.filter((h) => h.active).map((h) => h.name);
  const swap = n.protection.swap_total_kib === undefined ? "?" : `${(n.protection.swap_total_kib / KIB_PER_GIB).toFixed(1)} GiB`;
  const head = [n.node.padEnd(8), `kernel ${sys.kernel ?? "?"}`, `driver ${sys.nvidia_driver ?? "-"}`, `cuda ${sys.cuda ?? "-"}`, ...procs, `oom helper ${helpers.join(",") || "none"}`, `swap ${swap}`].join("  ");
  return [head, ...(n.links ?? []).map((l) => `${n.node.padEnd(8)} port ${l.hca}/${l.port} ${l.state}${l.rate === undefined ? "" : ` ${l.rate}`}`)];
}

export function registerDoctor(program: Command, io: Output): void {
  program
    .command("doctor")
    .description("probe every node: SSH, Docker, GPU, RoCE HCAs and GID index, fabric IP and MTU, peers, HF cache space, OOM protections, port links, and the versions that differ between nodes")
    .addOption(clusterOption())
    .option("--hf-cache <path>", "the Hugging Face cache on the nodes (~ is each node's home)", "~/.cache/huggingface")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (opts: { cluster?: string; hfCache: string; json?: boolean }) => {
      // What plan and up use where the cluster file is silent.
      const session = await openSession(loadCluster(opts.cluster));
      const probed = await withStore((store) => detectAndRecord(session, store, new Date().toISOString(), { hfCache: opts.hfCache, health: true }));
      const detected = probed.session;
      const report = { ...probed.report, findings: [...probed.report.findings, ...healthFindings(probed.report, detected.cluster, probed.recorded)] };
      // What a recipe that sets nothing gets on each node: the default engine's env, its default backend (src/recipe/schema.ts).
      const engine = adapterOrDefault(undefined);
      const env = Object.fromEntries(detected.cluster.nodes.map((n) => [n.name, engine.nodeEnv({ distributed_backend: "mp" }, n)]));
      const errors = report.findings.filter((f) => f.severity === "error");
      if (errors.length > 0) process.exitCode = 1;
      if (opts.json) {
        const users = new Map(detected.cluster.nodes.map((c) => [c.name, c.user]));
        io.json({ ok: errors.length === 0, nodes: report.nodes.map((n) => doctorNodeJson(n, users.get(n.node))), env, findings: report.findings });
        return;
      }
      // Who SSH logs in as, also for a node whose cluster entry names no user (openSession asked ssh -G).
      const login = (name: string): string => {
        const node = detected.cluster.nodes.find((c) => c.name === name);
        return node === undefined ? "?" : `${node.user ?? "?"}@${node.host}${node.port === undefined ? "" : `:${node.port}`}`;
      };
      for (const n of report.nodes) {
        if (!n.ssh) {
          io.out(`${n.node.padEnd(8)} ssh ${login(n.node)} unreachable`);
          continue;
        }
        const f = n.facts;
        const gpu = n.gpus === undefined ? "no nvidia-smi" : n.gpus.map((g) => `${g.name} ${g.memory}`).join(", ") + (n.gpu_processes.length > 0 ? " BUSY" : " idle");
        const peers = Object.values(n.peers);
        io.out(
          [
            n.node.padEnd(8),
            `ssh ${login(n.node)}`,
            `docker ${n.docker?.version ?? "DOWN"}${n.docker?.free_gib === undefined ? "" : ` (${n.docker.free_gib} GiB free)`}`,
            `gpu ${gpu}`,
            `fabric ${f.fabric_iface ?? "?"} ${f.fabric_ip ?? "?"} mtu ${f.mtu ?? "?"}`,
            `hca ${f.hca.join(",") || "none"}${f.gid_index === undefined ? "" : ` gid ${f.gid_index}`} ports up ${f.ports_up}`,
            `peers ${peers.length === 0 ? "-" : `${peers.filter(Boolean).length}/${peers.length}`}`,
            `hf cache ${n.hf_cache.free_gib === undefined ? "?" : `${n.hf_cache.free_gib} GiB free`}`,
            `mem ${memoryLine(n.memory)}`,
          ].join("  "),
        );
      }
      io.out("\nprotections, versions and ports:");
      for (const n of report.nodes) for (const line of healthLines(n)) io.out(`  ${line}`);
      io.out("\nenv per node:");
      for (const [node, e] of Object.entries(env)) io.out(`  ${node}: ${Object.entries(e).map(([k, v]) => `${k}=${v}`).join(" ") || "(none)"}`);
      if (report.findings.length > 0) io.out("");
      const paint = colourFor(process.stdout);
      for (const f of report.findings) io.out(`${paint(SEVERITY_STYLE[f.severity], f.severity)}: ${f.node}: ${f.message}\n  fix: ${f.fix}`);
      if (report.findings.length === 0) io.out("\nno problems found");
    });
}
