import { error, warning, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { CONTAINER_PATH, DOCKER_SIZE, HOST_PATH, IMAGE, kindDiagnostics } from "../config/kinds.js";
import { schemaDiagnostics } from "../config/schema-issues.js";
import { splitShellWords } from "../config/shell-words.js";
import type { TomlDocument, TomlPath } from "../config/toml-document.js";
import { adapterOrDefault } from "../engine/registry.js";
import type { EngineFlags } from "../engine/adapter.js";
import { flagKey, isCommentWord, longFlag, managedFlagOf, matchOption, parseFlags, takesJson, takesNoValue, type Flag, type Word } from "./args.js";
import { MOUNT_KEYS, RECIPE_KEYS, recipeFileSchema, type RecipeFile } from "./schema.js";

/** The checks of one recipe file on its own; checks across the `extends` chain come later. */
export interface CheckedFile {
  readonly value: RecipeFile;
  readonly words: Word[];
  /** The args as the engine's parser reads them. */
  readonly flags: Flag[];
  readonly stray: Word[];
  readonly diagnostics: Diagnostic[];
  /** Keys written with a wrong value: later checks leave them alone rather than repeat the error. */
  readonly invalidKeys: ReadonlySet<string>;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const knownKeys = (path: TomlPath): readonly string[] =>
  path.length === 0 ? RECIPE_KEYS : path[0] === "extra_mounts" ? MOUNT_KEYS : [];

/** A top-level key found inside a table: the header above it swallowed it. */
function swallowedKeys(doc: TomlDocument, raw: Record<string, unknown>): Diagnostic[] {
  const out: Diagnostic[] = [];
  const tables: [TomlPath, Record<string, unknown>][] = [];
  for (const [key, value] of Object.entries(raw)) {
    if (Array.isArray(value)) {
      value.forEach((v, i) => {
        if (v !== null && typeof v === "object" && !Array.isArray(v)) tables.push([[key, i], v as Record<string, unknown>]);
      });
    } else if (value !== null && typeof value === "object" && !(value instanceof Date)) {
      tables.push([[key], value as Record<string, unknown>]);
    }
  }
  for (const [path, table] of tables) {
    for (const key of Object.keys(table)) {
      if (!RECIPE_KEYS.includes(key) || (path[0] === "extra_mounts" && MOUNT_KEYS.includes(key))) continue;
      const header = doc.tableOf([...path, key]);
      if (header === undefined) continue;
      out.push(
        error(
          doc.locateKey([...path, key]),
          `"${key}" is inside the ${header.header} table (line ${header.loc.line}): the table header above it swallowed this top-level key`,
          `move "${key}" above the first [table] header of the file`,
        ),
      );
      delete table[key];
    }
  }
  return out;
}

/** The flag table an engine's args are judged by (an image's own parser), or undefined: the engine's table. */
export type FlagsFor = (engine: string) => EngineFlags | undefined;

/** `inherited`: the engine a file that names none gets from its `extends` chain (its args are that engine's). */
export function checkRecipeFile(doc: TomlDocument, flagsFor?: FlagsFor, inherited?: string): CheckedFile {
  const raw = structuredClone(doc.value);
  const diagnostics = swallowedKeys(doc, raw);
  const parsed = recipeFileSchema.safeParse(raw);
  if (!parsed.success) diagnostics.push(...schemaDiagnostics(doc, parsed.error.issues, knownKeys));
  // Keep checking what did parse, so that one report shows every problem of the file.
  const value = (parsed.success ? parsed.data : partialValue(raw)) as RecipeFile;
  const invalidKeys = new Set(Object.keys(raw).filter((k) => !(k in value)));
  const adapter = adapterOrDefault(value.engine ?? inherited);
  const table = flagsFor?.(adapter.name) ?? adapter.flags;

  const words: Word[] = [];
  (value.args ?? []).forEach((element, i) => {
    if (typeof element !== "string") return;
    // An element that is JSON as written (a TOML literal string '{"rope_scaling":{...}}') is
    // one value: shell-splitting it would strip the quotes JSON needs.
    const json = jsonElement(element);
    if (json !== undefined) {
      words.push({ word: json, element: i });
      return;
    }
    const split = splitShellWords(element.trim());
    if (!split.ok) {
      diagnostics.push(
        error(doc.locate(["args", i]), `args[${i}]: ${split.message} in ${JSON.stringify(element.trim())}`, "close the quote: JSON values go inside one pair of single quotes"),
      );
      return;
    }
    for (const word of split.words) words.push({ word, element: i });
  });
  const { flags, stray } = parseFlags(words, table);

  for (const flag of flags) diagnostics.push(...flagDiagnostics(doc, flag, table));
  for (const w of stray) {
    const at = doc.locate(["args", w.element]);
    const before = onOffBefore(w, words, table);
    if (before !== undefined) {
      diagnostics.push(error(at, `args: ${JSON.stringify(w.word)} follows ${before}, an on/off flag that takes no value: the engine's parser would stop on it`, onOffFix(before)));
    } else if (isCommentWord(w.word)) {
      diagnostics.push(error(at, `args: ${JSON.stringify(w.word)} is a comment written inside an args string: the engine would get its words as arguments`, "put the comment outside the quotes (a TOML # comment on its own line)"));
    } else {
      diagnostics.push(error(at, `args: ${JSON.stringify(w.word)} is not a flag nor a flag's value: the engine's parser would stop on it`, "the model is the recipe's model key; args hold --flags and their values"));
    }
  }
  const seen = new Map<string, Flag>();
  for (const flag of flags) {
    // An alias or a prefix is its flag: `-sc` after `--speculative-config` gives it twice.
    const key = longFlag(flag.name, table);
    const first = seen.get(key);
    if (first) diagnostics.push(warning(doc.locate(["args", flag.element]), `${flag.name} is given twice (first in args[${first.element}])`));
    else seen.set(key, flag);
  }

  // Values that land in `docker run`'s argv: checked for their kind, so none reads as an option.
  if (typeof value.shm_size === "string") diagnostics.push(...kindDiagnostics(doc.locate(["shm_size"]), DOCKER_SIZE, "shm_size", value.shm_size));
  if (typeof value.docker_image === "string") diagnostics.push(...kindDiagnostics(doc.locate(["docker_image"]), IMAGE, "docker_image", value.docker_image));
  if (typeof value.entrypoint === "string" && !splitShellWords(value.entrypoint).ok) {
    diagnostics.push(error(doc.locate(["entrypoint"]), "entrypoint has unbalanced quotes"));
  }
  for (const key of Object.keys(value.env ?? {})) {
    if (!ENV_NAME.test(key)) diagnostics.push(error(doc.locateKey(["env", key]), `env key ${JSON.stringify(key)} is not a valid variable name`));
    if (adapter.managedEnv.includes(key)) {
      diagnostics.push(error(doc.locateKey(["env", key]), `env ${key} is managed by launcher (set per node from the cluster file)`, "remove it; set fabric_iface, fabric_ip, hca or gid_index on the node in the cluster file"));
    }
  }
  const containers = new Map<string, number>();
  (value.extra_mounts ?? []).forEach((m, i) => {
    if (typeof m !== "object" || m === null) return;
    if (typeof m.container === "string") {
      diagnostics.push(...kindDiagnostics(doc.locate(["extra_mounts", i, "container"]), CONTAINER_PATH, `extra_mounts[${i}].container`, m.container));
      const before = containers.get(m.container);
      if (before !== undefined) diagnostics.push(error(doc.locate(["extra_mounts", i, "container"]), `extra_mounts[${i}] mounts ${m.container} again (also extra_mounts[${before}])`));
      containers.set(m.container, i);
    }
    if (typeof m.host === "string") diagnostics.push(...kindDiagnostics(doc.locate(["extra_mounts", i, "host"]), HOST_PATH, `extra_mounts[${i}].host`, m.host));
    if (typeof m.env === "string" && !ENV_NAME.test(m.env)) {
      diagnostics.push(error(doc.locate(["extra_mounts", i, "env"]), `extra_mounts[${i}].env ${JSON.stringify(m.env)} is not a valid variable name`));
    }
  });
  return { value, words, flags, stray, diagnostics, invalidKeys };
}

/** What is wrong with one flag as written: managed or refused, a value it cannot take, JSON that does not parse. */
function flagDiagnostics(doc: TomlDocument, flag: Flag, table: EngineFlags): Diagnostic[] {
  const out: Diagnostic[] = [];
  const at = doc.locate(["args", flag.element]);
  const managed = managedFlagOf(flag.name, table);
  const why = managed?.managed.why;
  if (managed?.abbreviates !== undefined) {
    const what = why === undefined ? "which launcher manages" : `which launcher refuses: ${why}`;
    out.push(error(at, `${flag.name} abbreviates ${managed.abbreviates.join(" or ")}, ${what} (the engine's parser takes a unique prefix for the whole flag)`, managed.managed.instead));
  } else if (managed !== undefined) {
    out.push(error(at, why === undefined ? `${flag.name} is managed by launcher and must not be in args` : `${flag.name}: ${why}`, managed.managed.instead));
  }
  if (managed === undefined) out.push(...unknownFlagDiagnostics(at, flag, table));
  const valueAt = doc.locate(["args", flag.valueElement ?? flag.element]);
  out.push(...flagValueDiagnostics(flag, table).map((d) => error(valueAt, d.message, d.fix)));
  if (table.flagFiles.some((f) => flagKey(f) === flagKey(flag.name))) {
    out.push(
      warning(at, `${flag.name} ${flag.value ?? ""}: the engine reads more flags from this file inside the container, where launcher cannot check them`, "keep launcher-managed flags and --api-key out of it; put the API key in args or env so that launcher can send it"),
    );
  }
  flag.values.forEach((v, n) => {
    if (!takesJson(flag.name, v, table)) return;
    try {
      JSON.parse(v);
    } catch (e) {
      const element = n === 0 ? (flag.valueElement ?? flag.element) : flag.element;
      out.push(
        error(doc.locate(["args", element]), `${flag.name}: value is not valid JSON (${(e as Error).message})`, "write the JSON inside single quotes: '{\"key\": 1}'"),
      );
    }
  });
  return out;
}

/** Whose parser judged the args, as messages name it. */
export function judgeText(table: EngineFlags): string {
  const j = table.judge;
  if (j === undefined) return "the engine's flag table";
  return j.by === "image" ? `${j.engine} ${j.version} in image ${j.image ?? "?"}` : `launcher's table of ${j.engine} ${j.version}`;
}

/**
 * A flag the parser does not know, or abbreviates ambiguously: the image's own parser stops on it
 * (an error); launcher's table of one version may just be older or newer than the image (a warning).
 */
function unknownFlagDiagnostics(at: Loc, flag: Flag, table: EngineFlags): Diagnostic[] {
  if (table.known === undefined) return [];
  const match = matchOption(flag.name, table.known, table.abbreviations !== false);
  if (match.kind === "known") return [];
  const image = table.judge?.by === "image";
  const say = image ? error : warning;
  const later = image ? "" : "; the image's own parser judges it when up runs";
  if (match.kind === "ambiguous") {
    const shown = match.candidates.slice(0, 6).join(", ");
    return [say(at, `${flag.name} could stand for ${shown}${match.candidates.length > 6 ? ", ..." : ""} in ${judgeText(table)}: its parser stops with "ambiguous option"${later}`, "write the whole flag")];
  }
  const fix = match.nearest === undefined ? (image ? "remove it, or use an image whose engine takes it" : "check its spelling, or judge it now: launcher validate --image IMAGE") : `did you mean ${match.nearest}?`;
  return [say(at, `${flag.name} is not a flag of ${judgeText(table)}${image ? ': its parser stops with "unrecognized arguments"' : ""}${later}`, fix)];
}

const onOffFix = (name: string): string => `write ${name} alone, or leave it out`;

/** The on/off flag a stray word follows directly (`--enforce-eager true`), if any. */
function onOffBefore(w: Word, words: readonly Word[], table: EngineFlags): string | undefined {
  const prev = words[words.indexOf(w) - 1]?.word;
  return prev !== undefined && prev.startsWith("-") && takesNoValue(prev, table) ? prev : undefined;
}

/** A value the flag cannot take: one given to an on/off flag (`--x=true`), one outside its choices or none. */
function flagValueDiagnostics(flag: Flag, table: EngineFlags): { message: string; fix: string }[] {
  const choice = (table.choices ?? []).find((c) => c.flags.some((f) => flagKey(f) === flagKey(flag.name)));
  if (choice !== undefined && flag.value === undefined) return [{ message: `${flag.name} takes one of ${choice.values.join(", ")}, and none follows it`, fix: choice.instead }];
  if (flag.value === undefined) return [];
  const refused = (table.refusedValues ?? []).find((r) => r.flags.some((f) => flagKey(f) === flagKey(flag.name)) && r.refuses(flag.value ?? ""));
  if (refused !== undefined) return [{ message: `${flag.name} ${flag.value}: ${refused.why}`, fix: refused.instead }];
  // argparse refuses `--x=v` for a flag that takes none: "ignored explicit argument 'v'".
  if (takesNoValue(flag.name, table)) return [{ message: `${flag.name}=${flag.value}: ${flag.name} is an on/off flag and takes no value`, fix: onOffFix(flag.name) }];
  if (choice === undefined || choice.values.includes(flag.value)) return [];
  const shown = flag.value.length > 40 ? `${flag.value.slice(0, 40)}...` : flag.value;
  return [{ message: `${flag.name} ${shown}: takes one of ${choice.values.join(", ")}`, fix: choice.instead }];
}

/** The element itself when it is a JSON object or array as written, else undefined. */
function jsonElement(element: string): string | undefined {
  const text = element.trim();
  if (!/^[[{]/.test(text)) return undefined;
  try {
    JSON.parse(text);
    return text;
  } catch {
    return undefined;
  }
}

/** The keys whose values have the right type, so that a file with errors still gets checked further. */
function partialValue(raw: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(recipeFileSchema.shape)) {
    if (!(key in raw)) continue;
    const one = schema.safeParse(raw[key]);
    if (one.success) out[key] = one.data;
    else if (key === "args" && Array.isArray(raw[key])) out[key] = (raw[key] as unknown[]).map((a) => (typeof a === "string" ? a : ""));
    else if (key === "env" && raw[key] !== null && typeof raw[key] === "object") {
      out[key] = Object.fromEntries(Object.entries(raw[key] as Record<string, unknown>).filter(([, v]) => typeof v === "string"));
    } else if (key === "extra_mounts" && Array.isArray(raw[key])) out[key] = raw[key];
  }
  return out;
}
