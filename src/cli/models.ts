import type { Command } from "commander";
import { syncWeights, weightsReport } from "../deploy/models.js";
import { describePath, mib, transferProgress } from "../deploy/progress.js";
import { RELAY_ASKED } from "../transfer/route.js";
import { namedNodes, parseNodes, recipeOnCluster } from "./load.js";
import type { Output } from "./output.js";
import { withInterrupts } from "./interrupts.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

interface ModelFlags {
  cluster?: string;
  nodes?: string;
  json?: boolean;
  relay?: boolean;
}

async function context(ref: string, flags: ModelFlags, io: Output) {
  const { recipe, session } = await recipeOnCluster(ref, flags.cluster, io);
  return { recipe, session, nodes: namedNodes(session, flags.nodes) };
}

/** `launcher models sync`: the snapshot from a node that has it to those that lack it. */
export async function runModelsSync(ref: string, flags: ModelFlags, io: Output): Promise<void> {
  const { recipe, session, nodes } = await context(ref, flags, io);
  const result = await withInterrupts((signal) => syncWeights(recipe, session, nodes, transferProgress((line) => io.err(line), Date.now), signal, flags.relay === true ? { relay: RELAY_ASKED } : {}));
  if (flags.json) {
    io.json(result);
    return;
  }
  const copied = result.nodes.filter((n) => n.action === "copied");
  io.out(
    `${recipe.model} ${result.revision.slice(0, 12)} from ${result.source}: ${copied.length === 0 ? "every node already had it" : copied.map((n) => `${n.node} ${mib(n.bytes)}${n.resumed_bytes > 0 ? ` (resumed after ${mib(n.resumed_bytes)})` : ""} ${describePath(n)}`.trimEnd()).join(", ")}; checked by size and SHA-256`,
  );
}

export function registerModels(program: Command, io: Output): void {
  const models = program
    .command("models")
    .description("the recipe's model in each node's Hugging Face cache: the revision there, or what is missing")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--nodes <names>", "comma-separated nodes (default: every node)")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (ref: string, flags: ModelFlags) => {
      const { recipe, session, nodes } = await context(ref, flags, io);
      const report = await weightsReport(recipe, session, nodes);
      // The nodes the recipe would run on (as `up` picks them without a lane): those named, else
      // its first required_nodes. Only a missing model there fails the command.
      const needed = new Set(parseNodes(flags.nodes) ?? session.cluster.nodes.slice(0, recipe.required_nodes).map((n) => n.name));
      const missingWhereNeeded = report.filter((r) => !r.present && needed.has(r.node)).map((r) => r.node);
      if (missingWhereNeeded.length > 0) process.exitCode = 1;
      if (flags.json) {
        io.json({ model: recipe.model, ok: missingWhereNeeded.length === 0, nodes: report.map((r) => ({ ...r, needed: needed.has(r.node) })) });
        return;
      }
      io.out(recipe.model);
      for (const r of report) io.out(`  ${r.node.padEnd(10)} ${r.present ? `revision ${r.revision ?? "?"} (${r.files ?? 0} files)` : `MISSING: ${r.reason ?? "?"}`}  ${r.path}${needed.has(r.node) ? "" : "  (not needed)"}`);
      if (missingWhereNeeded.length > 0) io.out(`  missing on ${missingWhereNeeded.join(", ")}, where the recipe runs; fix: launcher models sync ${ref}`);
      else if (report.some((r) => !r.present)) io.out(`  present on every node the recipe runs on (${[...needed].join(", ")}); the others lack it: launcher models sync ${ref} copies it there`);
    });
  models
    .command("sync")
    .description("copy the snapshot (its files and their blobs only) from a node that has it to the nodes that lack it; resumable")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--nodes <names>", "comma-separated nodes to consider (default: every node)")
    .option("--relay", "copy through this machine instead of node to node")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    // The parent command has the same options: commander gives them to it, so merge.
    .action((ref: string, _flags: unknown, cmd: Command) => runModelsSync(ref, cmd.optsWithGlobals(), io));
}
