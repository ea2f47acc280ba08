import path from "node:path";
import { packageBin } from "../src/config/package-info.js";

// launcher's CLI as the tests and benches run it.

/** The file the installed `launcher` command runs in the checkout at `root` (package.json "bin", as `npm run build` makes it). */
export const builtBin = (root = "."): string => path.resolve(root, packageBin(path.resolve(root)));

/** The CLI's entry beside it, which runs the CLI when it is the program (src/cli/main.ts): a bench runs another commit's build by it. */
export const builtMain = (root = "."): string => path.join(path.dirname(builtBin(root)), "main.js");

/** The CLI's sources. */
export const SOURCE_MAIN = path.resolve("src/cli/main.ts");

/**
 * Node's arguments that run the CLI: the build when LAUNCHER_USE_DIST=1 (`npm test` and `npm run
 * test:rig` build first and set it: the build is what users run, and it starts without compiling
 * TypeScript), else the sources through tsx, so a test file run alone tests the tree as it is now.
 */
export const cliArgs = (): string[] => (process.env.LAUNCHER_USE_DIST === "1" ? [builtMain()] : ["--import", import.meta.resolve("tsx"), SOURCE_MAIN]);
