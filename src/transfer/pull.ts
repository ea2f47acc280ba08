import { randomBytes } from "node:crypto";
import type { ClusterNode } from "../cluster/cluster.js";
import { RemoteError, UserError } from "../config/errors.js";
import { redactText } from "../config/redact.js";
import { COMMAND_NOT_FOUND, DOCKER_FAILED, DOWNLOADERS, checkDownload, downloadRunArgs, hfHomeOfHub, type Downloader } from "../plan/pull.js";
import { weightsLocation } from "../plan/weights.js";
import type { Recipe } from "../recipe/recipe.js";
import type { Docker } from "../remote/docker.js";
import { syncWeights, weightsReport, type SyncResult } from "./models.js";
import { mib, type TransferProgress } from "../nodes/progress.js";
import { checkPullSpace } from "./pull-space.js";
import type { ClusterSession } from "../nodes/session.js";

export interface PullOptions {
  /** The image with huggingface_hub to download in; the recipe's image by default. */
  readonly image?: string;
  /** The node to download on; the first of `nodes` by default. */
  readonly node?: string;
  /** HF_TOKEN: sent to the node on stdin, never in an argv, a URL or a message. */
  readonly token?: string;
  readonly endpoint?: string;
  /** A line of the downloader's progress, as it prints it. */
  readonly note?: (line: string) => void;
}

export interface PullResult {
  readonly model: string;
  /** Undefined when a node already had the snapshot: nothing was downloaded. */
  readonly download?: { readonly node: string; readonly image: string; readonly downloader: Downloader; readonly revision: string; readonly seconds: number };
  /** Where it already was, when nothing was downloaded. */
  readonly already?: string;
  readonly sync: SyncResult;
}

// $1 the node's HF_HOME, then `docker run`'s words. The token arrives as stdin's first line, and
// `docker run --interactive` passes this stdin on to the container, where READ_TOKEN (plan/pull.ts)
// reads it: so it is in no argv here, on the node or in the container, and not in the container's
// config either. `--user` keeps the cache the SSH user's (the engine's containers read it as root
// either way). stderr joins stdout: the downloader's progress.
const PULL_SCRIPT = `home="$1"; shift
mkdir -p "$home/hub" </dev/null || exit 3
exec docker run --user "$(id -u):$(id -g)" "$@" 2>&1`;

/** Lines of the downloader's output; tqdm redraws with \r, so both end a line. */
function lines(stream: NodeJS.ReadableStream, each: (line: string) => void): void {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const parts = (rest + chunk).split(/\r|\n/);
    rest = parts.pop() ?? "";
    for (const p of parts) if (p.trim() !== "") each(p);
  });
  stream.on("end", () => rest.trim() !== "" && each(rest));
}

/** One download attempt with one downloader: its exit code and its last output lines. */
async function runDownload(docker: Docker, hfHome: string, args: readonly string[], name: string, token: string, signal: AbortSignal, note: (line: string) => void): Promise<{ code: number; tail: string[] }> {
  const p = docker.transport.spawn(["sh", "-c", PULL_SCRIPT, "sh", hfHome, ...args]);
  p.stdin.end(`${token}\n`);
  const tail: string[] = [];
  let last = 0;
  lines(p.stdout, (line) => {
    tail.push(line);
    if (tail.length > 20) tail.shift();
    // At most one progress line a second: tqdm redraws many times a second.
    if (Date.now() - last >= 1000) {
      last = Date.now();
      note(line);
    }
  });
  const abort = (): void => p.kill();
  signal.addEventListener("abort", abort, { once: true });
  try {
    const r = await p.done;
    return { code: r.code, tail: [...tail, ...r.stderr.split("\n").filter(Boolean).slice(-5)] };
  } finally {
    signal.removeEventListener("abort", abort);
    // Killing ssh ends the docker client, not the container: remove it, so that nothing keeps
    // writing the .incomplete blob that the next pull resumes.
    if (signal.aborted) await docker.transport.exec(["docker", "rm", "--force", "--", name], { timeoutMs: 30_000 }).catch(() => undefined);
  }
}

/**
 * `launcher models pull`: the recipe's model (its pinned revision if any) into one node's Hugging
 * Face cache, downloaded there in a container of an image that has huggingface_hub, then synced
 * to the other nodes with `models sync`. Where a node already has the snapshot nothing is
 * downloaded; where the nodes share the cache (a NAS mount), the others see the download and the
 * sync copies nothing. Before the download container starts, checkPullSpace makes sure the node has
 * room for what its cache lacks (the sync checks the other nodes before it copies). An interrupted download resumes as the image's huggingface_hub does: the
 * finished files are kept, and the partial one is resumed from BLOB.incomplete with a Range request
 * (file_download.py _download_to_tmp_and_move at f7c9b7dfd5e5) or, since huggingface_hub PR #4228,
 * started again from a per-process BLOB.<8 hex>.incomplete (which a killed download leaves behind).
 */
