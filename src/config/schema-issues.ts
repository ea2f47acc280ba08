import type * as z from "zod";
import { error, type Diagnostic } from "./diagnostic.js";
import { nearest } from "./suggest.js";
import type { TomlDocument, TomlPath } from "./toml-document.js";

const typeName = (v: unknown): string => {
  if (Array.isArray(v)) return "an array";
  if (v === null || v === undefined) return "nothing";
  if (v instanceof Date) return "a date";
  if (typeof v === "object") return "a table";
  if (typeof v === "number") return Number.isInteger(v) ? "an integer" : "a float";
  if (typeof v === "bigint") return "an integer";
  return `a ${typeof v}`;
};

const expectedName = (expected: string): string =>
  ({ string: "a string", number: "a number", int: "an integer", boolean: "a boolean (true or false)", array: "an array", object: "a table", record: "a table" })[expected] ??
  expected;

const valueAt = (root: unknown, path: TomlPath): unknown =>
  path.reduce<unknown>((v, k) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k as string] : undefined), root);

export const showPath = (path: TomlPath): string =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");

/**
 * Turns schema issues into diagnostics at the place the value was written.
 * `knownKeys` gives the key names allowed at a path, for suggestions on unknown keys.
 */
export function schemaDiagnostics(
  doc: TomlDocument,
  issues: readonly z.core.$ZodIssue[],
  knownKeys: (path: TomlPath) => readonly string[],
): Diagnostic[] {
  const out: Diagnostic[] = [];
  for (const issue of issues) {
    const path = issue.path as (string | number)[];
    const where = showPath(path);
    switch (issue.code) {
      case "unrecognized_keys":
        for (const key of issue.keys) {
          const suggestion = nearest(key, knownKeys(path));
          const inTable = path.length > 0 ? ` in ${showPath(path)}` : "";
          out.push(
            error(
              doc.locateKey([...path, key]),
              `unknown key "${key}"${inTable}`,
              suggestion ? `did you mean "${suggestion}"?` : `known keys: ${knownKeys(path).join(", ")}`,
            ),
          );
        }
        break;
      case "invalid_type": {
        const actual = valueAt(doc.value, path);
        if (actual === undefined) {
          out.push(error(doc.locate(path.slice(0, -1)), `missing required key "${where}"`));
        } else if (issue.message.startsWith("Invalid input")) {
          out.push(error(doc.locate(path), `${where} must be ${expectedName(issue.expected)}, not ${typeName(actual)}`));
        } else {
          out.push(error(doc.locate(path), `${where}: ${issue.message}`));
        }
        break;
      }
      case "invalid_value":
        out.push(
          error(
            doc.locate(path),
            `${where} must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, not ${JSON.stringify(valueAt(doc.value, path))}`,
          ),
        );
        break;
      case "too_small":
        out.push(error(doc.locate(path), `${where} must be at least ${String(issue.minimum)}`));
        break;
      case "too_big":
        // A schema's own words (its unit, the likely mistake) replace zod's "Too big: ...".
        out.push(error(doc.locate(path), issue.message.startsWith("Too big") ? `${where} must be at most ${String(issue.maximum)}` : `${where} ${issue.message}`));
        break;
      default:
        out.push(error(doc.locate(path), issue.message.startsWith("Invalid input") ? `${where} is not valid here` : `${where}: ${issue.message}`));
    }
  }
  return out;
}
