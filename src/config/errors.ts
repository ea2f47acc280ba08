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
  ) {
    super(message);
    this.name = "RemoteError";
  }
}

export const EXIT_USER = 1;
export const EXIT_BUG = 70;

/** The one place that turns an error into what the user reads and an exit status. */
export function reportError(e: unknown, write: (text: string) => void): number {
  if (e instanceof UserError) {
    for (const d of sortDiagnostics(e.diagnostics)) write(formatDiagnostic(d));
    write(`launcher: ${e.message}`);
    if (e.hint !== undefined) write(`  hint: ${e.hint}`);
    return EXIT_USER;
  }
  if (e instanceof RemoteError) {
    write(`launcher: ${e.node}: ${e.message}`);
    if (e.detail !== undefined && e.detail.trim() !== "") write(e.detail.trimEnd().split("\n").map((l) => `  | ${l}`).join("\n"));
    return EXIT_USER;
  }
  const err = e instanceof Error ? e : new Error(String(e));
  write(`launcher: internal error: ${err.stack ?? err.message}`);
  write("This is a bug in launcher; please report it with the command you ran.");
  return EXIT_BUG;
}
