import { formatDiagnostic, sortDiagnostics, type Diagnostic } from "../config/diagnostic.js";

export interface Output {
  out(text: string): void;
  err(text: string): void;
  json(value: unknown): void;
  diagnostics(ds: readonly Diagnostic[]): void;
}

export const consoleOutput: Output = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  json: (value) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`),
  diagnostics: (ds) => {
    for (const d of sortDiagnostics(ds)) process.stderr.write(`${formatDiagnostic(d)}\n`);
  },
};
