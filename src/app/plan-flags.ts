import type { Cluster } from "../cluster/cluster.js";
import { planDeployment, type Plan } from "../plan/plan.js";
import { UserError } from "../config/errors.js";
import { describeFabricGap } from "../cluster/fabric-env.js";
import type { RestartPolicy } from "../contract/deployment.js";
import type { RecipeSource } from "../recipe/resolve.js";
import { gpusPerNode, loadRecipe } from "./lookup.js";
import { parseNodes } from "./host.js";
import type { Output } from "./output.js";

// `plan`'s and `up`'s flags to a plan: the CLI's `plan` (src/cli/plan.ts) and `up`'s preparation
// (./prepare-up.ts, in the CLI's process or the daemon's) plan alike.

export interface PlanFlags {
  cluster?: string;
  port?: string;
  lane?: string;
  name?: string;
  nodes?: string;
  /** `up --restart`, already decoded (up.ts); `plan` has no such flag. */
  restartPolicy?: RestartPolicy;
}

export function parsePort(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UserError(`--port ${value} is not a TCP port (1-65535)`);
  return port;
}

/**
 * How a multi-node plan with a node lacking its fabric IP or interface is taken: `plan` warns (it
 * may run before any detection), `up` refuses once it has probed the nodes, and `up`'s first plan,
 * made before the probe only to report recipe errors early, ignores it.
 */
export type FabricGapMode = "ignore" | "warn" | "error";

/** Recipe + cluster + command-line options -> a plan, or a UserError with every diagnostic. */
export function planFromFlags(ref: string, flags: PlanFlags, io: Output, cluster: Cluster, gaps: FabricGapMode, recipes: RecipeSource): Plan {
  const recipe = loadRecipe(ref, recipes, (ds) => io.diagnostics(ds), gpusPerNode(cluster));
  const port = parsePort(flags.port);
  const nodes = parseNodes(flags.nodes);
  const result = planDeployment(recipe, cluster, {
    ...(nodes === undefined ? {} : { nodes }),
    ...(port === undefined ? {} : { apiPort: port }),
    ...(flags.lane === undefined ? {} : { lane: flags.lane }),
    ...(flags.name === undefined ? {} : { deployment: flags.name }),
    ...(flags.restartPolicy === undefined ? {} : { restart: flags.restartPolicy }),
  });
  if (!result.ok) throw new UserError(`cannot plan ${ref} on ${cluster.file}`, undefined, result.diagnostics);
  const described = result.plan.fabric_gaps.map((g) => describeFabricGap(g, cluster.file));
  if (gaps === "error" && described.length > 0) {
    throw new UserError(`cannot start ${ref}: ${described.map((d) => d.message).join("; ")}`, described.map((d) => d.hint).join("; "));
  }
  if (gaps === "warn") for (const d of described) io.warn(`${d.message}; ${d.hint}`);
  return result.plan;
}
