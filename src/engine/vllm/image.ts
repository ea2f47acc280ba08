import type { ImageContract, ImageFacts, ImageUse } from "../image-contract.js";
import { VLLM_PARSER_COMMAND } from "./parser-dump.js";
import { rayImageProbes } from "./ray.js";

/**
 * The ENTRYPOINT launcher's mp command needs: the container command is the model and its flags
 * (src/engine/vllm/command.ts), which only `vllm serve` takes as they are. The vllm/vllm-openai
 * image bakes it (vllm-project/vllm docker/Dockerfile, stage vllm-openai: ENTRYPOINT ["vllm",
 * "serve"]); older images ran `python3 -m vllm.entrypoints.openai.api_server` (the same file in
 * earlier commits), which knows no --headless and so cannot run a worker rank.
 */
export const SERVE_ENTRYPOINT = ["vllm", "serve"] as const;

/**
 * The first release whose `vllm serve` parses --nnodes/-n, --node-rank/-r, --master-addr and
 * --master-port (vllm/engine/arg_utils.py, parallel_group.add_argument("--nnodes", "-n", ...);
 * added by vllm-project/vllm PR #23691 "[V1] Support MP Executor for multi node distributed
 * inference", merged after v0.11.0 and released in mid-November 2025 with v0.11.1: users of the
 * 0.11.1 containers met its multi-node MP behaviour at once, NVIDIA-NeMo/Skills issue #1059). Its
 * release candidates 0.11.1rc0 to rc7 were cut before it and lack --nnodes (issue 28).
 * launcher passes them on every mp rank, one node included: an older vLLM stops at "unrecognized
 * arguments".
 */
export const MULTINODE_MIN_VERSION = "0.11.1";

/**
 * `vllm --version` prints importlib.metadata.version("vllm") through argparse's version action
 * (vllm/entrypoints/cli/main.py: parser.add_argument("-v", "--version", action="version", ...)),
 * i.e. the dist-info METADATA "Version:" of the installed package (docker/stamp_vllm_version.py
 * rewrites exactly that line). Log lines may come before it on stdout: the last line that is a
 * PEP 440 version counts. No leading "v": that is not how Python packages print theirs.
 */
const VERSION_LINE = /^(\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[\w.]+)?)$/;

function parseVersion(output: string): string | null {
  const lines = output.split(/\r?\n/).map((l) => l.trim()).filter((l) => VERSION_LINE.test(l));
  return lines[lines.length - 1] ?? null;
}

const release = (version: string): number[] => (/^\d+(?:\.\d+)*/.exec(version)?.[0] ?? "").split(".").map(Number);

/** PEP 440 pre-release segments (a, b, rc) come before their release: 0.11.1rc7 < 0.11.1. */
const PRE_RELEASE = /^\d+(?:\.\d+)*(?:a|b|rc)\d+/;

/**
 * Whether `version` is older than `min`, by release numbers, with PEP 440's order for a
 * pre-release: an alpha, beta or release candidate of the minimum release is older than it (the
 * 0.11.1 candidates lack what 0.11.1 brought). A dev build of the minimum release counts as that
 * release: nightly images are built from main, and main had the feature before the release.
 * setuptools-scm names a checkout without tags 0.1.devN (its fallback version): that says nothing
 * of the code, so it is never called older.
 */
export function olderThan(version: string, min: string): boolean {
  if (/^0\.1\.dev\d+/.test(version)) return false;
  const a = release(version);
  const b = release(min);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d < 0;
  }
  return PRE_RELEASE.test(version) && !PRE_RELEASE.test(min);
}

const isServe = (entrypoint: readonly string[] | null): boolean =>
  entrypoint !== null && entrypoint.length === 2 && entrypoint[0]?.split("/").pop() === SERVE_ENTRYPOINT[0] && entrypoint[1] === SERVE_ENTRYPOINT[1];

function problems(image: string, facts: ImageFacts, use: ImageUse): string[] {
  const found: string[] = [];
  const version = facts.version === null ? "vLLM version unknown" : `vLLM ${facts.version}`;
  // The Ray backend's ranks run `ray` and `bash` with their own entrypoint (command.ts).
  if (use.backend === "mp" && use.entrypoint === undefined && !isServe(facts.entrypoint)) {
    const has = facts.entrypoint === null ? "no ENTRYPOINT" : `ENTRYPOINT ${JSON.stringify(facts.entrypoint)}`;
    found.push(
      `image ${image} (${version}) has ${has}, not vllm serve: launcher's container command is the model and its flags, which only \`vllm serve\` takes (the older python3 -m vllm.entrypoints.openai.api_server has no --headless); set entrypoint = ["vllm", "serve"] in the recipe, or use an image built with ENTRYPOINT ["vllm", "serve"]`,
    );
  }
  // The image's own parser says it best: --nnodes is there or not, whatever the version string.
  if (use.backend === "mp" && facts.parser !== undefined && !facts.parser.actions.some((a) => a.option_strings.includes("--nnodes"))) {
    found.push(
      `image ${image} has ${version}, whose vllm serve has no --nnodes (its own parser says so), nor so --node-rank and --master-addr, which launcher passes on every rank: use an image with vLLM ${MULTINODE_MIN_VERSION} or later`,
    );
  } else if (use.backend === "mp" && facts.parser === undefined && facts.version !== null && olderThan(facts.version, MULTINODE_MIN_VERSION)) {
    found.push(
      `image ${image} has vLLM ${facts.version}, older than ${MULTINODE_MIN_VERSION}, the first whose vllm serve takes --nnodes, --node-rank and --master-addr (launcher passes them on every rank): use an image with vLLM ${MULTINODE_MIN_VERSION} or later`,
    );
  }
  return found;
}

// The Ray backend's image needs Ray's own command (./ray.ts).
export const vllmImage: ImageContract = { versionCommand: ["vllm", "--version"], parserCommand: VLLM_PARSER_COMMAND, parseVersion, problems, probes: rayImageProbes };
