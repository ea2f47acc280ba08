import type { ImageContract } from "../image-contract.js";
import { SGLANG_PARSER_COMMAND } from "./parser-dump.js";

/**
 * SGLang's version as its package says it (python/sglang/version.py __version__, imported as
 * sglang.__version__). launcher replaces the image's ENTRYPOINT with its own launch program
 * (./command.ts), so the image needs only python3 with sglang installed.
 */
const VERSION_LINE = /^(\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[\w.]+)?)$/;

function parseVersion(output: string): string | null {
  const lines = output.split(/\r?\n/).map((l) => l.trim()).filter((l) => VERSION_LINE.test(l));
  return lines[lines.length - 1] ?? null;
}

export const sglangImage: ImageContract = {
  versionCommand: ["python3", "-c", "import sglang; print(sglang.__version__)"],
  // The image's own argument parser (./parser-dump.ts): what judges a recipe's args at up's preflight.
  parserCommand: SGLANG_PARSER_COMMAND,
  parseVersion,
  problems: () => [],
};
