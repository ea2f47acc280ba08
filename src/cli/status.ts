import type { Command } from "commander";
import { clusterStatus } from "../deploy/status.js";
import { openSession } from "../deploy/session.js";
import { loadCluster } from "./load.js";
import type { Output } from "./output.js";

const uptime = (s: number | undefined): string =>
  s === undefined ? "-" : s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;

export function registerStatus(program: Command, io: Output): void {
  program
    .command("status")
    .description("every deployment found on the nodes, from the containers' labels")
    .option("--cluster <file>", "cluster file (default: $LAUNCHER_CLUSTER or ./cluster.toml)")
    .option("--json", "print as JSON")
    .action(async (opts: { cluster?: string; json?: boolean }) => {
      const session = await openSession(loadCluster(opts.cluster));
      const { deployments, unreachable } = await clusterStatus(session, new Date());
      if (opts.json) {
        io.json({ deployments, unreachable });
        return;
      }
      if (deployments.length === 0) io.out("no deployments");
      for (const d of deployments) {
        io.out(`${d.deployment}  ${d.status}${d.lane === undefined ? "" : `  lane ${d.lane}`}  recipe ${d.recipe} (${d.recipe_hash})  model ${d.served_model}  ${d.endpoint}/v1  up ${uptime(d.uptime_seconds)}`);
        for (const r of d.ranks) io.out(`  rank ${r.rank}  ${r.node.padEnd(10)} ${r.state}${r.exit_code === undefined ? "" : ` (exit ${r.exit_code})`}  ${r.container}`);
        for (const m of d.missing) io.out(`  missing: ${m}`);
      }
      for (const n of unreachable) io.err(`warning: ${n} is unreachable; its containers are not listed`);
    });
}
