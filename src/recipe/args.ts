import { error, warning, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { envLineProblem } from "../config/env-file.js";
import type { EngineAdapter, EngineFlags, ManagedFlag } from "../engine/adapter.js";
import { flagNames } from "../engine/flag-names.js";
import { nearest } from "../config/suggest.js";
import type { Mount, Recipe } from "./recipe.js";

/** One engine flag as written in a recipe's args, with the args element it came from. */
export interface Flag {
  readonly name: string;
  /** The first of `values`: most flags take exactly one. */
  readonly value?: string;
  readonly values: readonly string[];
  /** Index of the args element holding the flag name (for error positions). */
  readonly element: number;
  /** Index of the args element holding the (first) value, when it is a separate word. */
  readonly valueElement?: number;
}

export interface Word {
  readonly word: string;
  readonly element: number;
}

export interface ParsedArgs {
  readonly flags: Flag[];
  /** Words that are neither a flag nor a flag's value: the engine's parser stops on them. */
  readonly stray: Word[];
}

/** How many values each flag takes; flags it does not name take one when a non-flag word follows. */
export type FlagShapes = Pick<EngineFlags, "boolean" | "many" | "attached">;

const NO_SHAPES: FlagShapes = { boolean: [], many: [] };

const isFlag = (w: string): boolean => w.startsWith("-") && w.length > 1 && !/^-\d/.test(w);

/** A `#` word comes from a comment written inside an args string: it is never meant as a value. */
export const isCommentWord = (w: string): boolean => w.startsWith("#");

/**
 * Flags compare without regard to `_` versus `-` in the name, as vLLM's parser treats them alike:
 * up to the first `.` only, since what follows in `--compilation-config.cudagraph_mode` is a JSON
 * key (vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args).
 */
export function flagKey(name: string): string {
  const dashes = name.startsWith("--") ? 2 : 1;
  const dot = name.indexOf(".", dashes);
  const end = dot < 0 ? name.length : dot;
  return name.slice(0, dashes) + name.slice(dashes, end).replace(/_/g, "-") + name.slice(end);
}

/**
 * The keys of a list of flag names, made once per list: the engine's tables are constants, and a
 * recipe's check asks for them once per flag it reads; made at each ask, they would be most of
 * `validate`'s own time.
 */
function once<K extends object>(make: (k: K) => ReadonlySet<string>): (k: K) => ReadonlySet<string> {
  const made = new WeakMap<K, ReadonlySet<string>>();
  return (k) => {
    const known = made.get(k);
    if (known !== undefined) return known;
    const set = make(k);
    made.set(k, set);
    return set;
  };
}

const keySet = once((names: readonly string[]) => new Set(names.map(flagKey)));

/** The flags of `shapes` that take no value: each also as its BooleanOptionalAction `--no-` twin. */
const booleanKeysOf = once((names: readonly string[]) => {
  const keys = new Set(names.map(flagKey));
  for (const k of [...keys]) if (k.startsWith("--")) keys.add(`--no-${k.slice(2)}`);
  return keys;
});
const booleanKeys = (shapes: FlagShapes): ReadonlySet<string> => booleanKeysOf(shapes.boolean);

/** Whether the flag takes no value (an on/off flag or its `--no-` twin). */
export const takesNoValue = (name: string, shapes: FlagShapes): boolean => booleanKeys(shapes).has(flagKey(name));

/** `-n2` as `-n` and `2` when `-n` is a flag that takes its value in the same word (EngineFlags.attached). */
function attachedValue(word: string, shapes: FlagShapes): { name: string; value: string } | undefined {
  if (word.startsWith("--") || word.includes("=")) return undefined;
  const name = (shapes.attached ?? []).find((a) => word.length > a.length && word.startsWith(a));
  return name === undefined ? undefined : { name, value: word.slice(name.length) };
}

export function parseFlags(words: readonly Word[], shapes: FlagShapes = NO_SHAPES): ParsedArgs {
  const boolean = booleanKeys(shapes);
  const many = keySet(shapes.many);
  const flags: Flag[] = [];
  const stray: Word[] = [];
  const isValue = (w: Word | undefined): w is Word => w !== undefined && !isFlag(w.word) && !isCommentWord(w.word);
  for (let i = 0; i < words.length; i++) {
    const w = words[i] as Word;
    if (!isFlag(w.word)) {
      stray.push(w);
      continue;
    }
    // argparse takes `--name=value` and `-x=value` alike (ArgumentParser._parse_optional).
    const eq = w.word.indexOf("=");
    const joined = eq > 1 ? { name: w.word.slice(0, eq), value: w.word.slice(eq + 1) } : attachedValue(w.word, shapes);
    if (joined !== undefined) {
      flags.push({ name: joined.name, value: joined.value, values: [joined.value], element: w.element });
      continue;
    }
    const key = flagKey(w.word);
    const values: Word[] = [];
    if (!boolean.has(key)) {
      while (isValue(words[i + 1]) && (values.length === 0 || many.has(key))) values.push(words[++i] as Word);
    }
    const first = values[0];
    flags.push(
      first === undefined
        ? { name: w.word, values: [], element: w.element }
        : { name: w.word, value: first.word, values: values.map((v) => v.word), element: w.element, valueElement: first.element },
    );
  }
  return { flags, stray };
}

/** The flags of a resolved recipe's args (already split into words). */
export function flagsOfWords(words: readonly string[], shapes: FlagShapes = NO_SHAPES): Flag[] {
  return parseFlags(words.map((word) => ({ word, element: 0 })), shapes).flags;
}

export function renderFlags(flags: readonly Pick<Flag, "name" | "values">[]): string[] {
  return flags.flatMap((f) => [f.name, ...f.values]);
}

/** The first flag with this name (any of its spellings). */
export function findFlag(flags: readonly Flag[], name: string): Flag | undefined {
  const key = flagKey(name);
  return flags.find((f) => flagKey(f.name) === key);
}

/** The first flag written under any of `names` (a flag and its aliases). */
export function findAnyFlag(flags: readonly Flag[], names: readonly string[]): Flag | undefined {
  const keys = keySet(names);
  return flags.find((f) => keys.has(flagKey(f.name)));
}

const hasName = (m: ManagedFlag, key: string): boolean => m.flags.some((f) => flagKey(f) === key);

/** Every flag spelling the engine table names, so that an abbreviation is told from a flag of its own. */
const knownKeys = once((table: EngineFlags) => new Set(flagNames(table).map(flagKey)));

/**
 * The managed flag a written flag stands for: its own spelling or alias, or an abbreviation of
 * it. vLLM's parser is an argparse.ArgumentParser with allow_abbrev left on, so `--nnode 2` sets
 * --nnodes (vllm/utils/argparse_utils.py, FlexibleArgumentParser).
 */
export function managedFlagOf(name: string, table: EngineFlags): { managed: ManagedFlag; abbreviates?: string[] } | undefined {
  const key = flagKey(name);
  const exact = table.managed.find((m) => hasName(m, key));
  if (exact !== undefined) return { managed: exact };
  // A parser whose options are known: the option the word stands for, a single-dash prefix too.
  if (table.known !== undefined) {
    const match = matchOption(name, table.known, table.abbreviations !== false);
    // Several flags it could stand for (argparse refuses it): named by the managed one among them.
    const options = match.kind === "known" ? [match.option] : match.kind === "ambiguous" ? match.candidates : [];
    const managed = options.map((o) => table.managed.find((m) => hasName(m, flagKey(o)))).find((m) => m !== undefined);
    return managed === undefined ? undefined : { managed, abbreviates: [...options] };
  }
  if (!key.startsWith("--") || key.length < 4 || knownKeys(table).has(key)) return undefined;
  const longs = table.managed.flatMap((m) => m.flags.filter((f) => f.startsWith("--") && flagKey(f).startsWith(key)).map((f) => ({ m, f })));
  const first = longs[0];
  return first === undefined ? undefined : { managed: first.m, abbreviates: longs.map((l) => l.f) };
}

/** Whether the engine's parser knows a flag as written, and what it takes it for. */
export type OptionMatch = { readonly kind: "known"; readonly option: string } | { readonly kind: "ambiguous"; readonly candidates: readonly string[] } | { readonly kind: "unknown"; readonly nearest?: string };

/**
 * Whether an argparse parser with these option strings takes `name` (a flag as written, its
 * `=value` split off): CPython Lib/argparse.py (3.12) _parse_optional takes an exact option
 * first, then _get_option_tuples: every option that starts with the word (allow_abbrev, which
 * vLLM's parser leaves on), one match being that option and several "ambiguous option"; a
 * single-dash word whose first two characters are an option is that option with its value
 * attached (`-n2`). vLLM's dotted form (`--compilation-config.mode`, `-cc.mode`) is read by
 * FlexibleArgumentParser as the flag before the dot (vllm/utils/argparse_utils.py).
 */
export function matchOption(name: string, known: readonly string[], prefixes = true): OptionMatch {
  const key = flagKey(name);
  const dashes = key.startsWith("--") ? 2 : 1;
  const dot = key.indexOf(".", dashes);
  const word = dot < 0 ? key : key.slice(0, dot);
  const options = keySet(known);
  if (options.has(word)) return { kind: "known", option: word };
  if (dashes === 1 && word.length > 2 && options.has(word.slice(0, 2)) && prefixes) return { kind: "known", option: word.slice(0, 2) };
  // A parser that takes options only as spelled (EngineFlags.abbreviations false) knows no prefix.
  const candidates = prefixes ? [...options].filter((o) => o.startsWith(word) && word.length > dashes) : [];
  const [only] = candidates;
  if (candidates.length === 1 && only !== undefined) return { kind: "known", option: only };
  if (candidates.length > 1) return { kind: "ambiguous", candidates };
  const near = nearest(word, [...options]);
  return near === undefined ? { kind: "unknown" } : { kind: "unknown", nearest: near };
}

/**
 * The name a flag is compared by: its long spelling when the parser knows it under an alias or a
 * prefix (`-sc` and `--speculative` are `--speculative-config`), else the flag as written.
 */
export function longFlag(name: string, table: EngineFlags): string {
  const written = flagKey(name);
  // vLLM's dotted form (`-cc.mode`): the key after the flag stays, as its own part of the value.
  const dot = written.indexOf(".", written.startsWith("--") ? 2 : 1);
  const suffix = dot < 0 ? "" : written.slice(dot);
  const match = table.known === undefined ? undefined : matchOption(name, table.known, table.abbreviations !== false);
  const key = match?.kind === "known" ? match.option : dot < 0 ? written : written.slice(0, dot);
  const group = (table.aliases ?? []).find((g) => g.some((s) => flagKey(s) === key));
  return (group?.find((s) => s.startsWith("--")) ?? key) + suffix;
}

/** Whether the engine parses this flag's value as JSON; a JSON-or-string flag only when written `{...}`. */
export function takesJson(name: string, value: string, table: EngineFlags): boolean {
  const key = flagKey(name);
  if (keySet(table.json).has(key)) return true;
  // vllm/engine/arg_utils.py union_dict_and_str: json.loads only when the value matches `{...}`.
  return keySet(table.jsonWhenBraced).has(key) && /^\s*\{[\s\S]*\}\s*$/.test(value);
}

/**
 * The key the engine's API demands, if the recipe sets one: the flag's first value, else the env
 * variable (the engine takes the flag first). Empty values set no key, as in vLLM.
 */
export function apiKeyOf(args: readonly string[], env: Readonly<Record<string, string>>, table: EngineFlags): string | undefined {
  const flag = findAnyFlag(flagsOfWords(args, table), table.apiKey.flags);
  // vllm/entrypoints/openai/api_server.py: `args.api_key or [envs.VLLM_API_KEY]`, empty keys dropped.
  if (flag !== undefined && flag.values.length > 0) return flag.values.find((v) => v !== "");
  const fromEnv = env[table.apiKey.env];
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv;
}

/**
 * A recipe's args with the engine's API key flags (and their values) left out, and the key they
 * gave: launcher hands the key to the engine in its env instead (see src/plan/plan.ts), so that
 * it is in no process's arguments.
 */
export function withoutApiKeyFlags(args: readonly string[], table: EngineFlags): { args: string[]; key?: string } {
  const { flags } = parseFlags(args.map((word, element) => ({ word, element })), table);
  const drop = new Set<number>();
  let key: string | undefined;
  for (const f of flags) {
    if (findAnyFlag([f], table.apiKey.flags) === undefined) continue;
    // `--api-key=K` is one word; `--api-key K ...` is the flag and its values, one word each.
    const words = f.valueElement === undefined ? 1 : 1 + f.values.length;
    for (let i = 0; i < words; i++) drop.add(f.element + i);
    key ??= f.values.find((v) => v !== "");
  }
  return { args: args.filter((_, i) => !drop.has(i)), ...(key === undefined ? {} : { key }) };
}

/** Where the diagnostics of engineInputDiagnostics point. */
export interface EngineInputLocs {
  readonly flag: (f: Flag) => Loc;
  readonly env: (key: string) => Loc;
  /** An `[[extra_mounts]]` entry, whose `env` names a variable too. */
  readonly mount: (m: Mount) => Loc;
}

/**
 * What a resolved recipe hands the engine that launcher must refuse or warn about: env switches
 * that open the engine's admin routes (unless `unsafe_dev_routes = true`), env with which the
 * engine rewrites env launcher manages, an API key flag with more keys than the engine's env
 * variable holds, env values docker's env file cannot carry.
 */
export function engineInputDiagnostics(
  recipe: Pick<Recipe, "args" | "env" | "extra_mounts" | "unsafe_dev_routes">,
  engine: Pick<EngineAdapter, "flags" | "devSwitches" | "envOverrides">,
  at: EngineInputLocs,
): Diagnostic[] {
  const out: Diagnostic[] = [];
  // Every name the container's env gets from the recipe: its [env], and each mount's `env`, which
  // the plan sets to the mount's container path (src/plan/plan.ts).
  const named = [
    ...Object.keys(recipe.env).map((key) => ({ key, what: `env ${key}`, loc: at.env(key) })),
    ...recipe.extra_mounts.flatMap((m) => (m.env === undefined ? [] : [{ key: m.env, what: `the mount at ${m.container} sets env ${m.env}, which`, loc: at.mount(m) }])),
  ];
  for (const s of engine.devSwitches ?? []) {
    for (const n of named.filter((x) => x.key === s.env)) {
      if (recipe.unsafe_dev_routes === true) out.push(warning(n.loc, `${n.what} opens ${s.opens}: keep the engine's address private (api_bind)`));
      else out.push(error(n.loc, `${n.what} opens ${s.opens}`, "remove it, or state the risk with unsafe_dev_routes = true at the top of the recipe"));
    }
  }
  for (const m of engine.flags.managed) {
    const flag = m.flags.find((f) => f.startsWith("--")) ?? m.flags[0] ?? "?";
    for (const n of named.filter((x) => m.env?.includes(x.key) === true)) {
      out.push(error(n.loc, `${n.what} is ${engine.flags.judge?.engine ?? "the engine"}'s ${flag} read from the environment: ${m.why ?? "launcher manages that flag"}`, m.instead));
    }
  }
  for (const o of engine.envOverrides ?? []) {
    const value = recipe.env[o.env];
    if (value === undefined) continue;
    out.push(warning(at.env(o.env), `env ${o.env}: ${o.says(value)}`));
    if (o.needs !== undefined && recipe.env[o.needs] === undefined) out.push(error(at.env(o.env), `env ${o.env} is set without ${o.needs}: the engine refuses one without the other`, `set both, or neither`));
  }
  const keyFlag = findAnyFlag(flagsOfWords(recipe.args, engine.flags), engine.flags.apiKey.flags);
  if (keyFlag !== undefined && keyFlag.values.filter((v) => v !== "").length > 1) {
    out.push(
      error(at.flag(keyFlag), `${keyFlag.name} gives ${keyFlag.values.length} keys: launcher passes the engine its key in ${engine.flags.apiKey.env}, which holds one (so that no key is in a process's arguments)`, "give one key"),
    );
  }
  for (const [key, value] of Object.entries(recipe.env)) {
    const problem = envLineProblem(key, value);
    if (problem !== undefined) out.push(error(at.env(key), `env ${key}: ${problem}`, "put the value in a file in a mounted folder and point the engine at it"));
  }
  return out;
}
