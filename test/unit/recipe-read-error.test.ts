import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { readTextFile } from "../../src/config/read-file.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";

// A recipe that cannot be read is named as the user knows it, in a message made once with that
// name: never another message's text rewritten (String.prototype.replace reads `$'` and `$&` in
// its replacement as patterns, and a folder may be called so).

test("readTextFile names the file by the path it is shown as, and opens the one it is given", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-read-"));
  try {
    assert.throws(() => readTextFile({ path: dir, shown: "my/recipe.toml" }, "recipe"), (e: unknown) => e instanceof UserError && e.message === "recipe my/recipe.toml is a folder, not a file");
    assert.throws(() => readTextFile({ path: path.join(dir, "none"), shown: "none.toml" }, "recipe"), (e: unknown) => e instanceof UserError && e.message === "recipe none.toml not found");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a recipe that is no file is named whole, whatever characters its path holds", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-read-"));
  try {
    const odd = path.join(dir, "x$'y$&z");
    // A folder named recipe.toml inside the recipe's folder: found, then refused as a folder.
    mkdirSync(path.join(odd, "recipe.toml"), { recursive: true });
    const found = fileRecipeSource([]).find(odd);
    assert.deepEqual(found, { error: `recipe ${path.join(odd, "recipe.toml")} is a folder, not a file` });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
