import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { buildProgram } from "../../src/cli/main.js";
import { packageVersion, PACKAGE_ROOT } from "../../src/cli/load.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "./memory-source.js";

test("--version says package.json's version, read from the package (not a number written twice)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-version-"));
  try {
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "x", version: "9.8.7-rc.1" }));
    assert.equal(packageVersion(dir), "9.8.7-rc.1");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  let printed = "";
  const program = buildProgram({ writeOut: (s) => (printed += s), writeErr: () => undefined });
  assert.throws(() => program.parse(["--version"], { from: "user" }));
  assert.equal(printed.trim(), packageVersion(PACKAGE_ROOT));
});

test("a parallel-size flag that is not a positive integer is one error at the flag, whichever check reads it", () => {
  const withArgs = (args: string): string => BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);
  const errors = (args: string): string[] =>
    resolveRecipe("bad", memorySource({ "recipes/bad/recipe.toml": withArgs(args) })).diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
  // Counted in the world size (data parallel) and dividing tensor parallel (decode context parallel).
  for (const [flag, value] of [["--data-parallel-size", "0"], ["-dcp", "two"], ["-dcp", "1.5"]] as const) {
    const e = errors(`    "${flag}", "${value}",`);
    assert.equal(e.length, 1, e.join("\n"));
    assert.match(e[0] ?? "", new RegExp(`:12:5: error: ${flag} must be a positive integer, not "${value.replace(".", "\\.")}"`));
  }
  assert.match(errors('    "-dcp", "3",')[0] ?? "", /-dcp 3 does not divide tensor_parallel_size 2/);
});
