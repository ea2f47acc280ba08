/*
 * The env a container gets, as `docker run --env-file` reads it: one `KEY=VALUE` per line, so
 * that no value is on a command line (ssh's argv here, the shell's and docker's on the node).
 * docker/cli opts/parse.go parseKeyValueFile: lines are read with a bufio.Scanner (ScanLines: a
 * line ends at \n, a \r before it is dropped; a line is at most bufio.MaxScanTokenSize, 64 KiB),
 * leading whitespace and `#` lines are skipped, the key ends at the first `=`, and "trailing
 * whitespace is part of the value, and is kept unmodified"; invalid UTF-8 is refused.
 */

/** A line's most bytes: below bufio.MaxScanTokenSize (64 * 1024), with room to spare. */
export const MAX_ENV_LINE_BYTES = 60_000;

/** Why `KEY=VALUE` cannot be one env-file line, or undefined when it can. */
export function envLineProblem(key: string, value: string): string | undefined {
  if (/[\n\r\0]/.test(value)) return "it holds a line break or NUL, which docker's env file cannot carry (one line per variable)";
  const bytes = Buffer.byteLength(`${key}=${value}`);
  if (bytes > MAX_ENV_LINE_BYTES) return `it is ${bytes} bytes long; docker reads at most ${MAX_ENV_LINE_BYTES} per env-file line here`;
  return undefined;
}

/** The env file's text. Callers check each line first (envLineProblem); a bad one throws here. */
export function envFileText(env: Readonly<Record<string, string>>): string {
  return Object.entries(env)
    .map(([k, v]) => {
      const problem = envLineProblem(k, v);
      if (problem !== undefined) throw new Error(`env ${k}: ${problem}`);
      return `${k}=${v}\n`;
    })
    .join("");
}
