/**
 * A value made at its first use, then kept. For tables that only some commands need: a command's
 * start pays for none it does not use (bench/cli-start.ts times the starts).
 */
export function lazy<T>(make: () => T): () => T {
  let made: { readonly value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}
