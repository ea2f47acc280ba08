import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, statSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { build } from "esbuild";
import { buildProgram, commandsFor, COMMANDS } from "../../src/cli/main.js";
import { engineMinimum, packageVersion, parseNodeVersion, tooOldNodeLine } from "../../src/config/package-info.js";
import { compileCacheDir, ownCompileCacheDir } from "../../src/cli/compile-cache.js";
import { cliBuildOptions, INPUTS_FILE } from "../../scripts/build-cli.js";
import { builtBin, SOURCE_BIN, sourceArgs } from "../built-cli.js";
import { LOADED_HOOK, loadedUrls } from "./loaded-packages.js";

// What a command line loads before it answers: each command only what it uses (issue 26, "CLI
// start"). Asserted by the modules' paths, never by time (bench/cli-start.ts measures the time).

/** No compile cache written into the home of whoever runs the tests. */
const QUIET = { NODE_OPTIONS: "", NODE_DISABLE_COMPILE_CACHE: "1" };

const ROOT = `file://${path.resolve(".")}/`;

/**
 * The modules `launcher ARGS` loads: the sources' own, through tsx; or, with LAUNCHER_USE_DIST=1
 * (`npm test`), the sources each file of the bundle it loads was made of (scripts/build-cli.ts
 * INPUTS_FILE), so the same assertions hold for what users run.
 */
function modulesLoadedBy(args: string[]): string[] {
  const dist = process.env.LAUNCHER_USE_DIST === "1";
  const r = spawnSync(process.execPath, ["--import", LOADED_HOOK, ...(dist ? [builtBin()] : sourceArgs(SOURCE_BIN)), ...args], { encoding: "utf8", env: { ...process.env, ...QUIET } });
  assert.equal(r.status, 0, r.stderr);
  const urls = loadedUrls(r.stderr);
  if (!dist) return urls;
  const bundle = path.dirname(builtBin());
  const inputs = JSON.parse(readFileSync(path.join(bundle, INPUTS_FILE), "utf8")) as Record<string, string[]>;
  const ofBundle = (u: string): string | undefined => (u.startsWith("file:") && path.dirname(fileURLToPath(u)) === bundle ? path.basename(fileURLToPath(u)) : undefined);
  // The hook saw the bundle's files (a mapping that found none would pass any assertion).
  assert.ok(urls.some((u) => ofBundle(u) !== undefined), urls.join("\n"));
  return urls.flatMap((u) => {
    const file = ofBundle(u);
    return file === undefined ? [u] : (inputs[file] ?? [`unlisted ${file}`]).map((i) => `${ROOT}${i}`);
  });
}
const under = (urls: readonly string[], prefix: string): string[] => urls.filter((u) => u.startsWith(`${ROOT}${prefix}`));
const packages = (urls: readonly string[], names: readonly string[]): string[] =>
  urls.filter((u) => names.some((n) => u.includes(`/node_modules/${n}`)));

test("`launcher status --help` and `launcher --version` load neither compare's plotting nor the transfer code", () => {
  for (const args of [["status", "--help"], ["--version"]]) {
    const loaded = modulesLoadedBy(args);
    // The hook sees the CLI's own files (a hook that saw nothing would pass any assertion).
    assert.ok(under(loaded, "src/cli/").length > 0, loaded.join("\n"));
    assert.deepEqual(packages(loaded, ["vega", "d3-", "@stdlib/"]), [], `${args.join(" ")}: plotting or statistics`);
    assert.deepEqual(under(loaded, "src/transfer/"), [], `${args.join(" ")}: transfer code`);
  }
});

test("`launcher lanes --help` loads commander and the CLI's option code only: no store, no SSH session, no schemas", () => {
  const loaded = modulesLoadedBy(["lanes", "--help"]);
  assert.ok(packages(loaded, ["commander"]).length > 0, loaded.join("\n"));
  assert.deepEqual(packages(loaded, ["zod", "better-sqlite3", "log-update", "toml-eslint-parser"]), []);
  const deployCode = ["nodes", "transfer", "claims", "boot", "lanes", "supervise", "measure", "setup", "store", "remote", "recipe"];
  assert.deepEqual(deployCode.flatMap((folder) => under(loaded, `src/${folder}/`)), []);
});

test("`launcher validate` loads neither the transfer code, the store (better-sqlite3) nor the terminal's progress lines", () => {
  const loaded = modulesLoadedBy(["validate", path.resolve("recipes/practice-2x")]);
  // It did read a recipe: the hook saw the recipe code (a hook that saw nothing would pass).
  assert.ok(under(loaded, "src/recipe/").length > 0, loaded.join("\n"));
  assert.deepEqual(under(loaded, "src/transfer/"), []);
  assert.deepEqual([...under(loaded, "src/store/"), ...packages(loaded, ["better-sqlite3"])], []);
  assert.deepEqual(packages(loaded, ["log-update", "string-width"]), []);
});

