import type { JudgedFlags } from "../engine/adapter.js";
import { adapterOrDefault } from "../engine/registry.js";
import { imageFacts, type ImageFactsCache } from "../nodes/image-check.js";
import type { Docker } from "../remote/docker.js";
import { RemoteError } from "../config/errors.js";

/** Who judged a recipe's args, as `validate --json` says it (args_judged_by). */
export interface ArgsJudgedBy {
  readonly by: "image" | "table";
  readonly engine: string;
  readonly version: string;
  readonly image?: string;
  readonly image_id?: string;
}

/** An image's own parser as an engine's flag table, or why it could not be read. */
export type ImageJudge = { readonly ok: true; readonly judged: JudgedFlags; readonly imageId: string } | { readonly ok: false; readonly problem: string };

/**
 * `validate --image`: the image's own argument parser (read in a throwaway container on `docker`'s
 * machine, or taken from the cache by image ID), made into `engine`'s flag table.
 */
export async function judgeByImage(image: string, engine: string, docker: Docker, cache?: ImageFactsCache): Promise<ImageJudge> {
  const adapter = adapterOrDefault(engine);
  if (adapter.flagsFrom === undefined || adapter.image.parserCommand === undefined) return { ok: false, problem: `engine ${adapter.name} cannot describe its parser: its args are judged by launcher's table` };
  // Asked first, so that a docker that is missing or does not answer is not taken for a missing image.
  const answering = await dockerAnswers(docker);
  if (answering !== undefined) return { ok: false, problem: answering };
  const imageId = await docker.imageId(image);
  if (imageId === undefined) return { ok: false, problem: `image ${image} is not on ${docker.node}: docker pull it (or launcher images build) first` };
  const read = await imageFacts(docker, image, imageId, adapter.image, cache);
  if ("problem" in read) return { ok: false, problem: read.problem };
  if (read.facts.parser === undefined) return { ok: false, problem: `image ${image}: ${read.facts.parserUnread ?? "its parser was not read"}` };
  return { ok: true, judged: adapter.flagsFrom(read.facts.parser, image), imageId };
}

/** Why `docker` cannot be asked anything, or undefined when it answers. */
async function dockerAnswers(docker: Docker): Promise<string | undefined> {
  try {
    await docker.serverVersion();
    return undefined;
  } catch (e) {
    if (e instanceof RemoteError) return `docker on ${docker.node} does not answer: ${e.message}${e.detail ? ` (${e.detail.split("\n").slice(-1)[0] ?? ""})` : ""}`;
    // spawn's own error (Node's child_process: code ENOENT when the program is not on PATH).
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return `there is no docker command on ${docker.node}`;
    throw e;
  }
}

/** Who judged with `judged` (undefined: the engine's table), for messages and JSON. */
export function judgedBy(engine: string, judge?: ImageJudge & { ok: true }): ArgsJudgedBy {
  const j = judge?.judged.flags.judge ?? adapterOrDefault(engine).flags.judge;
  const base = { by: j?.by ?? "table", engine: j?.engine ?? engine, version: j?.version ?? "unknown" } as const;
  return judge === undefined || j?.image === undefined ? base : { ...base, image: j.image, image_id: judge.imageId };
}
