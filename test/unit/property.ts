import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { Diagnostic } from "../../src/config/diagnostic.js";
import { RemoteError, UserError } from "../../src/config/errors.js";

/**
 * The one home of the property tests' settings (test/unit/property-*.test.ts). A fixed seed, so a
 * failure here fails the same way on every machine; LAUNCHER_PROPERTY_SEED replays another one
 * (fast-check prints the seed and path of a failure). The fast tier tries PROPERTY_RUNS inputs per
 * property; the full suite sets LAUNCHER_PROPERTY_RUNS (e.g. 5000) for more.
 */
const DEFAULT_RUNS = 500;
const DEFAULT_SEED = 25;

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name}=${raw} is not a positive integer`);
  return n;
}

export const PROPERTY_RUNS = envInt("LAUNCHER_PROPERTY_RUNS", DEFAULT_RUNS);
export const PROPERTY_SEED = envInt("LAUNCHER_PROPERTY_SEED", DEFAULT_SEED);

const tried = new Map<string, number>();

/**
 * Asserts `predicate` over `arb` with the shared seed and count (`scale` multiplies the count for
 * a cheap property or divides it for a costly one), and counts the inputs tried under `name`.
 * The predicate fails by throwing (node's assert) or by returning false.
 */
export function holds<T>(name: string, arb: fc.Arbitrary<T>, predicate: (value: T) => boolean | void, scale = 1): void {
  const runs = Math.max(1, Math.round(PROPERTY_RUNS * scale));
  fc.assert(
    fc.property(arb, (value) => {
      tried.set(name, (tried.get(name) ?? 0) + 1);
      return predicate(value);
    }),
    { seed: PROPERTY_SEED, numRuns: runs, includeErrorInReport: true },
  );
}

/**
 * Like holds, for a property whose check costs a process each (a shell): the same seed and count
 * of inputs, checked in one call of `check`, which throws naming the first input that fails. No
 * shrinking: the failing input is reported as it was drawn.
 */
export function holdsAll<T>(name: string, arb: fc.Arbitrary<T>, check: (values: readonly T[]) => void, scale = 1): void {
  // Drawn as fc.assert draws for holds (fc.sample would draw without its bias toward small and edge values).
  const values: T[] = [];
  holds(name, arb, (v) => void values.push(v), scale);
  try {
    check(values);
  } catch (e) {
    throw new Error(`${name} (seed ${PROPERTY_SEED}, LAUNCHER_PROPERTY_RUNS=${PROPERTY_RUNS}): ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/**
 * The last test of a property file: the inputs tried per property, as a diagnostic line the
 * reporter prints (`# inputs tried: ...`), so that a run's count can be quoted.
 */
export function reportInputsTried(): void {
  test("inputs tried per property", (t) => {
    const total = [...tried.values()].reduce((a, b) => a + b, 0);
    t.diagnostic(`inputs tried: ${total} in all (seed ${PROPERTY_SEED}, LAUNCHER_PROPERTY_RUNS=${PROPERTY_RUNS})`);
    for (const [name, n] of tried) t.diagnostic(`  ${n} ${name}`);
    assert.ok(total > 0);
  });
}

/** Runs `f`; anything it throws must be one of launcher's typed errors, never an internal one. */
export function typedOutcome<T>(f: () => T): { value: T } | { error: UserError | RemoteError } {
  try {
    return { value: f() };
  } catch (e) {
    if (e instanceof UserError || e instanceof RemoteError) return { error: e };
    throw e;
  }
}

/** A diagnostic names a file by one of `files` and a real place in it (1-based line and column, a line the text has). */
export function assertPositioned(d: Diagnostic, texts: Readonly<Record<string, string>>): void {
  const text = texts[d.loc.file];
  assert.ok(text !== undefined, `diagnostic names a file it was not given: ${JSON.stringify(d)}`);
  assert.ok(Number.isInteger(d.loc.line) && d.loc.line >= 1, `diagnostic without a line: ${JSON.stringify(d)}`);
  assert.ok(Number.isInteger(d.loc.col) && d.loc.col >= 1, `diagnostic without a column: ${JSON.stringify(d)}`);
  // A line past the end of the text is no place in it (a file's last line may lack its newline).
  const lines = text.split(/\r\n|\n|\r/).length;
  assert.ok(d.loc.line <= lines, `diagnostic at line ${d.loc.line} of a ${lines}-line file: ${JSON.stringify(d)}`);
  assert.ok(typeof d.message === "string" && d.message.trim() !== "", `diagnostic without a message: ${JSON.stringify(d)}`);
}

/**
 * A text mutated as an editor's slip or an attacker might: pieces deleted, duplicated, swapped,
 * or replaced by TOML fragments (`fragments`) and stray characters.
 */
export function mutatedText(seed: string, fragments: readonly string[]): fc.Arbitrary<string> {
  const cut = fc.nat({ max: seed.length });
  const piece = fc.oneof(
    fc.constantFrom(...fragments),
    fc.string({ maxLength: 12 }),
    fc.string({ unit: "binary", maxLength: 6 }),
    fc.constantFrom("\n", "\r\n", "\r", "\t", "\0", "\u2028", "\ufeff", "\\", '"', "'", "'''", '"""', "[", "]", "{", "}", "=", ",", "#", "."),
  );
  const edit = fc.oneof(
    fc.record({ kind: fc.constant("insert" as const), at: cut, piece }),
    fc.record({ kind: fc.constant("delete" as const), at: cut, length: fc.nat({ max: 40 }) }),
    fc.record({ kind: fc.constant("replace" as const), at: cut, length: fc.nat({ max: 20 }), piece }),
    fc.record({ kind: fc.constant("duplicate-line" as const), at: cut }),
    fc.record({ kind: fc.constant("swap-lines" as const), at: cut, other: cut }),
  );
  return fc.array(edit, { minLength: 1, maxLength: 6 }).map((edits) => edits.reduce(applyEdit, seed));
}

type Edit =
  | { kind: "insert"; at: number; piece: string }
  | { kind: "delete"; at: number; length: number }
  | { kind: "replace"; at: number; length: number; piece: string }
  | { kind: "duplicate-line"; at: number }
  | { kind: "swap-lines"; at: number; other: number };

function applyEdit(text: string, e: Edit): string {
  const at = Math.min(e.at, text.length);
  switch (e.kind) {
    case "insert":
      return text.slice(0, at) + e.piece + text.slice(at);
    case "delete":
      return text.slice(0, at) + text.slice(at + e.length);
    case "replace":
      return text.slice(0, at) + e.piece + text.slice(at + e.length);
    case "duplicate-line":
    case "swap-lines": {
      const lines = text.split("\n");
      const i = lineAt(text, at);
      if (e.kind === "duplicate-line") return [...lines.slice(0, i + 1), lines[i] ?? "", ...lines.slice(i + 1)].join("\n");
      const j = lineAt(text, Math.min(e.other, text.length));
      const out = [...lines];
      [out[i], out[j]] = [lines[j] ?? "", lines[i] ?? ""];
      return out.join("\n");
    }
  }
}

const lineAt = (text: string, at: number): number => text.slice(0, at).split("\n").length - 1;
