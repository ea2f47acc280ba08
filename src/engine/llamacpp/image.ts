import type { ImageContract, ImageFacts } from "../image-contract.js";
import { LLAMA_SERVER } from "./command.js";

/**
 * `llama-server --version` prints "version: BUILD (COMMIT)" and "built with COMPILER for TARGET"
 * (common/arg.cpp, the --version handler: fprintf(stderr, "version: %d (%s)\n", ...), then
 * exit(0)); the build number is what the project's releases are tagged by (b6123).
 */
const VERSION_LINE = /^version: (\d+) \(([0-9a-f]+)\)$/;

function parseVersion(output: string): string | null {
  for (const line of output.split(/\r?\n/)) {
    const m = VERSION_LINE.exec(line.trim());
    if (m !== null) return `b${m[1] as string} (${m[2] as string})`;
  }
  return null;
}

// launcher names each rank's program itself (./command.ts), so the image's ENTRYPOINT does not matter.
const problems = (_image: string, _facts: ImageFacts): string[] => [];

export const llamacppImage: ImageContract = { versionCommand: [LLAMA_SERVER, "--version"], parseVersion, problems };
