import type { Command } from "commander";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { syncWeights, weightsReport } from "../transfer/models.js";
import { describePath, mib, transferProgress } from "../nodes/progress.js";
import { pullModel } from "../transfer/pull.js";
import type { ClusterSession } from "../nodes/session.js";
import type { Recipe } from "../recipe/recipe.js";
import { headReadsWeights, weightReaders } from "../plan/weights.js";
import { RELAY_ASKED } from "../transfer/route.js";
import { namedNodes, parseNodes, recipeOnCluster } from "../app/host.js";
import type { Output } from "../app/output.js";
import { withInterrupts } from "./interrupts.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

interface ModelFlags {
  cluster?: string;
  nodes?: string;
  json?: boolean;
  relay?: boolean;
}

interface PullFlags extends ModelFlags {
  node?: string;
  image?: string;
  tokenFile?: string;
}

async function context(ref: string, flags: ModelFlags, io: Output) {
  const { recipe, session } = await recipeOnCluster(ref, flags.cluster, io);
  return { recipe, session, nodes: namedNodes(session, flags.nodes) };
}

/** `launcher models sync`: the snapshot from a node that has it to those that lack it. */
export async function runModelsSync(ref: string, flags: ModelFlags, io: Output): Promise<void> {
  const { recipe, session, nodes } = await context(ref, flags, io);
  // Where only the head reads the files, they go to it alone (any node that has them may send them).
  const only = headReadsWeights(recipe) ? { only: neededNodes(session, recipe, flags.nodes) } : {};
  const result = await withInterrupts((signal) => syncWeights(recipe, session, nodes, transferProgress((line) => io.err(line), Date.now), signal, { ...(flags.relay === true ? { relay: RELAY_ASKED } : {}), ...only }));
  if (flags.json) {
    io.json(result);
    return;
  }
  const copied = result.nodes.filter((n) => n.action === "copied");
  io.out(
    `${recipe.model} ${result.revision.slice(0, 12)} from ${result.source}: ${copied.length === 0 ? "every node already had it" : copied.map((n) => `${n.node} ${mib(n.bytes)}${n.resumed_bytes > 0 ? ` (resumed after ${mib(n.resumed_bytes)})` : ""} ${describePath(n)}`.trimEnd()).join(", ")}; checked by size and SHA-256`,
  );
}

/** The nodes the recipe would run on (as `up` picks them without a lane): those named, else its first required_nodes. */
function neededNodes(session: ClusterSession, recipe: Recipe, nodes: string | undefined): Set<string> {
  // Of those, the ones that read the files: where only the head does, the head (the first).
  return new Set(weightReaders(recipe, parseNodes(nodes) ?? session.cluster.nodes.slice(0, recipe.required_nodes).map((n) => n.name)));
}

/**
 * The Hugging Face token: --token-file's first line, else HF_TOKEN, else the file `hf auth login`
 * wrote on this machine (HF_TOKEN_PATH, else HF_HOME/token, else ~/.cache/huggingface/token), as
 * huggingface_hub's get_token looks (utils/_auth.py, constants.py HF_TOKEN_PATH). None: no token.
 */
function hubToken(tokenFile: string | undefined): string | undefined {
  const firstLine = (file: string): string => (readTextFile(file, "token file", 64 * 1024).split("\n")[0] ?? "").trim();
  if (tokenFile !== undefined) {
    const token = firstLine(tokenFile);
    if (token === "") throw new UserError(`token file ${tokenFile} is empty`, "put the Hugging Face token on its first line");
    return token;
  }
  const fromEnv = process.env.HF_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  const loggedIn = process.env.HF_TOKEN_PATH ?? path.join(process.env.HF_HOME ?? path.join(homedir(), ".cache", "huggingface"), "token");
  return existsSync(loggedIn) ? firstLine(loggedIn) || undefined : undefined;
}

/** `launcher models pull`: download into one node's cache, then sync to the others the recipe needs. */
export async function runModelsPull(ref: string, flags: PullFlags, io: Output): Promise<void> {
  const { recipe, session } = await recipeOnCluster(ref, flags.cluster, io);
  const needed = neededNodes(session, recipe, flags.nodes);
  const nodes = namedNodes(session, [...needed].join(","));
  const token = hubToken(flags.tokenFile);
  const endpoint = process.env.HF_ENDPOINT?.trim();
  const result = await withInterrupts((signal) =>
    pullModel(
      recipe,
      session,
      nodes,
      { ...(flags.image === undefined ? {} : { image: flags.image }), ...(flags.node === undefined ? {} : { node: flags.node }), ...(token === undefined ? {} : { token }), ...(endpoint ? { endpoint } : {}), note: (line) => io.err(line) },
      transferProgress((line) => io.err(line), Date.now),
      signal,
    ),
  );
  if (flags.json) {
    io.json(result);
    return;
  }
  const copied = result.sync.nodes.filter((n) => n.action === "copied");
  const got = result.download === undefined ? `already on ${result.already ?? "?"}, nothing downloaded` : `downloaded on ${result.download.node} with ${result.download.downloader} in ${result.download.seconds.toFixed(1)}s`;
  const synced = copied.length === 0 ? "every node has it (nothing to sync)" : `synced to ${copied.map((n) => `${n.node} ${mib(n.bytes)}`).join(", ")}`;
  io.out(`${recipe.model} ${result.sync.revision.slice(0, 12)}: ${got}; ${synced}`);
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
      // Only a missing model where the recipe runs fails the command.
      const needed = neededNodes(session, recipe, flags.nodes);
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
  models
    .command("pull")
    .description("download the recipe's model (its pinned revision if any) into one node's Hugging Face cache, in a container of an image with huggingface_hub, then sync it to the other nodes the recipe runs on; resumable. HF_TOKEN and HF_ENDPOINT are taken from the environment")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--nodes <names>", "comma-separated nodes the model goes to (default: the recipe's first required_nodes)")
    .option("--node <name>", "the node that downloads (default: the first of those)")
    .option("--image <image>", "an image with huggingface_hub to download in (default: the recipe's image)")
    .option("--token-file <file>", "read the Hugging Face token from this file (first line) instead of HF_TOKEN (default: HF_TOKEN, else the token `hf auth login` saved here)")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action((ref: string, _flags: unknown, cmd: Command) => runModelsPull(ref, cmd.optsWithGlobals(), io));
}