test("`launcher --version` answers from package.json without commander, byte for byte as commander prints it", () => {
  const loaded = modulesLoadedBy(["--version"]);
  assert.deepEqual(packages(loaded, ["commander"]), []);
  const viaBin = spawnSync(process.execPath, [...sourceArgs(SOURCE_BIN), "--version"], { encoding: "utf8", env: { ...process.env, ...QUIET } });
  // main.ts run itself parses every command line with commander.
  const viaCommander = spawnSync(process.execPath, [...sourceArgs(), "--version"], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  assert.equal(viaBin.status, 0, viaBin.stderr);
  assert.equal(viaCommander.status, 0, viaCommander.stderr);
  assert.equal(viaBin.stdout, viaCommander.stdout);
  assert.equal(viaBin.stdout, `${packageVersion()}\n`);
  assert.equal(viaBin.stderr, "");
});

test("the command table holds every command buildProgram registers, by name and alias, in help's order", () => {
  const registered = buildProgram().commands.map((c) => [c.name(), ...c.aliases()]);
  assert.deepEqual(COMMANDS.map((c) => c.names), registered);
});

test("a command line registers the one command its first word names; help, no command, a typo and completion register all", () => {
  const names = (argv: string[]): string[] => commandsFor(argv).map((c) => c.names[0] ?? "");
  assert.deepEqual(names(["lanes", "--help"]), ["lanes"]);
  assert.deepEqual(names(["ps", "--json"]), ["status"]);
  assert.deepEqual(names(["validate", "lanes"]), ["validate"]);
  for (const argv of [[], ["--help"], ["-h"], ["help", "lanes"], ["statsu"], ["--bogus", "lanes"], ["completion", "bash"]]) {
    assert.equal(commandsFor(argv).length, COMMANDS.length, argv.join(" "));
  }
});

test("the Node.js check reads package.json's engines form and compares versions as numbers", () => {
  assert.deepEqual(engineMinimum(">=22.12"), [22, 12, 0]);
  assert.deepEqual(engineMinimum(">= 22.12.1"), [22, 12, 1]);
  assert.deepEqual(engineMinimum(">=24"), [24, 0, 0]);
  assert.deepEqual(engineMinimum("^22.13.0 || >=24"), [22, 13, 0]);
  assert.deepEqual(engineMinimum(">=24 || ~22.13"), [22, 13, 0]);
  assert.equal(engineMinimum("22.x || >=24"), undefined);
  assert.equal(engineMinimum("<25"), undefined);
  assert.deepEqual(parseNodeVersion("v20.20.2"), [20, 20, 2]);
  assert.equal(tooOldNodeLine("v22.12.0", ">=22.12"), undefined);
  assert.equal(tooOldNodeLine("v24.1.0", ">=22.12"), undefined);
  assert.equal(tooOldNodeLine("v22.9.0", ">=22.12"), "launcher needs Node.js 22.12 or later (this is Node.js v22.9.0): install Node.js 24 LTS, as the README's Install section says, and run launcher with it");
  assert.match(tooOldNodeLine("v20.20.2", ">=22.12") ?? "", /^launcher needs Node\.js 22\.12 or later \(this is Node\.js v20\.20\.2\)/);
  assert.equal(tooOldNodeLine("v22.12.0", "^22.13.0 || >=24"), "launcher needs Node.js 22.13 or later (this is Node.js v22.12.0): install Node.js 24 LTS, as the README's Install section says, and run launcher with it");
  assert.equal(tooOldNodeLine("v23.1.0", "^22.13.0 || >=24"), undefined);
  // A form the check does not read is npm's to judge, not a refusal.
  assert.equal(tooOldNodeLine("v20.20.2", "22.x || >=24"), undefined);
  assert.equal(tooOldNodeLine("v20.20.2", undefined), undefined);
});

test("the compile cache is kept in the user's own cache folder, never in the /tmp folder every user may write", () => {
  assert.equal(compileCacheDir({}, "/home/u"), "/home/u/.cache/launcher/node-compile-cache");
  assert.equal(compileCacheDir({ XDG_CACHE_HOME: "/c" }, "/home/u"), "/c/launcher/node-compile-cache");
  assert.equal(compileCacheDir({ XDG_CACHE_HOME: "rel" }, "/home/u"), "/home/u/.cache/launcher/node-compile-cache");
  // The user's own choice of folder is Node's to use.
  assert.equal(compileCacheDir({ NODE_COMPILE_CACHE: "/mine" }, "/home/u"), undefined);
});

test("a start through the bin fills the compile cache there; NODE_DISABLE_COMPILE_CACHE=1 keeps none", () => {
  const cacheFiles = (env: NodeJS.ProcessEnv): string[] => {
    const home = mkdtempSync(path.join(tmpdir(), "launcher-cache-"));
    try {
      const { NODE_COMPILE_CACHE: _c, NODE_DISABLE_COMPILE_CACHE: _d, ...clean } = process.env;
      const r = spawnSync(process.execPath, [...sourceArgs(SOURCE_BIN), "lanes", "--help"], { encoding: "utf8", env: { ...clean, NODE_OPTIONS: "", XDG_CACHE_HOME: home, ...env } });
      assert.equal(r.status, 0, r.stderr);
      const dir = path.join(home, "launcher", "node-compile-cache");
      return existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: "utf8" }) : [];
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  };
  assert.ok(cacheFiles({}).length > 1);
  assert.deepEqual(cacheFiles({ NODE_DISABLE_COMPILE_CACHE: "1" }), []);
});

