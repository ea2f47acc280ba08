import { UserError } from "../config/errors.js";
import { IMAGE, kindProblem } from "../config/kinds.js";
import { HUB_REPO_ID, repoFileProblem } from "../engine/hf-snapshot.js";
import { revisionProblem } from "./weights.js";

/**
 * The download commands a huggingface_hub image offers, tried in this order: `hf` (huggingface_hub
 * 0.34 and later) and `huggingface-cli` (older releases). Both take `download REPO_ID --revision
 * REV` and read the token from HF_TOKEN (huggingface_hub src/huggingface_hub/cli/download.py,
 * utils/_auth.py). The next one is tried only when Docker says the command is not in the image:
 * `docker run` exits 127 "if the contained command cannot be found" (Docker's run reference,
 * "Exit status"); 125 is Docker's own failure (e.g. no such image), 126 a command it could not run.
 */
export const DOWNLOADERS = ["hf", "huggingface-cli"] as const;
export type Downloader = (typeof DOWNLOADERS)[number];
export const COMMAND_NOT_FOUND = 127;
export const DOCKER_FAILED = 125;

/** Where the node's HF_HOME is mounted in the download container. */
export const CONTAINER_HF_HOME = "/launcher-hf";


export interface DownloadSpec {
  readonly image: string;
  /** The node's HF_HOME on the host (the hub is HF_HOME/hub). */
  readonly hfHome: string;
  readonly model: string;
  /** A pinned revision; undefined: the Hub's main. */
  readonly revision?: string;
  /** The repo's files to download (WeightsLocation.files); undefined: all of them. */
  readonly files?: readonly string[];
  /** HF_ENDPOINT, when the user set one (a mirror, or the practice cluster's Hub stand-in). */
  readonly endpoint?: string;
  /** The container's name, so that an interrupted download can be removed. */
  readonly name: string;
  readonly downloader: Downloader;
}

/** Checks what reaches the command line; a problem is a user error naming the value. */
export function checkDownload(spec: Pick<DownloadSpec, "image" | "model" | "revision" | "endpoint" | "files">): void {
  const image = kindProblem(IMAGE, "image", spec.image);
  if (image !== undefined) throw new UserError(image.message, image.hint);
  if (!HUB_REPO_ID.test(spec.model)) throw new UserError(`model "${spec.model}" is not a Hugging Face repo id`, "write NAMESPACE/NAME, e.g. Qwen/Qwen3-0.6B, in the recipe's model");
  // One rule with the cache's (plan/weights.ts): the revision is also a path there, snapshots/REV.
  if (spec.revision !== undefined && revisionProblem(spec.revision) !== undefined) {
    throw new UserError(`revision "${spec.revision}" is not a branch, tag or commit`, "pin a revision such as main or a 40-hex commit in the recipe's args");
  }
  if (spec.endpoint !== undefined) endpointProblem(spec.endpoint);
  // Each file is a word after the repo id on the downloader's command line and a path in the cache.
  for (const f of spec.files ?? []) {
    const problem = repoFileProblem(f);
    if (problem !== undefined) throw new UserError(`file "${f.slice(0, 120)}" is no file of a repo: ${problem}`, "name a path in the repo, e.g. Q4_K_M/model-00001-of-00002.gguf");
  }
}

function endpointProblem(endpoint: string): void {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new UserError(`HF_ENDPOINT "${endpoint}" is not a URL`, "set HF_ENDPOINT to http(s)://HOST[:PORT] or unset it for huggingface.co");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UserError(`HF_ENDPOINT "${endpoint}" is not an http(s) URL`, "set HF_ENDPOINT to http(s)://HOST[:PORT]");
  // A secret in a URL ends up in logs and process lists: the token goes in HF_TOKEN only.
  if (url.username !== "" || url.password !== "") throw new UserError("HF_ENDPOINT carries a user or password", "remove them from the URL and put the token in HF_TOKEN (or --token-file)");
}

/**
 * The container's entrypoint (`sh -c READ_TOKEN DOWNLOADER download ...`): HF_TOKEN is the first
 * line of the container's stdin, exported, and the downloader exec'd with the rest of the words as
 * "$@" ("$0" is the downloader). huggingface_hub reads the token from the HF_TOKEN environment
 * variable (src/huggingface_hub/utils/_auth.py get_token; an empty one counts as none), so the
 * token lives only in that process's environment, which only root or the same uid can read. It is
 * never in `--env`: `--env HF_TOKEN` without a value is filled in by the docker client
 * (moby/moby opts/env.go ValidateEnv: os.LookupEnv) and then kept in the container's Config.Env,
 * which anyone in the node's docker group reads with `docker inspect` for the whole download.
 * A downloader the image lacks makes `exec` exit 127, as Docker does for a missing entrypoint.
 */
export const READ_TOKEN = 'IFS= read -r HF_TOKEN || true; export HF_TOKEN; exec "$0" "$@"';

/**
 * The words after `docker run --user UID:GID` (the node's own ids, added on the node so that the
 * cache stays the SSH user's). The container sees the node's HF_HOME at CONTAINER_HF_HOME, uses
 * the host's network (the engine's view of the network; also where a bridge has no route out),
 * never pulls the image (`--pull never`: a missing image fails the create with "No such image",
 * exit 125, docker/cli cli/command/container/create.go; the error then says how to send it), and
 * gets HF_TOKEN on its stdin (READ_TOKEN): `--interactive` attaches the docker client's stdin, the
 * node script's, which is the SSH session's, and closes the container's at its end (`-i` sets
 * StdinOnce, "close stdin at client disconnect": docker/cli cli/command/container/opts.go).
 * HF_HOME and HF_HUB_CACHE are where huggingface_hub puts its cache (constants.py);
 * HF_HUB_OFFLINE=0 overrides an image that sets offline mode.
 */
export function downloadRunArgs(spec: DownloadSpec): string[] {
  checkDownload(spec);
  return [
    "--rm", "--interactive", "--name", spec.name, "--network", "host", "--pull", "never",
    "--volume", `${spec.hfHome}:${CONTAINER_HF_HOME}`,
    "--env", `HF_HOME=${CONTAINER_HF_HOME}`, "--env", `HF_HUB_CACHE=${CONTAINER_HF_HOME}/hub`, "--env", "HF_HUB_OFFLINE=0",
    ...(spec.endpoint === undefined ? [] : ["--env", `HF_ENDPOINT=${spec.endpoint}`]),
    "--entrypoint", "sh",
    "--", spec.image,
    "-c", READ_TOKEN, spec.downloader,
    // `download REPO_ID [FILENAMES]...`: only those files (huggingface_hub cli/download.py).
    "download", spec.model, ...(spec.files ?? []), ...(spec.revision === undefined ? [] : ["--revision", spec.revision]),
  ];
}

/** The node's HF_HOME from the hub folder weightsLocation gives (HF_HOME/hub). */
export const hfHomeOfHub = (hub: string): string => hub.replace(/\/hub$/, "");
