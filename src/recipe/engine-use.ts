import { error, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { ENGINE_RECIPE_KEYS, type EngineAdapter, type EngineRecipeKey } from "../engine/adapter.js";
import { adapterOrDefault, ENGINES, type EngineRegistry } from "../engine/registry.js";
import type { Mount, Recipe } from "./recipe.js";

/** Where a resolved recipe wrote what this check reads (the layer of the extends chain that set it). */
export interface EngineUseLocs {
  /** The line that sets a top-level key, or undefined when no file of the chain sets it. */
  readonly key: (key: EngineRecipeKey) => Loc | undefined;
  readonly env: (key: string) => Loc;
  readonly mount: (m: Mount) => Loc;
}

const hasPrefix = (name: string, prefixes: readonly string[]): boolean => prefixes.some((p) => name.startsWith(p));

/** The other engines that read a key, for the message: "(vLLM reads it)". */
function readersOf(key: EngineRecipeKey, self: EngineAdapter, engines: EngineRegistry): string {
  const readers = Object.values(engines).filter((e) => e !== self && e.recipeUse.keys.includes(key)).map((e) => e.recipeUse.engine);
  return readers.length === 0 ? "" : ` (${readers.join(" and ")} ${readers.length === 1 ? "reads" : "read"} it)`;
}

/**
 * Strict recipes per engine: a key of ENGINE_RECIPE_KEYS that the recipe's engine does not read,
 * and an env name that only another engine reads (by the prefixes each adapter claims), are errors
 * at the line that sets them. Without this a recipe moved from one engine to another keeps a key
 * the new engine silently drops (sparkrun issues #221, #276, #284).
 */
export function engineUseDiagnostics(recipe: Pick<Recipe, "engine" | "env" | "extra_mounts">, at: EngineUseLocs, engines: EngineRegistry = ENGINES): Diagnostic[] {
  const self = Object.hasOwn(engines, recipe.engine) ? (engines[recipe.engine] as EngineAdapter) : adapterOrDefault(recipe.engine);
  const use = self.recipeUse;
  const out: Diagnostic[] = [];
  for (const key of ENGINE_RECIPE_KEYS) {
    const loc = at.key(key);
    if (loc === undefined || use.keys.includes(key)) continue;
    out.push(error(loc, `${key} is not read by ${use.engine}: engine = "${self.name}" ignores it${readersOf(key, self, engines)}`, use.ignored?.[key] ?? `remove ${key}`));
  }
  const named = [
    ...Object.keys(recipe.env).map((key) => ({ key, what: `env ${key}`, loc: at.env(key) })),
    // A mount's env that is no string is the schema's error already, at its own position.
    ...recipe.extra_mounts.flatMap((m) => (typeof m.env !== "string" ? [] : [{ key: m.env, what: `the mount at ${m.container} sets env ${m.env}, which`, loc: at.mount(m) }])),
  ];
  for (const n of named) {
    if (hasPrefix(n.key, use.envPrefixes)) continue;
    const owners = Object.values(engines).filter((e) => e !== self && hasPrefix(n.key, e.recipeUse.envPrefixes));
    if (owners.length === 0) continue;
    const prefixes = owners.flatMap((e) => e.recipeUse.envPrefixes.filter((p) => n.key.startsWith(p)).map((p) => `${p}*`));
    const own = use.envPrefixes.length === 0 ? "" : `; ${use.engine} reads ${use.envPrefixes.map((p) => `${p}*`).join(", ")}`;
    out.push(
      error(
        n.loc,
        `${n.what} is read only by ${owners.map((e) => e.recipeUse.engine).join(" and ")} (${prefixes.join(", ")}): engine = "${self.name}" ignores it`,
        `remove it${own}`,
      ),
    );
  }
  return out;
}
