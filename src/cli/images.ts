import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { Interrupted } from "../config/abort.js";
import { buildImage, imageFolders, imageReport, pushImage, pushLeft, pushSource, shortId, type NodeImage } from "../transfer/images.js";
import { withInterrupts } from "./interrupts.js";
import { describePath, mib, transferProgress } from "../nodes/progress.js";
import { clusterRoutes, RELAY_ASKED } from "../transfer/route.js";
import { dockerOf, openSession, type ClusterSession } from "../nodes/session.js";
import type { Recipe } from "../recipe/recipe.js";
import { SshDocker, type Docker } from "../remote/docker.js";
import { localTransport } from "../remote/local.js";
import { gpusPerNode } from "../app/lookup.js";
import { imageRoots, loadCluster, loadRecipe } from "../app/this-process.js";
import { namedNodes, recipeOnCluster } from "../app/host.js";
import type { ClusterNode } from "../cluster/cluster.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

interface ImageFlags {
  cluster?: string;
  json?: boolean;
}


/** `launcher images build`: the recipe's folder on the head (or here), bases of its FROM chain first. */
export async function runImagesBuild(ref: string, flags: ImageFlags & { local?: boolean }, io: Output): Promise<void> {
  const cluster = flags.local && flags.cluster === undefined ? undefined : loadCluster(flags.cluster);
  const recipe = loadRecipe(ref, (ds) => io.diagnostics(ds), cluster === undefined ? undefined : gpusPerNode(cluster));
  if (recipe.docker_image_dir === undefined) throw new UserError(`recipe ${ref} has no docker_image_dir`, "set docker_image_dir to the folder under docker-images/ that builds its image");
  const folders = imageFolders(imageRoots(), { dir: recipe.docker_image_dir, tag: recipe.docker_image });
  const target = folders.find((f) => f.name === recipe.docker_image_dir);
  if (target === undefined) throw new UserError(`docker-images/${recipe.docker_image_dir}/Dockerfile not found`, `looked in ${imageRoots().join(", ")}`);
  const session = cluster === undefined ? undefined : await openSession(cluster);
  const head = session?.cluster.nodes[0]?.name;
  const builder = flags.local || session === undefined || head === undefined ? new SshDocker(localTransport()) : dockerOf(session, head);
  const built = await buildImage(target, folders, builder, (t) => io.err(t));
  const id = await builder.imageId(recipe.docker_image);
  if (flags.json) io.json({ image: recipe.docker_image, id, node: builder.node, built: built.map((b) => ({ folder: b.name, image: b.tag })) });
  else io.out(`${recipe.docker_image} ${shortId(id)} built on ${builder.node}${built.length > 1 ? ` (with ${built.slice(0, -1).map((b) => b.tag).join(", ")} first)` : ""}; next: launcher images push ${ref}`);
}

/** `launcher images push`: one save, streamed to every node that lacks the image or holds another ID. */
export async function runImagesPush(ref: string, flags: ImageFlags & { from?: string; nodes?: string; relay?: boolean }, io: Output): Promise<void> {
  const { recipe, session } = await recipeOnCluster(ref, flags.cluster, io);
  const image = recipe.docker_image;
  let source: Docker;
  let known: NodeImage[] | undefined;
  if (flags.from === "local") source = new SshDocker(localTransport());
  else if (flags.from !== undefined) source = dockerOf(session, (namedNodes(session, flags.from)[0] as ClusterNode).name);
  else {
    known = await imageReport(image, [...session.docker.values()]);
    const from = pushSource(known);
    if (from === undefined) throw new UserError(`image ${image} is on no node`, `build it first: launcher images build ${ref}`);
    source = dockerOf(session, from);
  }
  const targets = namedNodes(session, flags.nodes).filter((n) => n.name !== source.node).map((n) => dockerOf(session, n.name));
  const direct = { routes: clusterRoutes(session.cluster.nodes), ...(flags.relay === true ? { relay: RELAY_ASKED } : {}), ...(known === undefined ? {} : { known }) };
  // Ctrl-C stops the push where it is and says what each node was left with.
  const result = await withInterrupts(async (signal) => {
    try {
      return await pushImage(image, source, targets, transferProgress((line) => io.err(line), Date.now), signal, direct);
    } catch (e) {
      if (!(e instanceof Interrupted)) throw e;
      const [from] = await imageReport(image, [source]);
      throw new Interrupted(e.signalName, `the push of ${image} was stopped: ${pushLeft(from?.id, await imageReport(image, targets))}`, `launcher images push ${ref} sends it again to the nodes that lack it`);
    }
  });
  if (flags.json) {
    io.json(result);
    return;
  }
  const sent = result.nodes.filter((n) => n.action === "sent");
  io.out(`${image} ${shortId(result.id)} from ${result.source}: ${sent.length === 0 ? "every node already had it" : `sent to ${sent.map((n) => `${n.node} (${mib(n.bytes)}, ${describePath(n)})`).join(", ")}`} in ${result.seconds.toFixed(1)} s; every node now holds the same ID`);
}

export function registerImages(program: Command, io: Output): void {
  const images = program
    .command("images")
    .description("the recipe's image on every node (ID, and whether the nodes agree); build and push it")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (ref: string, flags: ImageFlags) => {
      const { recipe, session } = await recipeOnCluster(ref, flags.cluster, io);
      const nodes = await imageReport(recipe.docker_image, [...session.docker.values()]);
      const ids = new Set(nodes.flatMap((n) => (n.id === undefined ? [] : [n.id])));
      const consistent = ids.size === 1 && nodes.every((n) => n.id !== undefined);
      if (nodes.some((n) => n.error !== undefined)) process.exitCode = 1;
      if (flags.json) {
        io.json({ image: recipe.docker_image, consistent, nodes });
        return;
      }
      io.out(`${recipe.docker_image}${consistent ? ": the same on every node" : ids.size > 1 ? ": DIFFERS between nodes" : ": missing on some nodes"}`);
      for (const n of nodes) io.out(`  ${n.node.padEnd(10)} ${n.error === undefined ? shortId(n.id) : `unreachable: ${n.error}`}`);
      if (!consistent) io.out(`  fix: launcher images push ${ref}`);
    });

  images
    .command("build")
    .description("build the recipe's docker-images/<dir>/ on the head (or here, --local), bases of a FROM chain first")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--local", "build with this machine's Docker")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    // The parent command has --cluster and --json too: commander gives them to it, so merge.
    .action((ref: string, _flags: unknown, cmd: Command) => runImagesBuild(ref, cmd.optsWithGlobals(), io));

  images
    .command("push")
    .description("send the recipe's image to every node that lacks it or has another ID (one save, streamed to all at once)")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--from <node>", "node to send from, or `local` (default: the head, else the first node that has it)")
    .option("--nodes <names>", "comma-separated nodes to send to (default: every node)")
    .option("--relay", "send through this machine instead of node to node")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action((ref: string, _flags: unknown, cmd: Command) => runImagesPush(ref, cmd.optsWithGlobals(), io));
}
