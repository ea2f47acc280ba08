import { formatDiagnostic, sortDiagnostics, type Diagnostic } from "./diagnostic.js";

/** Bad input or a state the user must fix: printed without a stack, exit status 1. */
export class UserError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    readonly diagnostics: readonly Diagnostic[] = [],
  ) {
    super(message);
    this.name = "UserError";
  }
}

/** A command on a node failed: the node is named, with the command's stderr tail. */
/** A failure's node and rank as values, for a reader that must not parse the words that name them. */
export interface Blamed {
  readonly node: string;
  readonly rank?: number;
}

export class RemoteError extends Error {
  constructor(
    readonly node: string,
    message: string,
    readonly detail?: string,
    /** What to do about it, said after the detail. */
    readonly hint?: string,
    /** The node (and rank) blamed, as values: `node` above is its words ("n2 (rank 1)"). */
    readonly blamed?: Blamed,
  ) {
    super(message);
    this.name = "RemoteError";
  }
}

/**
 * What can go wrong with the state store itself, as src/store/fault.ts sorts SQLite's and the
 * file system's error codes: its content is damaged; it may not be written (read-only file, folder
 * or mount); its disk is full; the disk failed to read or write; another process holds it too long.
 */
export type StoreFaultKind = "damaged" | "read-only" | "full" | "io" | "busy" | "unreachable";

/**
 * The state store failed: a fault of the machine's disk or file, never of the command or the
 * cluster, so the user's to fix (a UserError: said without a stack, exit 1, and carried as one
 * from the daemon). Raised at the store's boundary (src/store/fault.ts) and never recognised by
 * its text.
 */
export class StoreFault extends UserError {
  constructor(
    readonly kind: StoreFaultKind,
    /** The store's file. */
    readonly file: string,
    /** SQLite's or the system's error code, e.g. SQLITE_CORRUPT, ENOSPC. */
    readonly code: string,
    /** What SQLite or the system said. */
    readonly reason: string,
    message: string,
    hint?: string,
  ) {
    super(message, hint);
    this.name = "StoreFault";
  }
}

export const EXIT_USER = 1;
export const EXIT_BUG = 70;

/** What `--json` prints on stdout when a command fails: one shape for every command. */
export interface ErrorJson {
  readonly error: {
    readonly message: string;
    readonly hint?: string;
    /** The node a RemoteError names, and the tail of what the command printed there. */
    readonly node?: string;
    readonly detail?: string;
    readonly diagnostics: readonly { file: string; line: number; col: number; severity: string; message: string; hint?: string }[];
  };
}

export function errorJson(e: unknown): ErrorJson {
  if (e instanceof UserError) {
    return {
      error: {
        message: e.message,
        ...(e.hint === undefined ? {} : { hint: e.hint }),
        diagnostics: sortDiagnostics(e.diagnostics).map((d) => ({ ...d.loc, severity: d.severity, message: d.message, ...(d.hint === undefined ? {} : { hint: d.hint }) })),
      },
    };
  }
  if (e instanceof RemoteError) {
    const detail = e.detail?.trim();
    return { error: { message: e.message, ...(e.hint === undefined ? {} : { hint: e.hint }), node: e.node, ...(detail ? { detail } : {}), diagnostics: [] } };
  }
  // A bug: the stack goes to stderr only.
  return { error: { message: `internal error: ${e instanceof Error ? e.message : String(e)}`, hint: BUG_HINT, diagnostics: [] } };
}

const BUG_HINT = "This is a bug in launcher; please report it with the command you ran.";

const PREFIX = "launcher: ";
/**
 * One "launcher: " per line: a message that names launcher itself already (a failure of
 * launcher's own, such as an interrupted boot's, whose `node` is launcher; a line written by
 * launcher's node-side scripts) is not prefixed again.
 */
export const said = (text: string): string => (text.startsWith(PREFIX) ? text : `${PREFIX}${text}`);

/**
 * The one place that turns an error into what the user reads and an exit status: the text on
 * `write` (stderr), and with `writeJson` (a command given --json) the same error as JSON.
 */
export function reportError(e: unknown, write: (text: string) => void, writeJson?: (text: string) => void): number {
  writeJson?.(JSON.stringify(errorJson(e), null, 2));
  if (e instanceof UserError) {
    for (const d of sortDiagnostics(e.diagnostics)) write(formatDiagnostic(d));
    write(said(e.message));
    if (e.hint !== undefined) write(`  hint: ${e.hint}`);
    return EXIT_USER;
  }
  if (e instanceof RemoteError) {
    write(said(`${e.node}: ${e.message}`));
    if (e.detail !== undefined && e.detail.trim() !== "") write(e.detail.trimEnd().split("\n").map((l) => `  | ${l}`).join("\n"));
    if (e.hint !== undefined) write(`  hint: ${e.hint}`);
    return EXIT_USER;
  }
  const err = e instanceof Error ? e : new Error(String(e));
  write(`launcher: internal error: ${err.stack ?? err.message}`);
  write(BUG_HINT);
  return EXIT_BUG;
}
