import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { error } from "../../src/config/diagnostic.js";
import { errorJson, RemoteError, reportError, UserError } from "../../src/config/errors.js";
import { readTextFile } from "../../src/config/read-file.js";
import { imageFolders } from "../../src/transfer/images.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-files-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("readTextFile: a regular file is read whole", () => {
  const f = path.join(dir, "ok.toml");
  writeFileSync(f, "name = \"é\"\n");
  assert.equal(readTextFile(f, "cluster file"), "name = \"é\"\n");
});

test("readTextFile: a folder, a device and a FIFO are one-line user errors, and a FIFO does not block", () => {
  const fifo = path.join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const cases: [string, RegExp][] = [
    [dir, /^cluster file .* is a folder, not a file$/],
    ["/dev/zero", /^cluster file \/dev\/zero is a character device, not a file$/],
    [fifo, /^cluster file .*fifo is a FIFO, not a file$/],
    [path.join(dir, "missing.toml"), /^cluster file .*missing\.toml not found$/],
  ];
  for (const [file, message] of cases) {
    assert.throws(() => readTextFile(file, "cluster file"), (e: unknown) => e instanceof UserError && message.test(e.message), file);
  }
});

test("readTextFile: a file larger than the bound is refused without reading it all", () => {
  const f = path.join(dir, "big.toml");
  writeFileSync(f, "x".repeat(2048));
  assert.throws(() => readTextFile(f, "recipe", 1024), /^UserError: recipe .*big\.toml is larger than 1024 bytes$/);
  assert.equal(readTextFile(f, "recipe", 2048).length, 2048);
});

test("a recipe.toml that is a folder is a diagnostic like a missing recipe, not a crash", () => {
  mkdirSync(path.join(dir, "r", "recipe.toml"), { recursive: true });
  const found = fileRecipeSource([]).find(path.join(dir, "r"));
  assert.ok("error" in found);
  assert.match(found.error, /^recipe .*r\/recipe\.toml is a folder, not a file$/);
});

test("--json errors: one shape for user errors with diagnostics, node errors and bugs", () => {
  const user = new UserError("recipe bad has errors", "fix them", [error({ file: "r.toml", line: 4, col: 16 }, 'docker_image "--privileged" is not a Docker image reference', "write a name")]);
  assert.deepEqual(errorJson(user), {
    error: {
      message: "recipe bad has errors",
      hint: "fix them",
      diagnostics: [{ file: "r.toml", line: 4, col: 16, severity: "error", message: 'docker_image "--privileged" is not a Docker image reference', hint: "write a name" }],
    },
  });
  assert.deepEqual(errorJson(new RemoteError("n2", "docker run failed (exit 125)", "E2BIG\n")), { error: { message: "docker run failed (exit 125)", node: "n2", detail: "E2BIG", diagnostics: [] } });
  const bug = errorJson(new TypeError("x is undefined"));
  assert.equal(bug.error.message, "internal error: x is undefined");
  assert.doesNotMatch(JSON.stringify(bug), /\bat /, "no stack in the JSON");

  const text: string[] = [];
  const json: string[] = [];
  assert.equal(reportError(user, (t) => text.push(t), (t) => json.push(t)), 1);
  assert.deepEqual(JSON.parse(json.join("")), errorJson(user));
  assert.match(text.join("\n"), /r\.toml:4:16: error: docker_image/, "the human text still goes to stderr");
  assert.equal(reportError(new Error("boom"), () => undefined, (t) => json.push(t)), 70);
});

test("a Dockerfile that is a folder is a user error naming it, not a crash", () => {
  const root = path.join(dir, "docker-images");
  mkdirSync(path.join(root, "odd", "Dockerfile"), { recursive: true });
  assert.throws(() => imageFolders([root]), (e: unknown) => e instanceof UserError && /^Dockerfile .*odd\/Dockerfile is a folder, not a file$/.test(e.message));
});
