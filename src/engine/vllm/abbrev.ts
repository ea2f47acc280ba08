/*
 * vLLM's serve parser takes a unique prefix of a long flag for the whole flag (allow_abbrev, see
 * ./flags.ts). CPython Lib/argparse.py: _parse_optional asks _get_option_tuples, which for a `--`
 * word (up to its `=`) collects every option string that starts with it, and takes the flag when
 * exactly one does ("ambiguous option" when more). vLLM's FlexibleArgumentParser first turns `_`
 * into `-` in the name, so `--api_k` is `--api-k`. Single-dash aliases are matched only as written
 * here (`-dp`): argparse's single-dash prefixes are left to vLLM, which names them in its refusal.
 */

const normal = (name: string): string => name.replace(/_/g, "-");

/**
 * `flag` and each shorter spelling argparse would take for it: every prefix longer than `--` that
 * no other option of `names` starts with. `names` must hold every option string of the parser
 * (./options.ts), `--no-` twins included: a prefix is only unique among all of them.
 */
export function uniquePrefixes(flag: string, names: readonly string[]): string[] {
  const whole = normal(flag);
  const others = [...new Set(names.map(normal))].filter((n) => n !== whole && n.startsWith("--"));
  // The whole flag is itself even when another starts with it (argparse takes an exact match first).
  const out: string[] = [whole];
  if (!whole.startsWith("--")) return out;
  for (let end = whole.length - 1; end > 2; end--) {
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
