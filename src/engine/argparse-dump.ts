import * as z from "zod";

/*
 * An engine's command-line parser as the engine itself describes it: every action of a Python
 * argparse.ArgumentParser (CPython Lib/argparse.py: option_strings, dest, nargs, const, default,
 * type, choices), dumped from inside the engine's image by a program of the engine's adapter (vLLM:
 * ./vllm/parser-dump.ts). Engine-neutral: any engine whose CLI is argparse reads the same.
 * What it is worth is decided by the adapter; this module only reads it, bounded, from untrusted
 * container output.
 */

/** The line the dump program prints before its one line of JSON (the engine may log before it). */
export const DUMP_SENTINEL = "@@LAUNCHER-PARSER-DUMP@@";
/** The format this launcher reads (the dump program says which it printed). */
export const DUMP_FORMAT = 1;
/** A dump is a few hundred KiB at most (vLLM 0.25.1: ~260 actions, ~60 KiB without help texts). */
const MAX_DUMP_BYTES = 4 * 1024 * 1024;
const MAX_ACTIONS = 5000;

const json: z.ZodType<unknown> = z.unknown();
const short = z.string().max(200);
// What of a dump reaches messages is held to plain characters: it is container output.
const optionString = z.string().max(200).regex(/^-[-\w.+]*$/);
const versionText = z.string().max(64).regex(/^[\w.+!-]+$/);
const printable = z.string().max(200).regex(/^[^\x00-\x1f\x7f]*$/);

const actionSchema = z.object({
  option_strings: z.array(optionString).max(50),
  dest: short,
  action: short,
  nargs: z.union([z.null(), z.number().int().min(0).max(1000), z.enum(["?", "*", "+", "...", "A...", "==SUPPRESS=="])]),
  const: json,
  default: json,
  type: z.array(short).max(10).nullable(),
  choices: z.array(z.union([printable, z.number(), z.boolean(), z.null()])).max(1000).nullable(),
});

const dumpSchema = z.object({
  format: z.literal(DUMP_FORMAT),
  engine_version: versionText,
  python: versionText.nullable(),
  allow_abbrev: z.boolean(),
  source: z.string().max(2000).optional(),
  actions: z.array(actionSchema).max(MAX_ACTIONS),
});

/** One action of the parser (an option and its aliases, or a positional). */
export type ArgparseAction = z.infer<typeof actionSchema>;
/** The whole parser, with the engine version and Python that printed it. */
export type ArgparseDump = z.infer<typeof dumpSchema>;

/** A dump read from the output of the dump program, or why none could be read. */
export type DumpReading = { readonly ok: true; readonly dump: ArgparseDump } | { readonly ok: false; readonly problem: string };

/** The dump in `output` (the line after the last sentinel line), checked against the format. */
export function readArgparseDump(output: string): DumpReading {
  if (output.length > MAX_DUMP_BYTES) return { ok: false, problem: `the parser dump is larger than ${MAX_DUMP_BYTES} bytes` };
  const lines = output.split("\n");
  const at = lines.map((l) => l.trim()).lastIndexOf(DUMP_SENTINEL);
  if (at < 0) return { ok: false, problem: "the dump program printed no parser description" };
  return decodeArgparseDump(lines[at + 1] ?? "");
}

/** A dump as JSON text (a saved dump, the static table), checked against the format. */
export function decodeArgparseDump(text: string): DumpReading {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: "the parser description is not JSON" };
  }
  return argparseDumpOf(value);
}

/** A dump already parsed from JSON, checked against the format. */
export function argparseDumpOf(value: unknown): DumpReading {
  const parsed = dumpSchema.safeParse(value);
  if (parsed.success) return { ok: true, dump: parsed.data };
  const issue = parsed.error.issues[0];
  // The path and the kind of problem only: the value itself is container output.
  return { ok: false, problem: `the parser description does not have format ${DUMP_FORMAT} (at ${issue?.path.join(".") || "the top"}: ${issue?.code ?? "invalid"})` };
}

/**
 * A parser description launcher ships (an engine's parser-table.json, which its table script wrote
 * from a dump argparseDumpOf accepted), taken as it is: not container output, and checking SGLang's
 * ~500 actions again at every start cost 10-18 ms of each command that loads the engines
 * (bench/cli-start.ts). test/unit/shipped-parser-tables.test.ts holds every shipped table to the format.
 */
export const shippedDump = (table: unknown): ArgparseDump => table as ArgparseDump;

/** How an engine's type names say that a value is JSON (the names of its parsing functions). */
export interface JsonTypes {
  /** A type whose name is one of these parses the value as JSON. */
  readonly always: readonly string[];
  /** ... as JSON only when it is written `{...}`. */
  readonly braced: readonly string[];
}

