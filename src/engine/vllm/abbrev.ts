/*
 * vLLM's serve parser takes a unique prefix of a flag for the whole flag (allow_abbrev, see
 * ./flags.ts). CPython Lib/argparse.py (3.12): _parse_optional asks _get_option_tuples, which
 * collects every option string that starts with the word (up to its `=` for a `--` word; a
 * single-dash word too: `-as` is `-asc`), and takes the flag when exactly one does ("ambiguous
 * option" when more). vLLM's FlexibleArgumentParser first turns `_` into `-` in a `--` name, so
 * `--api_k` is `--api-k`.
 */

const normal = (name: string): string => name.replace(/_/g, "-");

/** `names` normalized, without repeats, sorted: made once per list (the parser's options are constants). */
const sortedNames = new WeakMap<readonly string[], string[]>();
function sortedOf(names: readonly string[]): string[] {
  let sorted = sortedNames.get(names);
  if (sorted === undefined) {
    sorted = [...new Set(names.map(normal))].sort();
    sortedNames.set(names, sorted);
  }
  return sorted;
}

const commonLength = (a: string, b: string): number => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

/**
 * `flag` and each shorter spelling argparse would take for it: every prefix longer than its dashes
 * that no other option of `names` starts with. `names` must hold every option string of the parser,
 * `--no-` twins included: a prefix is only unique among all of them. Another option starts with a
 * prefix exactly when it shares at least that many first characters with the flag, and in sorted
 * order the options sharing the most are the flag's neighbours.
 */
export function uniquePrefixes(flag: string, names: readonly string[]): string[] {
  const whole = normal(flag);
  const dashes = whole.startsWith("--") ? 2 : 1;
  const sorted = sortedOf(names);
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] as string) < whole) lo = mid + 1;
    else hi = mid;
  }
  const before = sorted[lo - 1];
  const after = sorted[lo] === whole ? sorted[lo + 1] : sorted[lo];
  const shared = Math.max(before === undefined ? 0 : commonLength(whole, before), after === undefined ? 0 : commonLength(whole, after));
  // The whole flag is itself even when another starts with it (argparse takes an exact match first).
  const out: string[] = [whole];
  for (let end = whole.length - 1; end > Math.max(dashes, shared); end--) out.push(whole.slice(0, end));
  return out;
}

/** Every spelling of `flags` (a flag and its aliases) with the unique prefixes of each long one. */
export function withPrefixes(flags: readonly string[], names: readonly string[]): string[] {
  return [...new Set(flags.flatMap((f) => uniquePrefixes(f, names)))];
}
