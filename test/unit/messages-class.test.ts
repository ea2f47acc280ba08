import assert from "node:assert/strict";
import { test } from "node:test";
import path from "node:path";
import { RemoteError, reportError, UserError } from "../../src/config/errors.js";
import { inNpxCache, stableLauncherArgv } from "../../src/daemon/systemd.js";
import { pushLeft } from "../../src/transfer/images.js";
import { fileRecipeSource, shownPath } from "../../src/recipe/fs-source.js";

// Issue 25's messages, fixed as a class: one prefix per line, paths as the user gave them,
// `export systemd` writing a path that lasts.

const lines = (e: unknown): string[] => {
  const out: string[] = [];
  reportError(e, (t) => out.push(...t.split("\n")));
  return out;
};

test("the error funnel: one 'launcher: ' per line, also for a failure whose node is launcher itself (an interrupted boot)", () => {
  // What up throws when Ctrl-C stops its watch: the failure is launcher's own, not a node's.
  const interrupted = new RemoteError("launcher", "boot of practice-2x failed: interrupted (SIGINT)", "rolled back: removed 2 containers (n1/launcher-practice-2x-r0, n2/launcher-practice-2x-r1)");
  const said = lines(interrupted);
  assert.equal(said[0], "launcher: boot of practice-2x failed: interrupted (SIGINT)");
  for (const e of [interrupted, new UserError("launcher: Ray nodes not joined after 4 s"), new RemoteError("n2 (rank 1)", "boot of d failed: x")]) {
    for (const l of lines(e)) assert.doesNotMatch(l, /launcher: .*launcher: /, l);
  }
  assert.equal(lines(new RemoteError("n2 (rank 1)", "boot of d failed: x"))[0], "launcher: n2 (rank 1): boot of d failed: x");
  assert.equal(lines(new UserError("no node n9"))[0], "launcher: no node n9");
});

test("paths shown as the user gave them: never climbing out of the working folder with ../", () => {
  assert.equal(shownPath("/dev/zero"), "/dev/zero");
  assert.equal(shownPath(path.join(process.cwd(), "recipes", "x", "recipe.toml")), path.join("recipes", "x", "recipe.toml"));
  assert.equal(shownPath(path.resolve("..", "elsewhere.toml"), "../elsewhere.toml"), "../elsewhere.toml");
  assert.equal(shownPath(path.resolve("..", "elsewhere.toml")), path.resolve("..", "elsewhere.toml"));
  assert.equal(shownPath(process.cwd()), process.cwd());
  // `launcher plan /dev/zero` (issue 25: "recipe ../../dev/zero").
  const found = fileRecipeSource([]).find("/dev/zero", undefined);
  assert.ok("error" in found);
  assert.match(found.error, /^recipe \/dev\/zero /);
  assert.doesNotMatch(found.error, /\.\.\//);
  const missing = fileRecipeSource([]).find("/nonexistent-launcher-test/x.toml", undefined);
  assert.ok("error" in missing);
  assert.match(missing.error, /looked for \/nonexistent-launcher-test\/x\.toml\)/);
});

test("export systemd: ExecStart names a path that lasts; npx's cache only through an installed launcher, else refused", () => {
  const npx = "/home/u/.npm/_npx/4f1c2a/node_modules/dgx-spark-launcher/dist/cli/main.js";
  const global = "/usr/local/lib/node_modules/dgx-spark-launcher/dist/cli/main.js";
  assert.equal(inNpxCache(npx), true);
  assert.equal(inNpxCache(global), false);
  assert.equal(inNpxCache("/home/u/my_npx_things/main.js"), false);
  const run = { execPath: "/usr/bin/node", execArgv: [] };
  // Installed: the running script as it is.
  assert.deepEqual(stableLauncherArgv({ ...run, script: global, onPath: [] }, ["serve"]), ["/usr/bin/node", global, "serve"]);
  // Through npx with a global install on PATH too (npx puts its own .bin first): the installed one.
  assert.deepEqual(stableLauncherArgv({ ...run, script: npx, onPath: [npx, global] }, ["serve"]), ["/usr/bin/node", global, "serve"]);
  // Through npx alone: refused, saying to install it first.
  assert.throws(
    () => stableLauncherArgv({ ...run, script: npx, onPath: [npx] }, ["serve"]),
    (e: unknown) => e instanceof UserError && /npx's cache/.test(e.message) && /npm install -g/.test(e.hint ?? ""),
  );
});

test("an interrupted images push says what each node was left with: the image whole, none, its other build, or not asked", () => {
  const id = `sha256:${"a".repeat(64)}`;
  const other = `sha256:${"b".repeat(64)}`;
  assert.equal(
    pushLeft(id, [{ node: "n2", id }, { node: "n3" }, { node: "n4", id: other }, { node: "n5", error: "ssh: connect to host n5 port 22: Connection refused" }]),
    "n2 has the image (aaaaaaaaaaaa); n3 has no image under the name (a load cut short leaves none); n4 still has its other build (bbbbbbbbbbbb), not part of this one; n5 could not be asked (ssh: connect to host n5 port 22: Connection refused)",
  );
});
