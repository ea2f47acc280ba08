import type { Command } from "commander";
import type { Plan } from "../plan/plan.js";
import { planJson, planText, unknownNode } from "../plan/render.js";
import { nearest } from "../config/suggest.js";
import { UserError } from "../config/errors.js";
import { mergeDetected, type DetectedValue } from "../cluster/detect.js";
import { loadCluster, localRecipes } from "../app/this-process.js";
import { withStore } from "../app/host.js";
import { planFromFlags, type PlanFlags } from "../app/plan-flags.js";
import type { Output } from "../app/output.js";
import { withSshDefaults } from "../nodes/session.js";
import { fitFromKept, fitText, nodeFitJson } from "../memory/fit.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

/** "spark2: fabric_ip 10.0.0.2, gid_index 3" for each planned node that took values from detection. */
export function detectedNote(plan: Plan, detected: ReadonlyMap<string, readonly DetectedValue[]>): string[] {
  return plan.nodes.flatMap((n) => {
    const values = detected.get(n.node);
    return values === undefined ? [] : [`${n.node}: ${values.map((v) => `${v.field} ${v.value}`).join(", ")}`];
  });
}

export function registerPlan(program: Command, io: Output): void {
  program
    .command("plan")
    .description("show the exact container every node would run (touches no node)")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--port <port>", "API port on the head (default: the cluster's api_port, 8000)")
    .option("--lane <name>", "serving lane")
    .option("--name <deployment>", "deployment name (default: the recipe name)")
    .option("--nodes <names>", "comma-separated nodes to use, head first (default: the first the recipe needs)")
    .option("--node <name>", "show only this node's container")
    .addOption(jsonOption("print the plan as JSON")).addOption(outputOption())
    .action(async (ref: string, opts: PlanFlags & { node?: string; json?: boolean }) => {
      // A node without a user is planned as the user SSH will log in as (its ~ in mounts too).
      const cluster = await withSshDefaults(loadCluster(opts.cluster));
      // Fabric values that doctor or up detected fill what the cluster file leaves out.
      const { stored, memory } = await withStore((store) => ({ stored: store.facts(cluster.name), memory: store.memory(cluster.name) }));
      const merged = mergeDetected(cluster, stored.facts);
      const plan = planFromFlags(ref, opts, io, merged.cluster, "warn", localRecipes());
      // Only values really taken from detection are called detected; none, no note.
      const taken = detectedNote(plan, merged.detected);
      if (taken.length > 0) {
        io.err(`launcher: detected on the nodes at ${stored.detected_at ?? "?"} (${cluster.file} gives none; launcher doctor refreshes them): ${taken.join("; ")}`);
      }
      const filter = opts.node === undefined ? {} : { node: opts.node };
      const known = unknownNode(plan, filter);
      if (known !== undefined) {
        const guess = nearest(opts.node ?? "", known);
        throw new UserError(`--node ${opts.node ?? ""}: ${ref} does not run on that node (it runs on ${known.join(", ")})`, guess === undefined ? `name one of ${known.join(", ")}` : `did you mean --node ${guess}?`);
      }
      // The memory fit from what doctor (or up's probe) last read of each node, and the weights'
      // size the last preflight of this model read there.
      const weights = await withStore((store) => store.weights(plan.cluster, plan.recipe.model));
      const fit = fitFromKept(plan.recipe, plan.nodes.map((n) => n.node), memory, weights);
      const readAt = [...memory.values()].map((m) => m.read_at).sort()[0];
      if (opts.json) io.json({ ...(planJson(plan, filter) as Record<string, unknown>), memory_fit: { read_at: readAt ?? null, nodes: fit.nodes.map(nodeFitJson) } });
      else io.out(`${planText(plan, filter)}\n${fitText(fit)}\n  (memory as launcher doctor read it${readAt === undefined ? ": never; run launcher doctor" : ` at ${readAt}`}${weights.size === 0 ? "; the weights' size is kept by the first up of this model" : ""})`);
    });
}
