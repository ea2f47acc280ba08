import { adapterOrDefault } from "../engine/registry.js";
import type { EngineFlags } from "../engine/adapter.js";
import { redactValue } from "../config/redact.js";
import { apiKeyOf, flagKey, flagsOfWords } from "./args.js";
import type { Mount, Recipe } from "./recipe.js";

export interface Change {
  /** `field`, `args`, `env` or `mount`. */
  readonly section: "field" | "args" | "env" | "mount";
  /** The field name, flag, env key or container path. */
  readonly key: string;
  readonly a?: string;
  readonly b?: string;
}

const FIELDS = [
  "engine", "name", "docker_image", "docker_image_dir", "model", "required_nodes", "tensor_parallel_size",
  "pipeline_parallel_size", "distributed_backend", "shm_size", "entrypoint",
] as const satisfies readonly (keyof Recipe)[];

const show = (v: unknown): string | undefined => (v === undefined ? undefined : typeof v === "string" ? v : JSON.stringify(v));

function keyed<T>(a: ReadonlyMap<string, T>, b: ReadonlyMap<string, T>, section: Change["section"], render: (v: T) => string): Change[] {
  const out: Change[] = [];
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const va = a.get(key);
    const vb = b.get(key);
    const ra = va === undefined ? undefined : render(va);
    const rb = vb === undefined ? undefined : render(vb);
    if (ra === rb) continue;
    out.push({ section, key, ...(ra === undefined ? {} : { a: ra }), ...(rb === undefined ? {} : { b: rb }) });
  }
  return out;
}

const flagTable = (r: Recipe): EngineFlags => adapterOrDefault(r.engine).flags;

const flagMap = (r: Recipe): Map<string, string> => {
  const map = new Map<string, string>();
  for (const f of flagsOfWords(r.args, flagTable(r))) {
    const key = flagKey(f.name);
    const value = f.values.length === 0 ? "(set)" : f.values.join(" ");
    map.set(key, map.has(key) ? `${map.get(key) ?? ""}, ${value}` : value);
  }
  return map;
};

const mountText = (m: Mount): string => `${m.host}${m.read_only ? " (read-only)" : ""}${m.env === undefined ? "" : ` env ${m.env}`}`;

/** Field-by-field difference of two resolved recipes: flags by flag, env by key, mounts by container path. */
export function diffRecipes(a: Recipe, b: Recipe): Change[] {
  const fields: Change[] = [];
  for (const field of FIELDS) {
    const va = show(a[field]);
    const vb = show(b[field]);
    if (va !== vb) fields.push({ section: "field", key: field, ...(va === undefined ? {} : { a: va }), ...(vb === undefined ? {} : { b: vb }) });
  }
  const changes = [
    ...fields,
    ...keyed(flagMap(a), flagMap(b), "args", (v) => v),
    ...keyed(new Map(Object.entries(a.env)), new Map(Object.entries(b.env)), "env", (v) => v),
    ...keyed(new Map(a.extra_mounts.map((m) => [m.container, m])), new Map(b.extra_mounts.map((m) => [m.container, m])), "mount", mountText),
  ];
  // A changed engine API key shows as a change, never as the key.
  const secrets = [a, b].flatMap((r) => apiKeyOf(r.args, r.env, flagTable(r)) ?? []);
  return redactValue(changes, secrets) as Change[];
}

export function formatChanges(changes: readonly Change[]): string[] {
  return changes.map((c) => {
    const label = c.section === "field" ? c.key : `${c.section} ${c.key}`;
    if (c.a === undefined) return `+ ${label}: ${c.b ?? ""}`;
    if (c.b === undefined) return `- ${label}: ${c.a}`;
    return `~ ${label}: ${c.a} -> ${c.b}`;
  });
}
