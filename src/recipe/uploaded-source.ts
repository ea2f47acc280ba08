import { existsSync } from "node:fs";
import path from "node:path";
import { readTextFile } from "../config/read-file.js";
import type { FoundRecipe, RecipeSource } from "./resolve.js";
import type { FoundHere } from "./fs-source.js";

const RECIPE_FILE = "recipe.toml";

/**
 * One recipe file as the client read it: what `resolveRecipe` asked its source for (`ref`, and
 * `from`, the file whose `extends` named it) and what the source answered. A daemon given these
 * answers the same questions the same way, so the recipe it boots is the one the client saw, and
 * its diagnostics name the client's files and lines (`file` is the client's name for it).
 */
export interface RecipeLookup extends FoundRecipe {
  readonly ref: string;
  readonly from?: string | undefined;
}

/** `inner`, noting every file it finds (a lookup that fails is not noted: the daemon may know that name). */
export function recordingSource(inner: RecipeSource): { source: RecipeSource; lookups: RecipeLookup[] } {
  const lookups: RecipeLookup[] = [];
  return {
    lookups,
    source: {
      find(ref, from) {
        const found = inner.find(ref, from);
        if (!("error" in found)) lookups.push({ ref, ...(from === undefined ? {} : { from }), file: found.file, id: found.id, text: found.text });
        return found;
      },
    },
  };
}

/** Answers from the client's lookups first; what the client did not find is looked for in `fallback` (the daemon's own folders). */
export function uploadedSource(lookups: readonly RecipeLookup[], fallback: RecipeSource): RecipeSource {
  return {
    find(ref, from) {
      const hit = lookups.find((l) => l.ref === ref && l.from === from);
      return hit === undefined ? fallback.find(ref, from) : { file: hit.file, id: hit.id, text: hit.text };
    },
  };
}

/**
 * A reference that would be read as a path on the machine that resolves it: one holding a `/`
 * (or `\`, a separator on Windows clients), starting with `.` or `~`, absolute, empty, or holding
 * a NUL. A daemon resolves such a reference only from what the client sent (uploadedSource).
 */
export function isHostPath(ref: string): boolean {
  return ref === "" || ref.includes("/") || ref.includes("\\") || ref.includes("\0") || ref.startsWith(".") || ref.startsWith("~") || path.isAbsolute(ref);
}

/**
 * The daemon's own recipes, by bare name only: `<dir>/<name>/recipe.toml` in its recipe folders.
 * Unlike the CLI's source it never reads a path, nor a folder beside the referring file (that
 * file's name is the client's, and beside it on the daemon's disk could be anything). An error
 * quotes the reference, never a file's content.
 */
export function catalogueSource(dirs: readonly string[], here?: FoundHere): RecipeSource {
  return {
    find(ref) {
      if (isHostPath(ref)) {
        return { error: `recipe ${JSON.stringify(ref)} is a path the client did not send, and a daemon reads no path of its machine for a client; the client sends the files it reads, and a bare name is one of the daemon's own recipes` };
      }
      for (const dir of dirs) {
        const file = path.join(dir, ref, RECIPE_FILE);
        if (!existsSync(file)) continue;
        // The daemon's working folder holds no recipe of its own unless it passes the CLI's rule.
        const problem = here !== undefined && here.dirs.includes(dir) ? here.trust(file) : undefined;
        if (problem !== undefined) {
          here?.skipped(file, problem);
          continue;
        }
        return { file, id: ref, text: readTextFile(file, "recipe") };
      }
      return { error: `recipe "${ref}" is neither among the files the client sent nor one of the daemon's own recipes` };
    },
  };
}
