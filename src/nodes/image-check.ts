import { RemoteError } from "../config/errors.js";
import type { ImageFacts } from "../engine/image-contract.js";
import { engineAdapter } from "../engine/registry.js";
import type { Plan } from "../plan/plan.js";
import type { Docker } from "../remote/docker.js";

/** Where what was read of an image is kept between runs (the store), by image ID. */
export interface ImageFactsCache {
  get(imageId: string): ImageFacts | undefined;
  put(imageId: string, facts: ImageFacts): void;
}

// `vllm --version` imports vLLM's CLI modules (and torch) before it parses: seconds, up to a minute
// on a cold Spark. Once per image ID.
const VERSION_TIMEOUT_MS = 180_000;
const PROBE_TIMEOUT_MS = 60_000;

// docker run's own error, as opposed to the probed program's (docker/cli docs/reference/run.md,
// "Exit status": 125 Docker, 126 cannot be invoked, 127 not found, else the program's code).
const DOCKER_ERROR = 125;

export interface ImageCheck {
  /** What is wrong with the image for this plan, each naming the image and its version. */
  readonly problems: readonly string[];
  /** The engine version the image reports, when it could be read. */
  readonly version?: string;
  /** Why the version could not be read, when it could not. */
  readonly unread?: string;
}

/**
 * Reads the image's entrypoint and engine version on one node (or takes them from the cache: an
 * image ID names one exact content) and asks the recipe's engine what is wrong with them.
 */
export async function checkImage(plan: Plan, docker: Docker, imageId: string, cache: ImageFactsCache | undefined, signal?: AbortSignal): Promise<ImageCheck> {
  const contract = engineAdapter(plan.recipe.engine)?.image;
  if (contract === undefined) return { problems: [] };
  const image = plan.recipe.docker_image;
  let facts = cache?.get(imageId);
  let unread: string | undefined;
  if (facts === undefined) {
    try {
      const [entrypoint, run] = await Promise.all([docker.imageEntrypoint(image), docker.runInImage(image, contract.versionCommand, VERSION_TIMEOUT_MS, signal)]);
      const version = run.code === 0 ? contract.parseVersion(run.output) : null;
      if (version === null) unread = `\`${contract.versionCommand.join(" ")}\` in the image printed no version (exit ${run.code}: ${run.output.trim().split("\n").slice(-2).join(" ")})`;
      facts = { entrypoint, version };
    } catch (e) {
      return { problems: [couldNotRead(docker, image, e)] };
    }
    // Only a full reading is kept: a version that could not be read is asked for again next time.
    if (facts.version !== null) cache?.put(imageId, facts);
  }
  const use = { backend: plan.recipe.distributed_backend, ...(plan.recipe.entrypoint === undefined ? {} : { entrypoint: plan.recipe.entrypoint }) };
  const problems = contract.problems(image, facts, use);
  for (const probe of contract.probes?.(use) ?? []) {
    let r: { code: number; output: string };
    try {
      r = await docker.runInImage(image, probe.argv, PROBE_TIMEOUT_MS, signal);
    } catch (e) {
      problems.push(couldNotRead(docker, image, e));
      continue;
    }
    const ran = `\`${probe.argv.join(" ")}\` in the image: exit ${r.code}${r.output.trim() ? `, ${r.output.trim().split("\n").at(-1) ?? ""}` : ""}`;
    // 127 (not found), 126 (not runnable) or the program's own failure: the image lacks it.
    if (r.code === DOCKER_ERROR) problems.push(`${docker.node}: could not check image ${image} (${ran})`);
    else if (r.code !== 0) problems.push(`${docker.node}: ${probe.problem(image)} (${ran})`);
  }
  return { problems, ...(facts.version === null ? {} : { version: facts.version }), ...(unread === undefined ? {} : { unread }) };
}

function couldNotRead(docker: Docker, image: string, e: unknown): string {
  if (!(e instanceof RemoteError)) throw e;
  return `${docker.node}: could not read image ${image}: ${e.message}${e.detail ? ` (${e.detail.split("\n").slice(-2).join(" ")})` : ""}`;
}
