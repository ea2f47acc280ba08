import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire, isBuiltin } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type BuildOptions, type Plugin } from "esbuild";
import { englishOnly } from "./build-web.js";
import { engineMinimum, enginesNode } from "../src/config/package-info.js";

// The `launcher` command (package.json "bin"): src/cli/bin.ts and src/cli/main.ts bundled by
// esbuild into CLI_OUT, with everything they import, into ES modules split at each dynamic
// import (https://esbuild.github.io/api/#splitting), so a command still loads only its own code
// (src/cli/main.ts COMMANDS). Why a bundle: Node resolves, reads and links every module file on its
// own, and `launcher validate` loaded about 190 of them; bench/cli-start.ts measures the start.
// Types are checked by `npm run typecheck`, not here: esbuild only strips them.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** Where the bundle goes: two folders below the package, as src/cli/ is (src/config/package-info.ts PACKAGE_ROOT). */
export const CLI_OUT = path.join(ROOT, "dist", "launcher");

/** What each file of the bundle holds (its sources, paths from the package's folder): cli-start.test.ts reads what a command loads by it. */
export const INPUTS_FILE = "inputs.json";

/**
 * A package that launcher imports with `await import()` is left to Node. Its module is loaded only
 * when used, so bundling saves no start; and esbuild makes a CommonJS package imported that way
 * into a chunk with a default export only, where Node gives its named exports too (`const { Agent }
 * = await import("undici")` found no Agent). Kinds: https://esbuild.github.io/plugins/#on-resolve-arguments
 */
const dynamicPackagesToNode: Plugin = {
  name: "dynamic-packages-to-node",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.kind === "dynamic-import" && !args.path.startsWith("node:") ? { path: args.path, external: true } : undefined));
  },
};

/**
 * ajv-formats-draft2019 (under kubernetes-models) requires "punycode", meaning its own dependency,
 * which Node resolves to its deprecated built-in instead; Node stays silent on that only for a
 * caller inside node_modules (DEP0040), which a bundle is not.
 */
const ALIAS: Readonly<Record<string, string>> = { punycode: "punycode/" };

/**
 * Node's own modules are required when the bundle first reads one of their exports, not imported
 * at start. For an ES module's `import { inspect } from "node:util"` Node builds the built-in's
 * whole namespace, which reads every lazy export: util's loads worker_threads and the assert diff,
 * fs's fs/promises and readline, process's its stdio streams (Node 24, counted with
 * process.moduleLoadList: `import "node:util"` alone loads 36 internal modules, `import "node:fs"`
 * 34, `require("node:util")` none). A plain require() still loads the module with the file that
 * requires it (crypto: 38 internal modules; child_process, which commander requires at its start
 * and never uses here: 28), and esbuild's interop copies each export's property descriptor, which
 * reads util's lazy exports too (44 modules, 7-11 ms here).
 *
 * So a built-in that is a plain object is handed over as an empty object whose prototype reads,
 * writes and asks for any name on the real module, required at the first such use: esbuild's
 * interop object for it inherits that prototype, so `import { x }`, `import * as m` and a default
 * import all reach the real exports, whichever Node runs, and copying its (no) own properties
 * costs nothing. What it lacks: own properties, so `Object.keys(fs)` and a spread see none, and
 * identity with the real module. A built-in that is a function (events' EventEmitter, assert,
 * stream, module), or an object of another kind (cluster, an EventEmitter; process, the global
 * one that code sets) is required as it is. `await import("node:x")` stays an import, loaded only
 * when used. A name ALIAS gives a package is that package's.
 */
const builtinsOnUse: Plugin = {
  name: "builtins-on-use",
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (!isBuiltin(args.path) || Object.hasOwn(ALIAS, args.path) || args.kind === "dynamic-import") return undefined;
      return args.namespace === "builtin" ? { path: args.path, external: true } : { path: args.path, namespace: "builtin" };
    });
    b.onLoad({ filter: /.*/, namespace: "builtin" }, (args) => ({ contents: builtinModule(args.path), loader: "js" }));
  },
};

/** The CommonJS module builtinsOnUse puts in the bundle for the built-in `name` (one isBuiltin accepts). */
function builtinModule(name: string): string {
  const id = JSON.stringify(name);
  const real: unknown = createRequire(import.meta.url)(name);
  if (typeof real !== "object" || real === null || Object.getPrototypeOf(real) !== Object.prototype) return `module.exports = require(${id});`;
  return [
    "let real;",
    `const load = () => (real ??= require(${id}));`,
    "module.exports = Object.create(new Proxy({}, { get: (_, key) => load()[key], set: (_, key, value) => Reflect.set(load(), key, value), has: (_, key) => key in load() }));",
  ].join("\n");
}

/** The oldest Node that package.json's engines admits (src/cli/bin.ts says so to an older one), as esbuild names it. */
function nodeTarget(): string {
  const low = engineMinimum(enginesNode(ROOT) ?? "");
  if (low === undefined) throw new Error(`package.json's engines.node does not read as a lowest version: ${enginesNode(ROOT) ?? "(none)"}`);
  return `node${low.join(".")}`;
}