export async function pullModel(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], options: PullOptions, progress: TransferProgress, signal: AbortSignal): Promise<PullResult> {
  const first = nodes[0];
  if (first === undefined) throw new UserError("no node to pull the model to", "name nodes with --nodes");
  const target = options.node === undefined ? first : nodes.find((n) => n.name === options.node);
  if (target === undefined) throw new UserError(`--node ${options.node ?? ""} is not one of the nodes the model goes to (${nodes.map((n) => n.name).join(", ")})`, "name one of them, or add it to --nodes");
  const loc = weightsLocation(recipe, target);
  if (loc === undefined) throw new UserError(`node ${target.name}: the HF cache path uses ~ but the node's user is unknown`, `set user (or home) for ${target.name} in the cluster file`);
  const image = options.image ?? recipe.docker_image;
  const endpointSpec = options.endpoint === undefined ? {} : { endpoint: options.endpoint };
  const filesSpec = loc.files === undefined ? {} : { files: loc.files };
  checkDownload({ image, model: recipe.model, ...(loc.revision === undefined ? {} : { revision: loc.revision }), ...endpointSpec, ...filesSpec });

  const before = await weightsReport(recipe, session, nodes, signal);
  const had = before.find((r) => r.present);
  let download: PullResult["download"];
  if (had === undefined) {
    const docker = session.docker.get(target.name) as Docker;
    const hfHome = hfHomeOfHub(loc.hub);
    const token = options.token ?? "";
    const secrets = token === "" ? [] : [token];
    const note = options.note ?? (() => undefined);
    // Before any container runs the download: room on the node for what the model still needs.
    const space = await checkPullSpace(docker.transport, loc, { ...endpointSpec, token, model: recipe.model }, signal);
    if (space.cleaned.files > 0) note(`${target.name}: removed ${space.cleaned.files} partial file(s) (${mib(space.cleaned.bytes)}) that a killed huggingface_hub left and never resumes`);
    const started = Date.now();
    let used: Downloader | undefined;
    for (const downloader of DOWNLOADERS) {
      const name = `launcher-pull-${randomBytes(4).toString("hex")}`;
      const args = downloadRunArgs({ image, hfHome, model: recipe.model, ...(loc.revision === undefined ? {} : { revision: loc.revision }), ...endpointSpec, ...filesSpec, name, downloader });
      const r = await runDownload(docker, hfHome, args, name, token, signal, (line) => note(`${target.name}: ${redactText(line, secrets)}`));
      if (signal.aborted) throw new UserError(`interrupted: the partial download stays in ${loc.hub} on ${target.name}, and a new \`launcher models pull\` resumes it`);
      const tail = redactText(r.tail.join("\n"), secrets);
      if (r.code === 0) {
        used = downloader;
        break;
      }
      if (r.code === COMMAND_NOT_FOUND) continue;
      if (r.code === DOCKER_FAILED && /No such image|Unable to find image/i.test(tail)) {
        throw new UserError(`image ${image} is not on ${target.name}`, "send it there first (launcher images push RECIPE), or pick an image that is there with --image");
      }
      throw new RemoteError(target.name, `downloading ${recipe.model} with ${downloader} in ${image} failed (exit ${r.code})`, tail, "check HF_ENDPOINT, and HF_TOKEN (or --token-file) for a gated or private model");
    }
    if (used === undefined) throw new UserError(`image ${image} has no huggingface_hub download command (${DOWNLOADERS.join(", ")}) or no sh to start it`, "pick an image that has huggingface_hub with --image (the recipe's engine image usually has it)");
    const after = (await weightsReport(recipe, session, [target], signal))[0];
    if (after?.present !== true) throw new RemoteError(target.name, `the download ended but the snapshot is not complete in ${loc.hub}`, after?.reason);
    download = { node: target.name, image, downloader: used, revision: after.revision as string, seconds: (Date.now() - started) / 1000 };
  }
  const sync = await syncWeights(recipe, session, nodes, progress, signal);
  return { model: recipe.model, ...(download === undefined ? {} : { download }), ...(had === undefined ? {} : { already: had.node }), sync };
}
