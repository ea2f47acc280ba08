import { colourFor, SEVERITY_STYLE } from "./colour.js";
import { formatDiagnostic, formatDiagnosticWith, sortDiagnostics, type Diagnostic } from "../config/diagnostic.js";

export interface Output {
  out(text: string): void;
  err(text: string): void;
  /** Something the user should know that does not stop the command: on stderr, and in --json's `warnings`. */
  warn(text: string): void;
  json(value: unknown): void;
  diagnostics(ds: readonly Diagnostic[]): void;
}

/**
 * What a command given --json prints is ONE object: its answer plus `warnings`, the warnings said
 * before it (also on stderr, for the human watching). An answer that is not an object is wrapped.
 */
export function jsonAnswer(value: unknown, warnings: readonly string[]): Record<string, unknown> {
  const object = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  return { ...object, warnings: [...((object.warnings as string[] | undefined) ?? []), ...warnings] };
}

/** A diagnostic as one warning line of a JSON answer. */
const warningOf = (d: Diagnostic): string => formatDiagnostic(d).replace("\n  hint: ", "; hint: ");

const said: string[] = [];

export const consoleOutput: Output = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  warn: (text) => {
    said.push(text);
    process.stderr.write(`${colourFor(process.stderr)("yellow", "warning:")} ${text}\n`);
  },
  json: (value) => process.stdout.write(`${JSON.stringify(jsonAnswer(value, said), null, 2)}\n`),
  diagnostics: (ds) => {
    for (const d of sortDiagnostics(ds)) {
      if (d.severity === "warning") said.push(warningOf(d));
      process.stderr.write(`${formatDiagnosticWith(d, (s) => colourFor(process.stderr)(SEVERITY_STYLE[s], s))}\n`);
    }
  },
};
