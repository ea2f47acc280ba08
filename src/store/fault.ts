import path from "node:path";
import Database from "better-sqlite3";
import { StoreFault, type StoreFaultKind } from "../config/errors.js";

/**
 * SQLite's primary result codes that are faults of the store's file or disk, by kind. An extended
 * code (SQLITE_IOERR_WRITE, SQLITE_CORRUPT_INDEX, SQLITE_READONLY_DBMOVED...) is its primary code
 * and a suffix (sqlite src/sqlite.h.in, "Extended Result Codes"); better-sqlite3 puts its name in
 * SqliteError.code (better-sqlite3 12 src/util/constants.cpp, CS::Code). Any other code (a
 * constraint, a misuse) is launcher's bug and is not listed.
 */
const SQLITE_KINDS: Readonly<Record<string, StoreFaultKind>> = {
  SQLITE_CORRUPT: "damaged",
  SQLITE_NOTADB: "damaged",
  SQLITE_READONLY: "read-only",
  SQLITE_PERM: "read-only",
  SQLITE_FULL: "full",
  SQLITE_IOERR: "io",
  SQLITE_PROTOCOL: "io",
  SQLITE_BUSY: "busy",
  SQLITE_LOCKED: "busy",
  SQLITE_CANTOPEN: "unreachable",
};

/** The system's errors around the store's file (making its folder, creating it 0600, renaming it aside). */
const ERRNO_KINDS: Readonly<Record<string, StoreFaultKind>> = {
  EROFS: "read-only",
  EACCES: "read-only",
  EPERM: "read-only",
  ENOSPC: "full",
  EDQUOT: "full",
  EIO: "io",
  ENOTDIR: "unreachable",
  EISDIR: "unreachable",
  ELOOP: "unreachable",
};

/** What the user can do about each kind; `dir` is the store's folder. */
const HINTS: Readonly<Record<StoreFaultKind, (dir: string) => string>> = {
  damaged: () => "the damaged store is set aside and a new one started: run the command again",
  "read-only": (dir) => `make ${dir} and the files in it writable by this user, or set XDG_STATE_HOME to a folder that is`,
  full: (dir) => `free space on the disk that holds ${dir}`,
  io: (dir) => `the disk that holds ${dir} failed to read or write: check it (dmesg)`,
  busy: () => "another launcher on this machine holds the store: let it finish, or stop it",
  unreachable: (dir) => `check ${dir} and its permissions, or set XDG_STATE_HOME`,
};

function kindOf(code: string, sqlite: boolean): StoreFaultKind | undefined {
  if (!sqlite) return ERRNO_KINDS[code];
  const primary = Object.keys(SQLITE_KINDS).find((k) => code === k || code.startsWith(`${k}_`));
  return primary === undefined ? undefined : SQLITE_KINDS[primary];
}

/**
 * The StoreFault an error thrown by the store of `file` is, or undefined when it is not the
 * store's fault (a bug, launcher's own error). Decided by the error's `code` alone.
 */
export function storeFault(e: unknown, file: string): StoreFault | undefined {
  if (e instanceof StoreFault) return e;
  if (!(e instanceof Error)) return undefined;
  const sqlite = e instanceof Database.SqliteError;
  const code = (e as NodeJS.ErrnoException).code;
  if (typeof code !== "string") return undefined;
  const kind = kindOf(code, sqlite);
  if (kind === undefined) return undefined;
  const reason = e.message.split("\n")[0] ?? "";
  return new StoreFault(kind, file, code, reason, `the state store ${file} failed (${code}: ${reason})`, HINTS[kind](path.dirname(file)));
}

/** Damaged content: the file is set aside and a new store started. Any other fault leaves it where it is. */
export const isDamaged = (f: StoreFault): boolean => f.kind === "damaged";
