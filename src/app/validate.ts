import { hasErrors, type Diagnostic } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { DEFAULT_ENGINE, ENGINES } from "../engine/registry.js";
import type { ImageFactsCache } from "../nodes/image-check.js";
import type { Docker } from "../remote/docker.js";
import type { ImageFolders, RecipeSource, Resolved } from "../recipe/resolve.js";
import { judgeByImage, judgedBy, type ArgsJudgedBy, type ImageJudge } from "./image-judge.js";
import { resolveRecipeRef } from "./lookup.js";

/** One recipe as `validate` reports it (its --json `recipes[]`). */
export interface ValidatedRecipe {
  readonly ref: string;
  readonly file: string | undefined;
  readonly ok: boolean;
  readonly diagnostics: Diagnostic[];
  readonly args_judged_by: ArgsJudgedBy;
}

export interface ValidateOptions {
  readonly gpusPerNode?: number;
  readonly imageFolders: ImageFolders;
  /** Judge the args by this image's own parser, read with `docker` (this machine's). */
  readonly image?: { readonly name: string; readonly docker: () => Promise<{ docker: Docker; cache?: ImageFactsCache }> };
}

/**
 * `launcher validate`: every recipe checked, its args judged by the engine's table, or by the
 * image's own parser when one is named (a problem reading it is the user's to fix: an error).
 */
export async function validateRecipes(refs: readonly string[], source: RecipeSource, options: ValidateOptions): Promise<ValidatedRecipe[]> {
  const resolve = (ref: string, judges?: ReadonlyMap<string, ImageJudge & { ok: true }>): Resolved =>
    resolveRecipeRef(ref, source, options.gpusPerNode, { imageFolders: options.imageFolders, ...(judges === undefined ? {} : { flagsFor: (e) => judges.get(e)?.judged.flags }) });
  const judges = options.image === undefined ? undefined : await imageJudges(refs.map((r) => resolve(r)), options.image);
  return refs.map((ref) => {
    const r = resolve(ref, judges);
    const engine = r.recipe?.engine ?? r.engine ?? DEFAULT_ENGINE;
    return { ref, file: r.recipe?.file, ok: !hasErrors(r.diagnostics), diagnostics: r.diagnostics, args_judged_by: judgedBy(engine, judges?.get(engine)) };
  });
}

/** The image's parser for each engine the recipes use. */
async function imageJudges(first: readonly Resolved[], image: NonNullable<ValidateOptions["image"]>): Promise<Map<string, ImageJudge & { ok: true }>> {
  const engines = new Set(first.map((r) => r.recipe?.engine ?? r.engine ?? DEFAULT_ENGINE));
  const { docker, cache } = await image.docker();
  const out = new Map<string, ImageJudge & { ok: true }>();
  for (const engine of engines) {
    const judge = await judgeByImage(image.name, engine, docker, cache);
    if (!judge.ok) throw new UserError(`--image ${image.name}: ${judge.problem}`, "without --image, validate judges the args by launcher's table");
    out.set(engine, judge);
  }
  return out;
}

/** Whether the images of the engine a table is of (as messages name it) can describe their own parser. */
const imageCanJudge = (engine: string): boolean => Object.values(ENGINES).some((e) => e.flags.judge?.engine === engine && e.flagsFrom !== undefined && e.image.parserCommand !== undefined);

/** What judged the args, said once per judge, for a person reading validate's output. */
export function judgedLines(results: readonly ValidatedRecipe[]): string[] {
  const seen = new Map(results.map((r) => [JSON.stringify(r.args_judged_by), r.args_judged_by]));
  return [...seen.values()].map((j) =>
    j.by === "image"
      ? `launcher: args judged by ${j.engine} ${j.version}'s own parser in image ${j.image ?? "?"}`
      : `launcher: args judged by launcher's table of ${j.engine} ${j.version}, not an image's own parser (${imageCanJudge(j.engine) ? "validate --image IMAGE judges them by the image; up does it on the head" : "its images cannot describe their parser: the engine's own parser judges them when up runs"})`,
  );
}