/** The bundle's options, writing into `out` (a test bundles into a folder of its own). */
export function cliBuildOptions(out: string): BuildOptions {
  return {
    absWorkingDir: ROOT,
    entryPoints: ["bin", "main"].map((name) => ({ in: path.join(ROOT, "src", "cli", `${name}.ts`), out: name })),
    outdir: out,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: nodeTarget(),
    // better-sqlite3 loads a native addon from its own folder. undici and log-update are also
    // imported with `await import()` (left to Node, above), so bundling their static imports too
    // would load a second copy into one process.
    external: ["better-sqlite3", "undici", "log-update"],
    alias: ALIAS,
    // CommonJS packages in the bundle call require() for Node's own modules, which an ES module lacks.
    banner: { js: 'import { createRequire as __launcherCreateRequire } from "node:module"; const require = __launcherCreateRequire(import.meta.url);' },
    tsconfig: path.join(ROOT, "tsconfig.json"),
    legalComments: "none",
    logLevel: "warning",
    plugins: [englishOnly, builtinsOnUse, dynamicPackagesToNode],
  };
}

/** How many builds' files buildCli keeps, its own among them: a daemon started from either of the two before it still finds its chunks. */
const KEPT_BUILDS = 3;

/**
 * Builds the CLI into `out` (a folder `launcher` in a folder `dist`); throws, with esbuild's errors
 * printed, when it cannot. Chunks are named by their content, and a running daemon imports some
 * only when it first needs them (an SSH session, a boot): so the files of the last KEPT_BUILDS
 * different builds stay, and only older ones go. `.outputs` lists each build's files, newest
 * first, a blank line between builds. The layout tsc emitted before the bundle is replaced (oldLayout).
 */
export async function buildCli(out: string = CLI_OUT): Promise<{ files: number }> {
  if (path.basename(out) !== "launcher" || path.basename(path.dirname(out)) !== "dist") throw new Error(`${out}: the CLI builds into a folder dist/launcher, whose files it prunes`);
  mkdirSync(out, { recursive: true });
  const listFile = path.join(out, ".outputs");
  const before = existsSync(listFile) ? readFileSync(listFile, "utf8").split("\n\n").map((b) => b.split("\n").filter((f) => f !== "")) : [];
  const result = await build({ ...cliBuildOptions(out), metafile: true });
  const inputs = Object.fromEntries(Object.entries(result.metafile.outputs).map(([file, o]) => [path.basename(file), Object.keys(o.inputs)]));
  writeFileSync(path.join(out, INPUTS_FILE), `${JSON.stringify(inputs)}\n`);
  const now = [...Object.keys(inputs), INPUTS_FILE].sort();
  const builds = [now, ...before.filter((b) => b.join("\n") !== now.join("\n"))].slice(0, KEPT_BUILDS);
  const keep = new Set([...builds.flat(), ".outputs"]);
  for (const f of readdirSync(out)) if (!keep.has(f)) rmSync(path.join(out, f), { recursive: true, force: true });
  writeFileSync(listFile, `${builds.map((b) => b.join("\n")).join("\n\n")}\n`);
  oldLayout(path.dirname(out), path.basename(out));
  return { files: now.length };
}

/**
 * tsc's layout of dist/ (one folder per folder of src/) goes, but for dist/cli/bin.js and main.js,
 * which forward to the bundle: `npm install -g` of a checkout linked `launcher` to dist/cli/bin.js,
 * and `launcher export systemd` wrote that path into units, so those run the bundle after the next
 * build instead of the old files. Nothing else in dist/ is touched.
 */
function oldLayout(dist: string, bundle: string): void {
  const folders = readdirSync(path.join(ROOT, "src"), { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== "cli");
  for (const folder of folders) rmSync(path.join(dist, folder.name), { recursive: true, force: true });
  const cli = path.join(dist, "cli");
  if (!existsSync(path.join(cli, "bin.js"))) return;
  rmSync(cli, { recursive: true, force: true });
  mkdirSync(cli);
  // As if the bundle's bin had been run: src/cli/main.ts loads only the command it runs for that file.
  const forward = [
    "#!/usr/bin/env node",
    "// Forwards to the CLI's bundle (scripts/build-cli.ts oldLayout).",
    'import { fileURLToPath } from "node:url";',
    `process.argv[1] = fileURLToPath(new URL("../${bundle}/bin.js", import.meta.url));`,
    `await import("../${bundle}/bin.js");`,
  ];
  for (const name of ["bin", "main"]) writeFileSync(path.join(cli, `${name}.js`), `${forward.join("\n")}\n`, { mode: 0o755 });
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = performance.now();
  buildCli().then(
    ({ files }) => console.log(`dist/launcher: ${files} files, built in ${Math.round(performance.now() - started)} ms`),
    (e: unknown) => {
      console.error((e as Error).message);
      process.exitCode = 1;
    },
  );
}
