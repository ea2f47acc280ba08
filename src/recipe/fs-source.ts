import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { nearest } from "../config/suggest.js";
import type { FoundRecipe, RecipeSource } from "./resolve.js";

const RECIPE_FILE = "recipe.toml";

const isPathLike = (ref: string): boolean => ref.includes("/") || ref.endsWith(".toml") || ref === "." || ref === "..";

function read(file: string): FoundRecipe | { error: string } {
  const abs = path.resolve(file);
  const base = path.basename(abs);
  const id = base === RECIPE_FILE ? path.basename(path.dirname(abs)) : base.replace(/\.toml$/, "");
  const shown = path.relative(process.cwd(), abs) || abs;
  try {
    return { file: shown, id, text: readTextFile(abs, "recipe") };
  } catch (e) {
    // A folder named recipe.toml, a device, a huge file: a diagnostic like "not found", not a crash.
    if (e instanceof UserError) return { error: e.message.replace(abs, shown) };
    throw e;
  }
}

function asRecipeFile(candidate: string): string | undefined {
  if (!existsSync(candidate)) return undefined;
  if (statSync(candidate).isDirectory()) {
    const inner = path.join(candidate, RECIPE_FILE);
    return existsSync(inner) ? inner : undefined;
  }
  return candidate;
}

/** The recipe names under `dirs` (folders holding a recipe.toml), for a did-you-mean. */
function recipeNames(dirs: readonly string[]): string[] {
  return dirs.flatMap((d) => {
    try {
      return readdirSync(d, { withFileTypes: true }).filter((e) => e.isDirectory() && existsSync(path.join(d, e.name, RECIPE_FILE))).map((e) => e.name);
    } catch {
      return [];
    }
  });
}

/**
 * Finds recipes on disk: a path to a recipe.toml, its folder, or a name under one of
 * `recipeDirs` (the folder of the referring recipe's siblings is searched first).
 */
export function fileRecipeSource(recipeDirs: readonly string[]): RecipeSource {
  return {
    find(ref, from) {
      const base = from === undefined ? process.cwd() : path.dirname(path.resolve(from));
      const tried: string[] = [];
      const attempt = (candidate: string): string | undefined => {
        tried.push(candidate);
        return asRecipeFile(candidate);
      };
      // A bare name is a folder here (first run) or a sibling recipe (extends), then one under recipes/.
      const candidates = isPathLike(ref)
        ? [path.resolve(base, ref)]
        : [from === undefined ? path.resolve(base, ref) : path.resolve(path.dirname(base), ref), ...recipeDirs.map((d) => path.resolve(d, ref))];
      let hit: string | undefined;
      for (const candidate of candidates) {
        hit = attempt(candidate);
        if (hit !== undefined) break;
      }
      if (hit === undefined) {
        const where = [...new Set(tried.map((t) => path.relative(process.cwd(), t) || t))].join(", ");
        // A misspelt name (on the command line or in extends) gets the closest recipe there is.
        const near = isPathLike(ref) ? undefined : nearest(ref, recipeNames(from === undefined ? recipeDirs : [path.dirname(base), ...recipeDirs]));
        return { error: `recipe "${ref}" not found (looked for ${where})${near === undefined ? "" : `; did you mean "${near}"?`}` };
      }
      return read(hit);
    },
  };
}
