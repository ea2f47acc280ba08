import path from "node:path";
import { packageBin } from "../src/config/package-info.js";

// The built `launcher` of a checkout at `root` (`npm run build`), by its package.json "bin", so a
// bench can run another commit's build beside this one whichever folder that build used.

/** The file the installed `launcher` command runs. */
export const builtBin = (root = "."): string => path.resolve(root, packageBin(path.resolve(root)));

/** The CLI's entry beside it, which runs the CLI when it is the program (src/cli/main.ts). */
export const builtMain = (root = "."): string => path.join(path.dirname(builtBin(root)), "main.js");
