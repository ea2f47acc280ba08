import path from "node:path";
import { packageBin } from "../src/config/package-info.js";

// launcher's CLI as the tests and benches run it.

/** The file the installed `launcher` command runs in the checkout at `root` (package.json "bin", as `npm run build` makes it). */
export const builtBin = (root = "."): string => path.resolve(root, packageBin(path.resolve(root)));

/** The CLI's entry beside it, which runs the CLI when it is the program (src/cli/main.ts): a bench runs another commit's build by it. */
export const builtMain = (root = "."): string => path.join(path.dirname(builtBin(root)), "main.js");

/** The CLI's sources: its entry that runs it when it is the program, and the one the installed command runs (which checks Node's version first). */
export const SOURCE_MAIN = path.resolve("src/cli/main.ts");
export const SOURCE_BIN = path.resolve("src/cli/bin.ts");

/** Node's arguments that run a source entry (SOURCE_MAIN unless told) through tsx, compiling it as it loads. */
export const sourceArgs = (entry = SOURCE_MAIN): string[] => ["--import", import.meta.resolve("tsx"), entry];

/**
 * Node's arguments that run the CLI: the build when LAUNCHER_USE_DIST=1 (`npm test` and `npm run
 * test:rig` build first and set it: the build is what users run, and it starts without compiling
 * TypeScript), else the sources through tsx, so a test file run alone tests the tree as it is now.
 */
export const cliArgs = (): string[] => (process.env.LAUNCHER_USE_DIST === "1" ? [builtMain()] : sourceArgs());
