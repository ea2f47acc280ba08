import type { FoundRecipe, RecipeSource } from "./resolve.js";

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
