import type { Command } from "commander";
import type { Cluster } from "../cluster/cluster.js";
import { planDeployment, type Plan } from "../plan/plan.js";
import { planJson, planText } from "../plan/render.js";
import { UserError } from "../config/errors.js";
import { withDetected } from "../cluster/detect.js";
import { gpusPerNode, loadCluster, loadRecipe, parseNodes, withStore } from "./load.js";
import type { Output } from "./output.js";

export interface PlanFlags {
  cluster?: string;
  port?: string;
  lane?: string;
  name?: string;
  nodes?: string;
}


export function parsePort(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UserError(`--port ${value} is not a TCP port (1-65535)`);
  return port;
}

/** Recipe + cluster + command-line options -> a plan, or a UserError with every diagnostic. */
export function planFromFlags(ref: string, flags: PlanFlags, io: Output, cluster: Cluster = loadCluster(flags.cluster)): Plan {
  const recipe = loadRecipe(ref, (ds) => io.diagnostics(ds), gpusPerNode(cluster));
  const port = parsePort(flags.port);
  const nodes = parseNodes(flags.nodes);
  const result = planDeployment(recipe, cluster, {
    ...(nodes === undefined ? {} : { nodes }),
    ...(port === undefined ? {} : { apiPort: port }),
    ...(flags.lane === undefined ? {} : { lane: flags.lane }),
    ...(flags.name === undefined ? {} : { deployment: flags.name }),
  });
  if (!result.ok) throw new UserError(`cannot plan ${ref} on ${cluster.file}`, undefined, result.diagnostics);
  return result.plan;
}

export function registerPlan(program: Command, io: Output): void {
  program
    .command("plan")
    .description("show the exact container every node would run (touches no node)")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .option("--cluster <file>", "cluster file (default: $LAUNCHER_CLUSTER or ./cluster.toml)")
    .option("--port <port>", "API port on the head (default: the cluster's api_port, 8000)")
    .option("--lane <name>", "serving lane")
    .option("--name <deployment>", "deployment name (default: the recipe name)")
    .option("--nodes <names>", "comma-separated nodes to use, head first (default: the first the recipe needs)")
    .option("--json", "print the plan as JSON")
    .action(async (ref: string, opts: PlanFlags & { json?: boolean }) => {
      const cluster = loadCluster(opts.cluster);
      // Fabric values that doctor or up detected fill what the cluster file leaves out.
      const stored = await withStore((store) => store.facts(cluster.name));
      if (stored.detected_at !== undefined) io.err(`launcher: using fabric values detected on the nodes at ${stored.detected_at} where ${cluster.file} gives none (launcher doctor refreshes them)`);
      const plan = planFromFlags(ref, opts, io, withDetected(cluster, stored.facts));
      if (opts.json) io.json(planJson(plan));
      else io.out(planText(plan));
    });
}
