import { adapterOrDefault } from "../engine/registry.js";
import type { EngineFlags } from "../engine/adapter.js";
import { redactValue } from "../config/redact.js";
import { apiKeyOf, flagsOfWords, longFlag, takesJson } from "./args.js";
import type { Mount, Recipe } from "./recipe.js";
import { canonicalJson } from "./resolve.js";

export interface Change {
  /** `field`, `args`, `env` or `mount`. */
  readonly section: "field" | "args" | "env" | "mount";
  /** The field name, flag, env key or container path. */
  readonly key: string;
  readonly a?: string;
  readonly b?: string;
}

const FIELDS = [
  "engine", "name", "docker_image", "docker_image_dir", "model", "gguf", "required_nodes", "tensor_parallel_size",
  "pipeline_parallel_size", "distributed_backend", "shm_size", "entrypoint",
] as const satisfies readonly (keyof Recipe)[];

// canonicalJson: a table (gguf) compares by its keys and values, whatever order a file wrote them in.
const show = (v: unknown): string | undefined => (v === undefined ? undefined : typeof v === "string" ? v : canonicalJson(v));

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

/** One flag's value as diff compares it: the words as written, or a JSON object parsed. */
type FlagValue = { readonly text: string; readonly object?: Readonly<Record<string, unknown>> };

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * A value the engine parses as JSON (the engine's flag table says which) compares as JSON, not as
 * text: `{"a": 1}` and `{"a":1}` are the same value, keys in any order.
 */
function flagValue(name: string, values: readonly string[], table: EngineFlags): FlagValue {
  const text = values.length === 0 ? "(set)" : values.join(" ");
  const only = values.length === 1 ? values[0] : undefined;
  if (only === undefined || !takesJson(name, only, table)) return { text };
  let parsed: unknown;
  try {
    parsed = JSON.parse(only);
  } catch {
    return { text };
  }
  return isObject(parsed) ? { text: canonicalJson(parsed), object: parsed } : { text: canonicalJson(parsed) };
}

const flagMap = (r: Recipe): Map<string, FlagValue> => {
  const table = flagTable(r);
  const map = new Map<string, FlagValue>();
  for (const f of flagsOfWords(r.args, table)) {
    // An alias or a prefix of a flag is that flag (vLLM's parser reads them alike).
    const key = longFlag(f.name, table);
    const value = flagValue(f.name, f.values, table);
    const before = map.get(key);
    // Given twice: both values, as written (a JSON flag given twice is not compared key by key).
    map.set(key, before === undefined ? value : { text: `${before.text}, ${value.text}` });
  }
  return map;
};

/** `{"a":{"b":5},"c":[1]}` -> `PREFIX.a.b` = `5`, `PREFIX.c` = `[1]`: arrays and empty objects are leaves. */
function jsonLeaves(value: unknown, at: string, out: Map<string, string>): Map<string, string> {
  if (isObject(value) && Object.keys(value).length > 0) for (const [k, v] of Object.entries(value)) jsonLeaves(v, `${at}.${k}`, out);
  else out.set(at, canonicalJson(value));
  return out;
}

/**
 * Flags by flag; a JSON object on both sides key by key (`--speculative-config.num_speculative_tokens:
 * 5 -> 6`), the A/B case users diff most. A flag on one side only is one line with its whole value.
 */
function flagChanges(a: Recipe, b: Recipe): Change[] {
  const fa = flagMap(a);
  const fb = flagMap(b);
  const out: Change[] = [];
  for (const key of new Set([...fa.keys(), ...fb.keys()])) {
    const va = fa.get(key);
    const vb = fb.get(key);
    if (va?.object !== undefined && vb?.object !== undefined) {
      out.push(...keyed(jsonLeaves(va.object, key, new Map()), jsonLeaves(vb.object, key, new Map()), "args", (v) => v));
    } else {
      out.push(...keyed(new Map(va === undefined ? [] : [[key, va.text]]), new Map(vb === undefined ? [] : [[key, vb.text]]), "args", (v) => v));
    }
  }
  return out;
}

const mountText = (m: Mount): string => `${m.host}${m.read_only ? " (read-only)" : ""}${m.env === undefined ? "" : ` env ${m.env}`}`;

/** Field-by-field difference of two resolved recipes: flags by flag (JSON values key by key), env by key, mounts by container path. */
export function diffRecipes(a: Recipe, b: Recipe): Change[] {
  const fields: Change[] = [];
  for (const field of FIELDS) {
    const va = show(a[field]);
    const vb = show(b[field]);
    if (va !== vb) fields.push({ section: "field", key: field, ...(va === undefined ? {} : { a: va }), ...(vb === undefined ? {} : { b: vb }) });
  }
  const changes = [
    ...fields,
    ...flagChanges(a, b),
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
