import type { EngineAdapter } from "./adapter.js";
import { vllm } from "./vllm/adapter.js";

/** Every engine launcher drives, keyed by the recipe's `engine`: a new engine is one folder and one line here. */
export const ENGINES: Readonly<Record<string, EngineAdapter>> = { vllm };

export function engineAdapter(name: string): EngineAdapter | undefined {
  return Object.hasOwn(ENGINES, name) ? ENGINES[name] : undefined;
}