test("a compile-cache folder that is not ours alone (writable by others, or a link) is not used: the start goes on uncached", () => {
  const home = mkdtempSync(path.join(tmpdir(), "launcher-cache-"));
  try {
    const { NODE_COMPILE_CACHE: _c, NODE_DISABLE_COMPILE_CACHE: _d, ...clean } = process.env;
    const run = (): void => {
      const r = spawnSync(process.execPath, [...sourceArgs(SOURCE_BIN), "lanes", "--help"], { encoding: "utf8", env: { ...clean, NODE_OPTIONS: "", XDG_CACHE_HOME: home } });
      assert.equal(r.status, 0, r.stderr);
    };
    // Someone else's folder, open to all: its code would be run as ours.
    const planted = path.join(home, "launcher");
    mkdirSync(path.join(planted, "node-compile-cache"), { recursive: true });
    chmodSync(planted, 0o777);
    run();
    assert.deepEqual(readdirSync(path.join(planted, "node-compile-cache")), []);
    assert.equal(ownCompileCacheDir(path.join(planted, "node-compile-cache")), undefined);
    rmSync(planted, { recursive: true });
    // One we make is 0700 and filled.
    run();
    assert.equal(statSync(planted).mode & 0o777, 0o700);
    assert.ok(readdirSync(path.join(planted, "node-compile-cache")).length > 0);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

/** A Node older than 22.12 on this machine (Debian's and Ubuntu's own nodejs), if there is one. */
const OLD_NODE = "/usr/bin/node";
const oldNodeVersion = existsSync(OLD_NODE) ? spawnSync(OLD_NODE, ["--version"], { encoding: "utf8" }).stdout.trim() : "";
const oldEnough = ((): string | false => {
  if (oldNodeVersion === "") return `${OLD_NODE} is not installed`;
  const v = parseNodeVersion(oldNodeVersion);
  return v !== undefined && (v[0] < 22 || (v[0] === 22 && v[1] < 12)) ? false : `${OLD_NODE} is ${oldNodeVersion}, not older than 22.12`;
})();

/**
 * A package folder with the CLI as `npm run build` bundles it (dist/launcher/, scripts/build-cli.ts;
 * the old Node runs it as an installed launcher would be run) and `packageJson`; main.js is
 * removed, so a guard that let the start go on would fail to find it instead of printing the line.
 */
async function packageWithBundle(packageJson: object): Promise<{ dir: string; bin: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-bin-"));
  const out = path.join(dir, "dist", "launcher");
  await build(cliBuildOptions(out));
  rmSync(path.join(out, "main.js"));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify(packageJson));
  return { dir, bin: path.join(out, "bin.js") };
}

test("under a Node.js older than engines admits, the bin says one line of what to do and exits 1", { skip: oldEnough }, async () => {
  const { dir, bin } = await packageWithBundle({ name: "dgx-spark-launcher", version: "0.0.1", type: "module", engines: { node: ">=22.12" } });
  try {
    for (const args of [["--version"], ["status"], []]) {
      const r = spawnSync(OLD_NODE, [bin, ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
      assert.equal(r.status, 1, r.stderr);
      assert.equal(r.stdout, "");
      assert.equal(r.stderr, `launcher needs Node.js 22.12 or later (this is Node.js ${oldNodeVersion}): install Node.js 24 LTS, as the README's Install section says, and run launcher with it\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("this package's own engines refuse that old Node.js the same way", { skip: oldEnough || tooOldNodeLine(oldNodeVersion, (JSON.parse(readFileSync("package.json", "utf8")) as { engines?: { node?: string } }).engines?.node) === undefined ? `package.json's engines admit ${oldNodeVersion}` : false }, async () => {
  const { dir, bin } = await packageWithBundle({});
  try {
    copyFileSync("package.json", path.join(dir, "package.json"));
    const r = spawnSync(OLD_NODE, [bin, "--version"], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /^launcher needs Node\.js \S+ or later \(this is Node\.js v[\d.]+\): [^\n]+\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
