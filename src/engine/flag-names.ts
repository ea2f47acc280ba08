import type { EngineFlags } from "./adapter.js";

/** Every flag spelling an engine's flag table names, as written there (aliases included). */
export function flagNames(table: EngineFlags): string[] {
  return [
    ...table.managed.flatMap((m) => m.flags),
    ...table.singleNode.flatMap((m) => m.flags),
    ...(table.choices ?? []).flatMap((c) => c.flags),
    ...table.boolean,
    ...table.many,
    ...table.json,
    ...table.jsonWhenBraced,
    ...table.model,
    ...table.worldSize.flatMap((w) => w.flags),
    ...table.dividesTensorParallel.flatMap((w) => w.flags),
    ...table.backend,
    ...table.apiKey.flags,
    ...table.flagFiles,
    ...(table.known ?? []),
  ];
}
