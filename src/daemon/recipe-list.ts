import { existsSync, opendirSync, statSync } from "node:fs";
import path from "node:path";
import { MAX_RECIPE_DESCRIPTION, MAX_RECIPES, type ReadAnswer, type RecipeEntry } from "../contract/read-api.js";
import { resolveRecipe, type RecipeSource } from "../recipe/resolve.js";
import { isHostPath } from "../recipe/uploaded-source.js";

/**
 * The daemon's recipe catalogue as the read API's `recipes` lists it: each `<dir>/<name>/recipe.toml`
 * of its recipe folders (the folders catalogueSource reads, first folder first), by the bare name a
 * submission may give. Names come only from those folders, never from a client; a name the
 * catalogue will not serve (a file of the working folder it does not trust) is left out.
 */

/** The most entries read from one folder: a folder of the daemon's own, but not read without end. */
const MAX_SCAN = 4 * MAX_RECIPES;

/** The recipe folders' names in `dir` (at most MAX_SCAN entries read); none when it cannot be read. */
function namesIn(dir: string): string[] {
  let handle: ReturnType<typeof opendirSync>;
  try {
    handle = opendirSync(dir);
  } catch {
    return [];
  }
  const names: string[] = [];
  try {
    for (let i = 0; i < MAX_SCAN; i++) {
      // null once every entry is read (Node docs, fs.Dir dir.readSync()).
      const entry = handle.readSync();
      if (entry === null) break;
      // Whatever the entry's type (a link to a folder, or one a file system reports as unknown),
      // what counts is what catalogueSource reads, and existsSync follows links as reading does.
      if (!isHostPath(entry.name) && existsSync(path.join(dir, entry.name, "recipe.toml"))) names.push(entry.name);
    }
  } catch {
    // A folder that fails half-way read: what was read stands.
  } finally {
    handle.closeSync();
  }
  return names;
}

/** What the listing says of one recipe: its `name` key (cut) as description, its engine and model. */
export function recipeEntry(name: string, recipe: { readonly name?: string; readonly engine?: string; readonly model?: string } | undefined): RecipeEntry {
  const description = recipe?.name?.trim();
  return {
    name,
    ...(description === undefined || description === "" ? {} : { description: description.length > MAX_RECIPE_DESCRIPTION ? `${description.slice(0, MAX_RECIPE_DESCRIPTION - 1)}…` : description }),
    ...(recipe?.engine === undefined ? {} : { engine: recipe.engine }),
    ...(recipe?.model === undefined ? {} : { model: recipe.model }),
  };
}

/** A file's identity for the cache: its path, modification time and size; "" when it cannot be read. */
function stampOf(file: string): string {
  try {
    const st = statSync(file);
    return `${file}\0${st.mtimeMs}\0${st.size}`;
  } catch {
    return "";
  }
}

/**
 * The catalogue's recipes by name, at most `max`. A recipe is resolved again only when a file of
 * its chain (itself and what it extends) changed: resolving judges its args by the engine's flag
 * table, a couple of milliseconds each on the daemon's loop, too long to do for hundreds on every read.
 */
export class RecipeList {
  /** Each resolved recipe's entry, with the files of its chain and their stamps when it was resolved. */
  private readonly resolved = new Map<string, { readonly files: readonly string[]; readonly stamp: string; readonly entry: RecipeEntry }>();

  constructor(
    private readonly dirs: readonly string[],
    private readonly catalogue: RecipeSource,
    private readonly max = MAX_RECIPES,
  ) {}

  list(): ReadAnswer<"recipes"> {
    const names = [...new Set(this.dirs.flatMap(namesIn))].sort();
    const recipes: RecipeEntry[] = [];
    const kept = new Set<string>();
    for (const name of names) {
      if (recipes.length >= this.max) return this.answer(recipes, kept, true);
      const found = this.catalogue.find(name);
      if ("error" in found) continue;
      kept.add(name);
      recipes.push(this.entryOf(name, found.file));
    }
    return this.answer(recipes, kept, false);
  }

  private entryOf(name: string, file: string): RecipeEntry {
    const known = this.resolved.get(name);
    if (known !== undefined && known.files.map(stampOf).join("\n") === known.stamp) return known.entry;
    const recipe = resolveRecipe(name, this.catalogue).recipe;
    const entry = recipeEntry(name, recipe);
    // One that does not resolve is not kept: which file would mend it (a parent it names) is not known.
    if (recipe === undefined) this.resolved.delete(name);
    else {
      const files = [file, ...recipe.chain.filter((f) => f !== file)];
      this.resolved.set(name, { files, stamp: files.map(stampOf).join("\n"), entry });
    }
    return entry;
  }

  /** The answer, and the cache kept to the names listed (a removed recipe's entry goes). */
  private answer(recipes: RecipeEntry[], kept: ReadonlySet<string>, truncated: boolean): ReadAnswer<"recipes"> {
    for (const name of this.resolved.keys()) if (!kept.has(name)) this.resolved.delete(name);
    return truncated ? { recipes, truncated } : { recipes };
  }
}

/** The catalogue's recipes by name, at most `max`, resolved afresh. */
export const listRecipes = (dirs: readonly string[], catalogue: RecipeSource, max = MAX_RECIPES): ReadAnswer<"recipes"> => new RecipeList(dirs, catalogue, max).list();
