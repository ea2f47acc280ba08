import type { EngineAdapter } from "./adapter.js";
import { vllm } from "./vllm/adapter.js";
import { sglang } from "./sglang/adapter.js";
import { llamacpp } from "./llamacpp/adapter.js";

/** Every engine launcher drives, keyed by the recipe's `engine`: a new engine is one folder and one line here. */
export const ENGINES = { vllm, sglang, llamacpp } as const satisfies Readonly<Record<string, EngineAdapter>>;

export type EngineName = keyof typeof ENGINES;
/** A set of engines by name: ENGINES, or (in a test) ENGINES plus one more. */
export type EngineRegistry = Readonly<Record<string, EngineAdapter>>;

/** The recipe schema's `engine` values (the first is the default). */
export const ENGINE_NAMES = Object.keys(ENGINES) as [EngineName, ...EngineName[]];
/** The engine of a recipe without `engine`, and of a container made before the `launcher.engine` label. */
export const DEFAULT_ENGINE: EngineName = "vllm";

export function engineAdapter(name: string, engines: EngineRegistry = ENGINES): EngineAdapter | undefined {
  return Object.hasOwn(engines, name) ? engines[name] : undefined;
}

/**
 * The adapter of a name that validation has already accepted (a recipe's engine) or that a
 * container's label carries; no name is the default engine. A name no adapter has is a bug at
 * plan time, and reads as "unknown" where a container from another launcher version is read.
 */
export function adapterOf(name: string | undefined, engines: EngineRegistry = ENGINES): EngineAdapter | undefined {
  return engineAdapter(name ?? DEFAULT_ENGINE, engines);
}

/**
 * The adapter to read a recipe's words with, also while the recipe is still being checked: an
 * engine name that validation refuses is already an error of its own, and the rest of the file is
 * read as the default engine's, so that one report shows every problem.
 */
export function adapterOrDefault(name: string | undefined): EngineAdapter {
  return adapterOf(name) ?? ENGINES[DEFAULT_ENGINE];
}

/** The /v1 routes of every engine with the methods each takes: the gateway fronts them all. */
export function engineApiMethods(engines: EngineRegistry = ENGINES): Readonly<Record<string, readonly string[]>> {
  const out: Record<string, string[]> = {};
  for (const e of Object.values(engines)) {
    for (const [route, methods] of Object.entries(e.apiMethods)) out[route] = [...new Set([...(out[route] ?? []), ...methods])];
  }
  return out;
}

/** The /v1 routes some engine has that the gateway never forwards, with why (the first engine's words win). */
export function engineRefusedRoutes(engines: EngineRegistry = ENGINES): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of Object.values(engines)) for (const [route, why] of Object.entries(e.apiRefused ?? {})) out[route] ??= why;
  return out;
}