/** The value shapes of a parser's options, in the terms launcher's args checks use (src/recipe/args.ts). */
export interface OptionShapes {
  /** Every option string (aliases, `--no-` twins): what a prefix must be unique among. */
  readonly known: readonly string[];
  /** Options that take no value (nargs 0: store_true, BooleanOptionalAction and its twin, ...). */
  readonly boolean: readonly string[];
  /** Options that take every word up to the next option (nargs "+", "*", or more than one). */
  readonly many: readonly string[];
  readonly json: readonly string[];
  readonly jsonWhenBraced: readonly string[];
  /** Options that take one of a few values, as argparse prints them (its `choices`, "None" left out). */
  readonly choices: readonly { readonly flags: readonly string[]; readonly values: readonly string[] }[];
  /** Each option's default, by every one of its strings (JSON values as the dump gives them). */
  readonly defaults: ReadonlyMap<string, unknown>;
  /** Each option's own spellings (its aliases; a BooleanOptionalAction's `--no-` twin is not one: it says the opposite). */
  readonly aliases: readonly (readonly string[])[];
}

/** Types whose choices compare with the value as written (ints and floats by their printed form). */
const PLAIN_TYPES = new Set(["str", "int", "float"]);

// CPython Lib/argparse.py: nargs None takes one value, "?" one or none, "*" and "+" any number
// (at least one for "+"), an integer that many; 0 (store_true, store_const, BooleanOptionalAction)
// none. OPTIONAL/ZERO_OR_MORE/ONE_OR_MORE are "?", "*", "+".
const takesNone = (a: ArgparseAction): boolean => a.nargs === 0;
const takesMany = (a: ArgparseAction): boolean => a.nargs === "+" || a.nargs === "*" || (typeof a.nargs === "number" && a.nargs > 1);

/** The shapes of every option of `dump`; `ignoreChoices`: options whose choices depend on where the dump ran. */
export function optionShapes(dump: ArgparseDump, types: JsonTypes, ignoreChoices: readonly string[] = []): OptionShapes {
  const options = dump.actions.filter((a) => a.option_strings.length > 0);
  const strings = (pick: (a: ArgparseAction) => boolean): string[] => options.filter(pick).flatMap((a) => a.option_strings);
  const typed = (names: readonly string[]) => (a: ArgparseAction): boolean => (a.type ?? []).some((t) => names.includes(t));
  return {
    known: strings(() => true),
    boolean: strings(takesNone),
    many: strings(takesMany),
    json: strings(typed(types.always)),
    jsonWhenBraced: strings((a) => !typed(types.always)(a) && typed(types.braced)(a)),
    // argparse checks a value's choice after its type converted it (_get_values, _check_value):
    // only a plain type's choices can be checked on the value as written (vLLM's --moe-backend
    // lowers and rewrites it first).
    choices: options
      .filter((a) => a.choices !== null && (a.type === null || PLAIN_TYPES.has(a.type.join(","))) && !a.option_strings.some((s) => ignoreChoices.includes(s)))
      .map((a) => ({ flags: a.option_strings, values: (a.choices ?? []).filter((c) => c !== null && c !== "None").map(String) })),
    defaults: new Map(options.flatMap((a) => a.option_strings.map((s) => [s, a.default] as const))),
    aliases: options.map((a) => (a.action === "BooleanOptionalAction" ? a.option_strings.filter((s) => !s.startsWith("--no-")) : a.option_strings)).filter((g) => g.length > 1),
  };
}

/**
 * A dump as a table file of the tree keeps it (src/engine/vllm/parser-table.json): one action a
 * line, so that a regenerated table's diff shows each flag that changed. `source` says where it
 * came from.
 */
export function formatArgparseDump(dump: ArgparseDump, source: string): string {
  const { actions, source: _, ...head } = dump;
  const top = Object.entries({ ...head, source }).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  return `{\n${top.join("\n")}\n  "actions": [\n${actions.map((a) => `    ${JSON.stringify(a)}`).join(",\n")}\n  ]\n}\n`;
}

/**
 * The end of every engine's dump program (Python, run with the image's own interpreter after the
 * program has built `parser`): it prints each action after DUMP_SENTINEL in the format above, with
 * the engine's version from `versionModule.__version__`. One text, so every engine's dump reads alike.
 * Type callables are named with the callables their closures wrap (parse_type(json.loads) is
 * `_parse_type`, `loads`); values JSON cannot hold are written as their repr.
 */
export const dumpProgramTail = (versionModule: string): string => `def names(t):
    out = []
    while t is not None and len(out) < 4:
        out.append(getattr(t, "__name__", type(t).__name__))
        inner = [c.cell_contents for c in (getattr(t, "__closure__", None) or ()) if callable(c.cell_contents)]
        t = inner[0] if inner else None
    return out
def plain(v):
    try:
        json.dumps(v, allow_nan=False)
        return v
    except (TypeError, ValueError):
        return repr(v)
actions = [{"option_strings": list(a.option_strings), "dest": a.dest, "action": type(a).__name__,
            "nargs": a.nargs, "const": plain(a.const), "default": plain(a.default),
            "type": names(a.type) if a.type is not None else None,
            "choices": [plain(c) for c in a.choices] if a.choices is not None else None}
           for a in parser._actions]
dump = {"format": ${DUMP_FORMAT}, "engine_version": str(getattr(${versionModule}, "__version__", "unknown")),
        "python": sys.version.split()[0], "allow_abbrev": parser.allow_abbrev, "actions": actions}
sys.stdout.write("${DUMP_SENTINEL}\\n" + json.dumps(dump, allow_nan=False) + "\\n")
sys.stdout.flush()
`;
