import { builtinModules } from "node:module";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

// The dashboard's page (web/): web/src/main.tsx bundled by esbuild into dist/web/app.js (one ESM
// file, minified), its CSS (CSS_FILES) into dist/web/app.css, and web/index.html beside them.
// src/daemon/web-page.ts serves these three by fixed path. No file is fetched at run time from
// anywhere but the daemon: the lab may have no internet.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const WEB_OUT = path.join(ROOT, "dist", "web");

/** The page's styles, in cascade order: uPlot's own, the figures', the page's. */
const CSS_FILES = ["node_modules/uplot/dist/uPlot.min.css", "web/src/figures/figures.css", "web/src/page.css"];

const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/**
 * Refuses any Node built-in module reached from the page: platform "browser" alone would only
 * refuse it as unresolvable, and a package's "browser" field could swap it silently; here the build
 * fails naming what imported it (esbuild plugins, onResolve: https://esbuild.github.io/plugins/#on-resolve).
 */
export const noNodeBuiltins: Plugin = {
  name: "no-node-builtins",
  setup(b) {
    b.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) =>
      BUILTINS.has(args.path) ? { errors: [{ text: `the page may not import the Node built-in "${args.path}" (imported by ${path.relative(ROOT, args.importer)}): keep node code out of web/ and of what it imports` }] } : undefined,
    );
  },
};

/**
 * zod's `z` namespace re-exports every locale (zod/v4/classic/external.js: `export * as locales`),
 * which no bundler can drop from a namespace import: over half the bundle. The page only ever
 * speaks English, zod's default (zod/v4/classic/schemas.js registers `en` itself), so the
 * locales' index is given as English alone.
 */
export const englishOnly: Plugin = {
  name: "zod-english-only",
  setup(b) {
    b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) => (/[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: "zod-locales", namespace: "zod-english-only" } : undefined));
    b.onLoad({ filter: /.*/, namespace: "zod-english-only" }, () => ({ contents: 'export { default as en } from "zod/v4/locales/en.js";', resolveDir: ROOT, loader: "js" }));
  },
};

/** Builds the page into `out`; throws (esbuild's errors, printed) when it cannot. */
export async function buildWeb(out: string = WEB_OUT): Promise<{ bytes: number }> {
  mkdirSync(out, { recursive: true });
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(ROOT, "web", "src", "main.tsx")],
    outfile: path.join(out, "app.js"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    // Preact's JSX runtime (https://esbuild.github.io/api/#jsx-import-source).
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: path.join(ROOT, "web", "tsconfig.json"),
    legalComments: "none",
    logLevel: "warning",
    plugins: [noNodeBuiltins, englishOnly],
  });
  if (result.errors.length > 0) throw new Error("the page did not build");
  const css = CSS_FILES.map((f) => readFileSync(path.join(ROOT, f), "utf8")).join("\n");
  writeFileSync(path.join(out, "app.css"), css);
  copyFileSync(path.join(ROOT, "web", "index.html"), path.join(out, "index.html"));
  return { bytes: readFileSync(path.join(out, "app.js")).length };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = performance.now();
  buildWeb().then(
    ({ bytes }) => console.log(`dist/web: app.js ${(bytes / 1024).toFixed(0)} KiB, built in ${Math.round(performance.now() - started)} ms`),
    (e: unknown) => {
      console.error((e as Error).message);
      process.exitCode = 1;
    },
  );
}
