import { rmSync } from "node:fs";
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

/** The oldest Node that package.json's engines admits (src/cli/bin.ts says so to an older one), as esbuild names it. */
function nodeTarget(): string {
  const low = engineMinimum(enginesNode(ROOT) ?? "");
  if (low === undefined) throw new Error(`package.json's engines.node does not read as a lowest version: ${enginesNode(ROOT) ?? "(none)"}`);
  return `node${low.join(".")}`;
}

/**
 * The bundle's options; `entries` are the names under src/cli/ to bundle (the tests bundle bin
 * alone). better-sqlite3 stays a package: it loads a native addon from its own folder.
 */
export function cliBuildOptions(out: string, entries: readonly string[] = ["bin", "main"], external: readonly string[] = []): BuildOptions {
  return {
    absWorkingDir: ROOT,
    entryPoints: entries.map((name) => ({ in: path.join(ROOT, "src", "cli", `${name}.ts`), out: name })),
    outdir: out,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: nodeTarget(),
    external: ["better-sqlite3", ...external],
    // CommonJS packages in the bundle call require() for Node's own modules, which an ES module lacks.
    banner: { js: 'import { createRequire as __launcherCreateRequire } from "node:module"; const require = __launcherCreateRequire(import.meta.url);' },
    tsconfig: path.join(ROOT, "tsconfig.json"),
    legalComments: "none",
    logLevel: "warning",
    plugins: [englishOnly, dynamicPackagesToNode],
  };
}

/** Builds the CLI into `out`, emptied first; throws (esbuild's errors, printed) when it cannot. */
export async function buildCli(out: string = CLI_OUT): Promise<{ files: number }> {
  rmSync(out, { recursive: true, force: true });
  const result = await build({ ...cliBuildOptions(out), metafile: true });
  if (result.errors.length > 0) throw new Error("the CLI did not build");
  return { files: Object.keys(result.metafile.outputs).length };
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
