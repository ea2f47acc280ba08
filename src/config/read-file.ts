import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { UserError } from "./errors.js";

/** Cluster files, recipes and key files are small: anything larger is not one of them. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

const kindOf = (st: Stats): string =>
  st.isDirectory() ? "a folder" : st.isFIFO() ? "a FIFO" : st.isCharacterDevice() ? "a character device" : st.isBlockDevice() ? "a block device" : st.isSocket() ? "a socket" : "not a regular file";

const openProblem = (e: unknown): string => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "ENOENT" ? "not found" : code === "EACCES" ? "cannot be read (permission denied)" : `cannot be opened (${code ?? (e as Error).message})`;
};

/** A file to read and the path its errors name, when the user knows it by another (relative, as typed) than the one opened. */
export interface NamedFile {
  readonly path: string;
  readonly shown: string;
}

/**
 * The one way launcher reads a file the user names (cluster, recipe, key file): only a regular
 * file, only up to `maxBytes`, as UTF-8. A folder, a device (/dev/zero) or a FIFO is a UserError
 * naming it (as `named.shown`, given one), never a hang or a crash: the file is opened
 * non-blocking (a FIFO without a writer would block open), checked with fstat on that same
 * descriptor, and read with a bound.
 */
export function readTextFile(named: string | NamedFile, what: string, maxBytes = MAX_CONFIG_BYTES): string {
  const { path, shown } = typeof named === "string" ? { path: named, shown: named } : named;
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    throw new UserError(`${what} ${shown} ${openProblem(e)}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new UserError(`${what} ${shown} is ${kindOf(st)}, not a file`, `give the path of the ${what} itself`);
    const tooBig = (): UserError => new UserError(`${what} ${shown} is larger than ${maxBytes} bytes`, `a ${what} is a small text file; check that this is the right file`);
    if (st.size > maxBytes) throw tooBig();
    // Read to EOF but never past the bound: the file may grow between fstat and read.
    const buf = Buffer.alloc(maxBytes + 1);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buf, length, buf.length - length, null);
      if (n === 0) break;
      length += n;
      if (length > maxBytes) throw tooBig();
    }
    return buf.subarray(0, length).toString("utf8");
  } catch (e) {
    if (e instanceof UserError) throw e;
    throw new UserError(`${what} ${shown} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  } finally {
    closeSync(fd);
  }
}

/**
 * Standard input as UTF-8, up to `maxBytes` (`launcher explain -`). A terminal is refused: nobody
 * types a log, and waiting for one would look like a hang.
 */
export async function readTextStdin(what: string, maxBytes: number, hint: string): Promise<string> {
  if (process.stdin.isTTY) throw new UserError(`no ${what} given and standard input is a terminal`, hint);
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of process.stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    length += b.length;
    if (length > maxBytes) throw new UserError(`the ${what} on standard input is larger than ${maxBytes} bytes`, "give the boot's part of the log (a boot log is a few MB at most)");
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString("utf8");
}
