/** A place in a file; line and col are 1-based, as editors and compilers print them. */
export interface Loc {
  readonly file: string;
  readonly line: number;
  readonly col: number;
}

/**
 * The place of a problem in a command-line flag (`--nodes`) rather than in a file: line 0, which
 * no file has, and printed as the flag alone.
 */
export function flagLoc(flag: string): Loc {
  return { file: flag, line: 0, col: 0 };
}

export type Severity = "error" | "warning";

export interface Diagnostic {
  readonly severity: Severity;
  readonly loc: Loc;
  readonly message: string;
  readonly hint?: string;
}

export function error(loc: Loc, message: string, hint?: string): Diagnostic {
  return hint === undefined ? { severity: "error", loc, message } : { severity: "error", loc, message, hint };
}

export function warning(loc: Loc, message: string, hint?: string): Diagnostic {
  return hint === undefined ? { severity: "warning", loc, message } : { severity: "warning", loc, message, hint };
}

export function formatDiagnostic(d: Diagnostic): string {
  return formatDiagnosticWith(d, (s) => s);
}

/** `severity` renders the severity word (a terminal shows it in colour). */
export function formatDiagnosticWith(d: Diagnostic, severity: (s: Severity) => string): string {
  const where = d.loc.line === 0 ? d.loc.file : `${d.loc.file}:${d.loc.line}:${d.loc.col}`;
  const head = `${where}: ${severity(d.severity)}: ${d.message}`;
  return d.hint === undefined ? head : `${head}\n  hint: ${d.hint}`;
}

export function hasErrors(ds: readonly Diagnostic[]): boolean {
  return ds.some((d) => d.severity === "error");
}

/** Diagnostics sorted by file, then position, so a report reads top to bottom. */
export function sortDiagnostics(ds: readonly Diagnostic[]): Diagnostic[] {
  return [...ds].sort(
    (a, b) => a.loc.file.localeCompare(b.loc.file) || a.loc.line - b.loc.line || a.loc.col - b.loc.col,
  );
}
