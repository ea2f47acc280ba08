import { createHash } from "node:crypto";
import { RemoteError } from "../config/errors.js";
import type { EngineFlags, JudgedFlags } from "../engine/adapter.js";
import { argparseDumpOf, readArgparseDump } from "../engine/argparse-dump.js";
import type { ImageContract, ImageFacts, ImageUse } from "../engine/image-contract.js";
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
  /** The image's own parser made into the engine's flag table, when it could be read. */
  readonly judged?: JudgedFlags;
  /** Why the args were judged by launcher's table rather than the image's parser, when they were. */
  readonly tableJudged?: string;
}

/**
 * The recipe's args judged by a flag table (the image's own parser): each error as
 * `file:line:col: message`, [] when the args pass. The recipe's host makes it (it has the files).
 */
export type ArgsJudge = (flags: EngineFlags) => readonly string[];

/**
 * Reads the image's entrypoint, engine version and argument parser on one node (or takes them
 * from the cache: an image ID names one exact content), asks the recipe's engine what is wrong
 * with them, and judges the recipe's args by the image's own parser (`judge`).
 */
export async function checkImage(plan: Plan, docker: Docker, imageId: string, cache: ImageFactsCache | undefined, signal?: AbortSignal, judge?: ArgsJudge): Promise<ImageCheck> {
  const engine = engineAdapter(plan.recipe.engine);
  if (engine === undefined) return { problems: [] };
  const image = plan.recipe.docker_image;
  const read = await imageFacts(docker, image, imageId, engine.image, cache, signal);
  if ("problem" in read) return { problems: [read.problem] };
  const { facts, unread } = read;
  const use = { backend: plan.recipe.distributed_backend, ...(plan.recipe.entrypoint === undefined ? {} : { entrypoint: plan.recipe.entrypoint }) };
  const problems = [...engine.image.problems(image, facts, use), ...(await probeImage(docker, image, engine.image, use, signal))];
  const judged = facts.parser === undefined ? undefined : engine.flagsFrom?.(facts.parser, image);
  const refused = judged === undefined || judge === undefined ? [] : judge(judged.flags);
  const by = judged?.flags.judge;
  if (refused.length > 0) problems.push(`the args of ${plan.recipe.id}, judged by ${by === undefined ? "the image's own parser" : `${by.engine} ${by.version}'s own parser`} in image ${image} (read on ${docker.node}):\n${refused.map((r) => `      ${r}`).join("\n")}`);
  return {
    problems,
    ...(facts.version === null ? {} : { version: facts.version }),
    ...(unread === undefined ? {} : { unread }),
    ...(judged === undefined ? {} : { judged }),
    ...(judged === undefined && engine.flagsFrom !== undefined ? { tableJudged: facts.parserUnread ?? "the image's parser was not read" } : {}),
  };
}

/** What the image says of itself, read once per image ID; a reading that failed for now is asked again next time. */
export async function imageFacts(docker: Docker, image: string, imageId: string, contract: ImageContract, cache: ImageFactsCache | undefined, signal?: AbortSignal): Promise<{ facts: ImageFacts; unread?: string } | { problem: string }> {
  const cached = cache?.get(imageId);
  const parserFresh = cached !== undefined && parserKept(cached, contract);
  if (cached !== undefined && parserFresh) return { facts: cached };
  // The parser is optional: its own failure leaves the args to the table, never the boot refused.
  const parser = contract.parserCommand === undefined || parserFresh ? undefined : readParser(docker, image, contract, signal);
  let read: { entrypoint: readonly string[] | null; run?: { code: number; output: string } };
  try {
    const [entrypoint, run] = await Promise.all([
      cached === undefined ? docker.imageEntrypoint(image) : cached.entrypoint,
      cached === undefined ? docker.runInImage(image, contract.versionCommand, VERSION_TIMEOUT_MS, signal) : undefined,
    ]);
    read = { entrypoint, ...(run === undefined ? {} : { run }) };
  } catch (e) {
    await parser;
    return { problem: couldNotRead(docker, image, e) };
  }
  const dumped = (await parser) ?? keptParser(cached);
  const { run } = read;
  // `vllm --version` first; a fork whose version line it cannot read still has its parser's.
  const fromDump = dumped.parser === undefined ? null : contract.parseVersion(dumped.parser.engine_version);
  const version = run === undefined ? (cached?.version ?? null) : ((run.code === 0 ? contract.parseVersion(run.output) : null) ?? fromDump);
  const unread = run === undefined || version !== null ? undefined : `\`${contract.versionCommand.join(" ")}\` in the image printed no version (exit ${run.code}: ${run.output.trim().split("\n").slice(-2).join(" ")})`;
  const { lasting, ...parserPart } = dumped;
  const facts: ImageFacts = { entrypoint: read.entrypoint, version, ...parserPart };
  // Only a full reading is kept: a version that could not be read, or a parser that failed for now
  // (killed, timed out, Docker's own error), is asked for again next time.
  if (facts.version !== null && lasting) cache?.put(imageId, facts);
  return { facts, ...(unread === undefined ? {} : { unread }) };
}

// The dump program's exits that say something lasting of the image: Python's own exception (1),
// its usage error (2), no program to run (126, 127). Others (137 killed, 124 timed out, 130
// interrupted, 125 Docker's own error) may go another way next time.
const LASTING_EXITS = new Set([1, 2, 126, 127]);

type ParserRead = Pick<ImageFacts, "parser" | "parserUnread" | "parserProgram"> & { readonly lasting: boolean };

/** The dump program's identity: a reading by another program (an older launcher's) is not kept. */
const programId = (contract: ImageContract): string => createHash("sha256").update(JSON.stringify(contract.parserCommand ?? [])).digest("hex").slice(0, 16);

/** Whether the cached facts hold this program's reading of the parser, still of the format this launcher reads. */
function parserKept(facts: ImageFacts, contract: ImageContract): boolean {
  if (contract.parserCommand === undefined) return true;
  if (facts.parserProgram !== programId(contract)) return false;
  return facts.parser === undefined ? facts.parserUnread !== undefined : argparseDumpOf(facts.parser).ok;
}

const keptParser = (facts: ImageFacts | undefined): ParserRead => ({
  lasting: true,
  ...(facts?.parser === undefined ? {} : { parser: facts.parser }),
  ...(facts?.parserUnread === undefined ? {} : { parserUnread: facts.parserUnread }),
  ...(facts?.parserProgram === undefined ? {} : { parserProgram: facts.parserProgram }),
});

/** The parser the dump program printed, or why there is none (no Python, the program failed, it could not run). */
async function readParser(docker: Docker, image: string, contract: ImageContract, signal?: AbortSignal): Promise<ParserRead> {
  const what = `\`${contract.parserCommand?.[0] ?? "?"}\` in the image`;
  const parserProgram = programId(contract);
  let run: { code: number; output: string };
  try {
    run = await docker.runInImage(image, contract.parserCommand ?? [], VERSION_TIMEOUT_MS, signal);
  } catch (e) {
    if (!(e instanceof RemoteError)) throw e;
    return { lasting: false, parserProgram, parserUnread: `${what} could not be run (${e.message})` };
  }
  if (run.code !== 0) return { lasting: LASTING_EXITS.has(run.code), parserProgram, parserUnread: `${what} could not describe the engine's parser (exit ${run.code}${run.code === 127 ? ": not found" : ""})` };
  const dump = readArgparseDump(run.output);
  return dump.ok ? { lasting: true, parserProgram, parser: dump.dump } : { lasting: true, parserProgram, parserUnread: `${what}: ${dump.problem}` };
}

/** What else this use needs inside the image (a program), each asked of it. */
async function probeImage(docker: Docker, image: string, contract: ImageContract, use: ImageUse, signal?: AbortSignal): Promise<string[]> {
  const problems: string[] = [];
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
  return problems;
}

function couldNotRead(docker: Docker, image: string, e: unknown): string {
  if (!(e instanceof RemoteError)) throw e;
  return `${docker.node}: could not read image ${image}: ${e.message}${e.detail ? ` (${e.detail.split("\n").slice(-2).join(" ")})` : ""}`;
}
