import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { removeContainers } from "../deploy/down.js";
import { matchesTarget } from "../deploy/labels.js";
import { openSession } from "../deploy/session.js";
import { loadCluster, withStore } from "./load.js";
import type { Output } from "./output.js";

export function registerDown(program: Command, io: Output): void {
  program
    .command("down")
    .description("stop and remove a deployment on every node (SIGTERM, a grace period, then kill)")
    .argument("[target]", "deployment, lane or recipe name")
    .option("--all", "every launcher deployment on the cluster")
    .option("--cluster <file>", "cluster file (default: $LAUNCHER_CLUSTER or ./cluster.toml)")
    .option("--grace <seconds>", "seconds between SIGTERM and kill", "10")
    .option("--json", "print what was stopped as JSON")
    .action(async (target: string | undefined, opts: { all?: boolean; cluster?: string; grace: string; json?: boolean }) => {
      if (target === undefined && !opts.all) throw new UserError("say what to stop", "launcher down NAME, or launcher down --all");
      const grace = Number(opts.grace);
      if (!Number.isInteger(grace) || grace < 0) throw new UserError(`--grace ${opts.grace} is not a whole number of seconds`);
      const session = await openSession(loadCluster(opts.cluster));
      const removed = await removeContainers(session, (c) => opts.all === true || (target !== undefined && matchesTarget(c, target)), grace);
      await withStore((store) => {
        const at = new Date().toISOString();
        for (const name of new Set(removed.map((r) => r.deployment))) store.deploymentStopped(session.cluster.name, name, at);
        // A lane named here is emptied even when nothing ran in it (say, its launcher was killed mid-swap).
        const lane = target === undefined ? undefined : store.lane(target);
        if (lane !== undefined && lane.state !== "empty") store.setLane({ name: lane.name, cluster: lane.cluster, state: "empty", since: at });
      });
      if (opts.json) {
        io.json({ removed });
        return;
      }
      if (removed.length === 0) {
        io.out(`nothing to stop${target === undefined ? "" : ` for ${target}`}`);
        return;
      }
      for (const r of removed) io.out(`stopped ${r.deployment}: ${r.node} ${r.container}${r.wasRunning ? "" : " (had already exited)"}`);
    });
}
