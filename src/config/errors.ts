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
export class RemoteError extends Error {
  constructor(
    readonly node: string,
    message: string,
    readonly detail?: string,
    /** What to do about it, said after the detail. */
    readonly hint?: string,
  ) {
    super(message);
    this.name = "RemoteError";
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

/**
 * The one place that turns an error into what the user reads and an exit status: the text on
 * `write` (stderr), and with `writeJson` (a command given --json) the same error as JSON.
 */
export function reportError(e: unknown, write: (text: string) => void, writeJson?: (text: string) => void): number {
  writeJson?.(JSON.stringify(errorJson(e), null, 2));
  if (e instanceof UserError) {
    for (const d of sortDiagnostics(e.diagnostics)) write(formatDiagnostic(d));
    write(`launcher: ${e.message}`);
    if (e.hint !== undefined) write(`  hint: ${e.hint}`);
    return EXIT_USER;
  }
  if (e instanceof RemoteError) {
    write(`launcher: ${e.node}: ${e.message}`);
    if (e.detail !== undefined && e.detail.trim() !== "") write(e.detail.trimEnd().split("\n").map((l) => `  | ${l}`).join("\n"));
    if (e.hint !== undefined) write(`  hint: ${e.hint}`);
    return EXIT_USER;
  }
  const err = e instanceof Error ? e : new Error(String(e));
  write(`launcher: internal error: ${err.stack ?? err.message}`);
  write(BUG_HINT);
  return EXIT_BUG;
}
