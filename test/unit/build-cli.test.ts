import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { buildCli } from "../../scripts/build-cli.js";
import { packageVersion } from "../../src/config/package-info.js";
import { builtBin } from "../built-cli.js";
import { LOADED_HOOK, loadedInternals } from "./loaded-packages.js";

// `npm run build` of the CLI (scripts/build-cli.ts) into a package folder of its own: what it keeps
// for a daemon still running the build before, and what it makes of tsc's old layout of dist/.

test("a build keeps the files of the build before it (a running daemon still imports them) and removes older ones", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-build-cli-"));
  try {
    const out = path.join(root, "dist", "launcher");
    mkdirSync(out, { recursive: true });
    // A build before this one made chunk-BEFORE.js (listed); chunk-OLDER.js is of one before that.
    writeFileSync(path.join(out, "chunk-BEFORE.js"), "");
    writeFileSync(path.join(out, "chunk-OLDER.js"), "");
    writeFileSync(path.join(out, ".outputs"), "bin.js\nchunk-BEFORE.js\n");
    await buildCli(out);
    assert.equal(existsSync(path.join(out, "chunk-BEFORE.js")), true, "the build before is kept");
    assert.equal(existsSync(path.join(out, "chunk-OLDER.js")), false, "an older one goes");
    const listed = (readFileSync(path.join(out, ".outputs"), "utf8").split("\n\n")[0] ?? "").split("\n");
    assert.ok(listed.includes("bin.js") && listed.includes("main.js") && !listed.includes("chunk-BEFORE.js"), listed.join(" "));
    for (const f of listed) assert.equal(existsSync(path.join(out, f)), true, f);
    // A build of the same sources is not another build: the one before it still counts.
    await buildCli(out);
    assert.equal(existsSync(path.join(out, "chunk-BEFORE.js")), true, "kept over a build that changed nothing");
    // Three builds of other sources later, chunk-BEFORE.js goes.
    const now = readFileSync(path.join(out, ".outputs"), "utf8").split("\n\n")[0] ?? "";
    for (const f of ["chunk-G2.js", "chunk-G3.js"]) writeFileSync(path.join(out, f), "");
    writeFileSync(path.join(out, ".outputs"), [now, "chunk-G2.js", "chunk-G3.js", "chunk-BEFORE.js\n"].join("\n\n"));
    await buildCli(out);
    assert.equal(existsSync(path.join(out, "chunk-BEFORE.js")), false, "older than the builds kept");
    assert.equal(existsSync(path.join(out, "chunk-G2.js")) && existsSync(path.join(out, "chunk-G3.js")), true);
    assert.ok(existsSync(path.join(out, "main.js")));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("tsc's old layout of dist/ goes, but dist/cli/bin.js and main.js, which forward to the bundle; the rest of dist/ stays", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-build-cli-"));
  try {
    const dist = path.join(root, "dist");
    for (const d of ["cli", "app", "store", "web", "mine"]) mkdirSync(path.join(dist, d), { recursive: true });
    writeFileSync(path.join(dist, "cli", "bin.js"), 'console.log("the old build");\n');
    writeFileSync(path.join(dist, "cli", "status.js"), "");
    writeFileSync(path.join(dist, "app", "up.js"), "");
    writeFileSync(path.join(dist, "web", "index.html"), "<p>page</p>\n");
    copyFileSync("package.json", path.join(root, "package.json"));
    await buildCli(path.join(dist, "launcher"));
    assert.equal(existsSync(path.join(dist, "app")), false);
    assert.equal(existsSync(path.join(dist, "store")), false);
    assert.equal(existsSync(path.join(dist, "cli", "status.js")), false);
    assert.equal(readFileSync(path.join(dist, "web", "index.html"), "utf8"), "<p>page</p>\n");
    assert.equal(existsSync(path.join(dist, "mine")), true, "only the folders of src/ are tsc's");
    // A link or a systemd unit that names dist/cli runs the new build. The package has no
    // node_modules: a forwarder that left argv[1] as it was would make main.js load every command,
    // and validate would fail on better-sqlite3.
    for (const entry of ["bin.js", "main.js"]) {
      const r = spawnSync(process.execPath, [path.join(dist, "cli", entry), "--version"], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", NODE_DISABLE_COMPILE_CACHE: "1" } });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `${packageVersion()}\n`);
    }
    const v = spawnSync(process.execPath, [path.join(dist, "cli", "main.js"), "validate", path.resolve("recipes/practice-2x")], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", NODE_DISABLE_COMPILE_CACHE: "1" } });
    assert.equal(v.status, 0, v.stderr);
    assert.match(v.stdout, /practice-2x\/recipe\.toml: ok/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a checkout that never had tsc's layout gets no forwarders", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-build-cli-"));
  try {
    copyFileSync("package.json", path.join(root, "package.json"));
    await buildCli(path.join(root, "dist", "launcher"));
    assert.equal(existsSync(path.join(root, "dist", "cli")), false);
    assert.ok(existsSync(path.join(root, "dist", "launcher", "bin.js")));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("the build refuses a folder that is not dist/launcher: it prunes the files it did not make", async () => {
  await assert.rejects(buildCli(path.join(tmpdir(), "launcher-not-dist")), /builds into a folder dist\/launcher/);
  assert.equal(existsSync(path.join(tmpdir(), "launcher-not-dist")), false);
});

test("Node's own modules load where the bundle uses them: validate loads neither child_process, crypto, worker_threads nor fs/promises", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-build-cli-"));
  try {
    // `npm test` has just built dist/ (LAUNCHER_USE_DIST=1); a file run alone builds its own.
    let bin = builtBin();
    if (process.env.LAUNCHER_USE_DIST !== "1") {
      copyFileSync("package.json", path.join(root, "package.json"));
      await buildCli(path.join(root, "dist", "launcher"));
      bin = builtBin(root);
    }
    const loadedBy = (args: string[]): Set<string> => {
      const r = spawnSync(process.execPath, ["--import", LOADED_HOOK, ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", NODE_DISABLE_COMPILE_CACHE: "1" } });
      assert.equal(r.status, 0, r.stderr);
      return loadedInternals(r.stderr);
    };
    // What any ES module that imports another loads (an older Node's own loader read files with fs/promises).
    writeFileSync(path.join(root, "a.mjs"), 'import "./b.mjs";\n');
    writeFileSync(path.join(root, "b.mjs"), "export {};\n");
    const anyModule = loadedBy([path.join(root, "a.mjs")]);
    const loaded = loadedBy([bin, "validate", path.resolve("recipes/practice-2x")]);
    assert.ok(loaded.has("NativeModule internal/fs/utils"), "the list is there");
    // commander requires child_process at its start; util's namespace reads worker_threads, fs's
    // fs/promises. Only fs/promises is excused where any program loads it.
    for (const m of ["child_process", "crypto", "worker_threads"]) assert.equal(loaded.has(`NativeModule ${m}`), false, `${m} loaded`);
    const promises = "NativeModule internal/fs/promises";
    assert.equal(loaded.has(promises) && !anyModule.has(promises), false, "fs/promises loaded");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
