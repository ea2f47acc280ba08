import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

// The README's install, as a user runs it: build, `npm install -g` into a prefix, then the
// `launcher` command from a folder that is not the checkout. No practice cluster is needed.
const ROOT = path.resolve(".");
const tmp = mkdtempSync(path.join(tmpdir(), "launcher-install-"));
const prefix = path.join(tmp, "prefix");
const elsewhere = path.join(tmp, "elsewhere");
const bin = path.join(prefix, "bin", "launcher");
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string; version: string; bin: Record<string, string> };

const run = (command: string, args: string[], env: NodeJS.ProcessEnv = {}, cwd = elsewhere) =>
  spawnSync(command, args, { cwd, encoding: "utf8", timeout: 180_000, env: { ...process.env, LAUNCHER_CLUSTER: "", LAUNCHER_RECIPES: "", XDG_CONFIG_HOME: path.join(tmp, "config"), XDG_STATE_HOME: path.join(tmp, "state"), NODE_OPTIONS: "", ...env } });
const launcher = (args: string[], env: NodeJS.ProcessEnv = {}) => run(bin, args, env);

before(() => {
  mkdirSync(elsewhere, { recursive: true });
  // `npm ci` builds dist/ (prepare); the tests run from sources, so build the command here.
  const build = run(process.execPath, ["--import", "tsx", "scripts/build-cli.ts"], {}, ROOT);
  assert.equal(build.status, 0, `build: ${build.stdout}${build.stderr}`);
  // The README's command: dist/ is built, so the global install only links the checkout
  // (--ignore-scripts: npm would otherwise ask to allow the prepare script it does not need).
  const install = run("npm", ["install", "-g", "--prefix", prefix, "--ignore-scripts", "--offline", "--no-audit", "--no-fund", ROOT], {}, ROOT);
  assert.equal(install.status, 0, `npm install -g: ${install.stdout}${install.stderr}`);
}, { timeout: 300_000 });
after(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe("install as a `launcher` command", () => {
  test("the package's name is not the registry's unrelated `launcher`, and its command is", () => {
    assert.notEqual(pkg.name, "launcher", "`npm i -g launcher` fetches an unrelated package of that name");
    assert.deepEqual(Object.keys(pkg.bin), ["launcher"]);
    assert.equal(realpathSync(path.join(prefix, "lib", "node_modules", pkg.name)), realpathSync(ROOT));
  });

  test("`launcher --version` and `launcher validate` run from another folder, with the installed recipes", () => {
    const version = launcher(["--version"]);
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout.trim(), pkg.version);
    const validate = launcher(["validate", "practice-2x"]);
    assert.equal(validate.status, 0, validate.stderr);
    const list = launcher(["cluster", "list"]);
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, /cluster init HOST/);
  });

  test("recipes are also found in $LAUNCHER_RECIPES and in the current folder's recipes/", () => {
    for (const [dir, env] of [[path.join(tmp, "mine"), { LAUNCHER_RECIPES: path.join(tmp, "mine") }], [path.join(elsewhere, "recipes"), {}]] as const) {
      cpSync(path.join(ROOT, "recipes", "practice-2x"), path.join(dir, "my-recipe"), { recursive: true });
      const r = launcher(["validate", "my-recipe"], env);
      assert.equal(r.status, 0, `${dir}: ${r.stderr}`);
      rmSync(dir, { recursive: true, force: true });
      assert.notEqual(launcher(["validate", "my-recipe"], env).status, 0, "not found once removed: it was read from there");
    }
  });
});
