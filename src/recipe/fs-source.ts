import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { nearest } from "../config/suggest.js";
import type { FoundRecipe, RecipeSource } from "./resolve.js";

const RECIPE_FILE = "recipe.toml";

const isPathLike = (ref: string): boolean => ref.includes("/") || ref.endsWith(".toml") || ref === "." || ref === "..";

/**
 * A path as the user knows it: as they gave it (`given`, when it names this file), else relative
 * to the working folder when it lies under it, else absolute; never climbing out with "../".
 */
export function shownPath(abs: string, given?: string): string {
  if (given !== undefined && path.resolve(given) === abs) return given;
  const rel = path.relative(process.cwd(), abs);
  return rel === "" || rel === ".." || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel) ? abs : rel;
}

function read(file: string, given?: string): FoundRecipe | { error: string } {
  const abs = path.resolve(file);
  const base = path.basename(abs);
  const id = base === RECIPE_FILE ? path.basename(path.dirname(abs)) : base.replace(/\.toml$/, "");
  const shown = shownPath(abs, given);
  try {
    return { file: shown, id, text: readTextFile({ path: abs, shown }, "recipe") };
  } catch (e) {
    // A folder named recipe.toml, a device, a huge file: a diagnostic like "not found", not a crash.
    if (e instanceof UserError) return { error: e.message };
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
 * The recipes launcher finds on its own, by a bare name, in folders whoever controls the current
 * folder chooses (the current folder and ./recipes): each is read only when `trust` passes it,
 * else it is passed over for the next place, and `skipped` is told. A path the user types
 * (`./x/`, `/abs`, `x/recipe.toml`) is their own choice and is read as named, as locate.ts does
 * for cluster files.
 */
export interface FoundHere {
  /** Absolute folders whose recipes found by a bare name are judged. */
  readonly dirs: readonly string[];
  /** Why a recipe file may not be read (a clause: "it is owned by ..."), or undefined when it may (src/config/private-dir.ts foundRecipeTrust). */
  readonly trust: (file: string) => string | undefined;
  readonly skipped: (file: string, problem: string) => void;
}

/**
 * Finds recipes on disk: a path to a recipe.toml, its folder, or a name under one of
 * `recipeDirs` (the folder of the referring recipe's siblings is searched first). With `here`,
 * a recipe found by a bare name in one of its folders is read only when trusted.
 */
export function fileRecipeSource(recipeDirs: readonly string[], here?: FoundHere): RecipeSource {
  return {
    find(ref, from) {
      const base = from === undefined ? process.cwd() : path.dirname(path.resolve(from));
      const tried: string[] = [];
      const passed: string[] = [];
      const attempt = (candidate: string): string | undefined => {
        tried.push(candidate);
        const file = asRecipeFile(candidate);
        if (file === undefined || here === undefined || isPathLike(ref) || !here.dirs.includes(path.dirname(candidate))) return file;
        const problem = here.trust(file);
        if (problem === undefined) return file;
        here.skipped(shownPath(file), problem);
        passed.push(`${shownPath(file)} is not read (${problem})`);
        return undefined;
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
        const where = [...new Set(tried.map((t) => shownPath(t, from === undefined && t === candidates[0] ? ref : undefined)))].join(", ");
        // A misspelt name (on the command line or in extends) gets the closest recipe there is.
        const near = isPathLike(ref) ? undefined : nearest(ref, recipeNames(from === undefined ? recipeDirs : [path.dirname(base), ...recipeDirs]));
        const notRead = passed.length === 0 ? "" : `; ${passed.join("; ")}`;
        return { error: `recipe "${ref}" not found (looked for ${where})${notRead}${near === undefined ? "" : `; did you mean "${near}"?`}` };
      }
      // A path given on the command line is shown as written (its recipe.toml added for a folder).
      const given = from === undefined && isPathLike(ref) ? (hit === candidates[0] ? ref : path.join(ref, RECIPE_FILE)) : undefined;
      return read(hit, given);
    },
  };
}
