import type { Command } from "commander";
import type { ClusterNode } from "../cluster/cluster.js";
import { loadCluster } from "../app/this-process.js";
import type { Output } from "../app/output.js";
import { nodeFloorGiB } from "../memory/memory-watch.js";
import { openSession, type ClusterSession } from "../nodes/session.js";
import { actionable, APPLY_SCRIPT, applyArgs, dropinPath, PROTECT_PROBE, protectPlan, readProtectProbe, UNITS, type FileChange, type NodePlan, type ProtectFacts } from "../nodes/protect.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

/** One node's answer: its facts and plan, or why it could not be asked; what --apply did. */
export interface NodeProtection {
  readonly node: string;
  readonly facts?: Omit<ProtectFacts, "files">;
  readonly plan?: NodePlan;
  readonly unreachable?: string;
  /** --apply: true when the changes were made on the node (false: nothing was run there), and its error when they failed. */
  readonly applied?: boolean;
  readonly error?: string;
}

const tail = (text: string): string => text.trim().split("\n").slice(-3).join(" ").slice(0, 400);

/** Probes one node, plans, and with --apply makes the changes it can. */
async function protectNode(session: ClusterSession, node: ClusterNode, options: { apply: boolean; undo: boolean }): Promise<NodeProtection> {
  const transport = session.docker.get(node.name)?.transport;
  if (transport === undefined) return { node: node.name, unreachable: "no SSH transport" };
  const probe = await transport.exec(["sh", "-c", PROTECT_PROBE, "sh", ...UNITS.map(dropinPath)], { timeoutMs: 30_000 });
  if (probe.code !== 0 || !probe.stdout.includes("@@files")) return { node: node.name, unreachable: tail(probe.stderr) || `exit ${probe.code}` };
  const facts = readProtectProbe(probe.stdout);
  const plan = protectPlan(node, facts, nodeFloorGiB(session.cluster, node.name), options);
  const { files: _files, ...shown } = facts;
  if (!options.apply || !actionable(plan, facts)) return { node: node.name, facts: shown, plan, ...(options.apply ? { applied: false } : {}) };
  const r = await transport.exec(["sudo", "-n", "sh", "-c", APPLY_SCRIPT, "sh", ...applyArgs(plan)], { timeoutMs: 60_000 });
  return { node: node.name, facts: shown, plan, applied: r.code === 0, ...(r.code === 0 ? {} : { error: tail(r.stderr) || `exit ${r.code}` }) };
}

/** Whether a change is one to make: what is there already, or is not launcher's, is left as it is. */
const pending = (c: FileChange): boolean => c.now !== "same" && c.now !== "foreign";
const DONE: Record<FileChange["action"], { plan: string; did: string; not: string }> = {
  write: { plan: "would write", did: "wrote", not: "did not write" },
  remove: { plan: "would remove", did: "removed", not: "did not remove" },
};
const NOW: Record<string, string> = { absent: "new", same: "already there", differs: "replaces launcher's older one", ours: "launcher's", foreign: "not launcher's: left alone" };

/** The text of one node's answer. */
export function protectionText(p: NodeProtection, options: { apply: boolean; undo: boolean }): string[] {
  if (p.plan === undefined) return [`${p.node}: unreachable: ${p.unreachable ?? "?"}`];
  const out = [`${p.node}:`];
  for (const c of p.plan.changes) {
    const words = DONE[c.action];
    const done = !pending(c) ? "leaves" : !options.apply ? words.plan : p.applied === true ? words.did : words.not;
    out.push(`  ${done} ${c.path} (${NOW[c.now] ?? c.now})`);
    if (!options.apply && c.content !== undefined && pending(c)) out.push(...c.content.trimEnd().split("\n").map((l) => `    | ${l}`));
  }
  if (p.plan.changes.length === 0) out.push(`  nothing to ${options.undo ? "remove" : "write"}`);
  for (const c of p.plan.cannot) out.push(`  cannot ${c.what}: ${c.why}\n    fix: ${c.fix}`);
  if (p.error !== undefined) out.push(`  failed: ${p.error}`);
  for (const e of p.plan.effect) out.push(`  takes effect: ${e}`);
  return out;
}
export function registerNodes(program: Command, io: Output): void {
  const nodes = program.command("nodes").description("what launcher sets up on the nodes themselves");
  nodes
    .command("protect")
    .description("show (or with --apply write, with sudo -n) systemd drop-ins that keep sshd and dockerd from the OOM killer, and earlyoom at the cluster's memory floor")
    .addOption(clusterOption())
    .option("--apply", "make the changes shown (sudo -n: never a password prompt); restarts nothing that carries SSH")
    .option("--undo", "remove what launcher wrote (files that carry its mark); with --apply, does it")
    .addOption(jsonOption()).addOption(outputOption())
    .action(async (opts: { cluster?: string; apply?: boolean; undo?: boolean; json?: boolean }) => {
      const options = { apply: opts.apply === true, undo: opts.undo === true };
      const session = await openSession(loadCluster(opts.cluster));
      const answers = await Promise.all(session.cluster.nodes.map((n) => protectNode(session, n, options)));
      // An unreachable node fails the command; acting, so does a node where something was not done.
      const short = (p: NodeProtection): boolean => p.plan === undefined || (options.apply && (p.error !== undefined || p.plan.cannot.length > 0 || (p.applied !== true && p.plan.changes.some(pending))));
      if (answers.some(short)) process.exitCode = 1;
      if (opts.json) {
        io.json({ apply: options.apply, undo: options.undo, nodes: answers });
        return;
      }
      for (const p of answers) for (const line of protectionText(p, options)) io.out(line);
      if (!options.apply) io.out(`\nnothing was changed; \`launcher nodes protect${options.undo ? " --undo" : ""} --apply\` makes these changes`);
    });
}
