/** One engine flag as written in a recipe's args, with the args element it came from. */
export interface Flag {
  readonly name: string;
  readonly value?: string;
  /** Index of the args element holding the flag name (for error positions). */
  readonly element: number;
  /** Index of the args element holding the value, when it is a separate word. */
  readonly valueElement?: number;
}

export interface Word {
  readonly word: string;
  readonly element: number;
}

export interface ParsedArgs {
  readonly flags: Flag[];
  /** Words that are neither a flag nor a flag's value. */
  readonly stray: Word[];
}

const isFlag = (w: string): boolean => w.startsWith("-") && w.length > 1 && !/^-\d/.test(w);

/** Flags compare without regard to `_` versus `-`, as vLLM's argument parser treats them alike. */
export function flagKey(name: string): string {
  const dashes = name.startsWith("--") ? 2 : 1;
  return name.slice(0, dashes) + name.slice(dashes).replace(/_/g, "-");
}

export function parseFlags(words: readonly Word[]): ParsedArgs {
  const flags: Flag[] = [];
  const stray: Word[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i] as Word;
    if (!isFlag(w.word)) {
      stray.push(w);
      continue;
    }
    const eq = w.word.indexOf("=");
    if (w.word.startsWith("--") && eq > 0) {
      flags.push({ name: w.word.slice(0, eq), value: w.word.slice(eq + 1), element: w.element });
      continue;
    }
    const next = words[i + 1];
    if (next !== undefined && !isFlag(next.word)) {
      flags.push({ name: w.word, value: next.word, element: w.element, valueElement: next.element });
      i++;
    } else {
      flags.push({ name: w.word, element: w.element });
    }
  }
  return { flags, stray };
}

/** The flags of a resolved recipe's args (already split into words). */
export function flagsOfWords(words: readonly string[]): Flag[] {
  return parseFlags(words.map((word) => ({ word, element: 0 }))).flags;
}

export function renderFlags(flags: readonly Pick<Flag, "name" | "value">[]): string[] {
  return flags.flatMap((f) => (f.value === undefined ? [f.name] : [f.name, f.value]));
}

/** The first flag with this name (any of its spellings). */
export function findFlag(flags: readonly Flag[], name: string): Flag | undefined {
  const key = flagKey(name);
  return flags.find((f) => flagKey(f.name) === key);
}

/** The first flag written under any of a flag's spellings (an engine adapter lists them). */
export function findAnyFlag(flags: readonly Flag[], names: readonly string[]): Flag | undefined {
  const keys = new Set(names.map(flagKey));
  return flags.find((f) => keys.has(flagKey(f.name)));
}
