/*
 * vLLM's serve parser takes a unique prefix of a flag for the whole flag (allow_abbrev, see
 * ./flags.ts). CPython Lib/argparse.py (3.12): _parse_optional asks _get_option_tuples, which
 * collects every option string that starts with the word (up to its `=` for a `--` word; a
 * single-dash word too: `-as` is `-asc`), and takes the flag when exactly one does ("ambiguous
 * option" when more). vLLM's FlexibleArgumentParser first turns `_` into `-` in a `--` name, so
 * `--api_k` is `--api-k`.
 */

const normal = (name: string): string => name.replace(/_/g, "-");

/**
 * `flag` and each shorter spelling argparse would take for it: every prefix longer than its dashes
 * that no other option of `names` starts with. `names` must hold every option string of the parser,
 * `--no-` twins included: a prefix is only unique among all of them.
 */
export function uniquePrefixes(flag: string, names: readonly string[]): string[] {
  const whole = normal(flag);
  const dashes = whole.startsWith("--") ? 2 : 1;
  const others = [...new Set(names.map(normal))].filter((n) => n !== whole);
  // The whole flag is itself even when another starts with it (argparse takes an exact match first).
  const out: string[] = [whole];
  for (let end = whole.length - 1; end > dashes; end--) {
    const prefix = whole.slice(0, end);
    if (others.some((n) => n.startsWith(prefix))) break;
    out.push(prefix);
  }
  return out;
}
/** Every spelling of `flags` (a flag and its aliases) with the unique prefixes of each long one. */
export function withPrefixes(flags: readonly string[], names: readonly string[]): string[] {
  return [...new Set(flags.flatMap((f) => uniquePrefixes(f, names)))];
}
