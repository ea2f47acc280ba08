/**
 * huggingface_hub's cache layout, which `models pull` leaves and `models sync` copies:
 * HF_HOME/hub/models--ORG--NAME/snapshots/COMMIT/PATH (constants.py HF_HUB_CACHE = HF_HOME/hub;
 * file_download.py repo_folder_name joins "models" and the repo id's parts with "--", and
 * hf_hub_download puts each file at snapshots/{commit_hash}/{relative_filename}).
 */

/** The repo's folder under hub/: models--ORG--NAME. */
export const hubRepoFolder = (repo: string): string => `models--${repo.split("/").join("--")}`;

/** Where a file of a repo's snapshot is, under an HF_HOME (a host path, or a container's). */
export const snapshotFilePath = (hfHome: string, repo: string, commit: string, file: string): string =>
  `${hfHome.replace(/\/+$/, "")}/hub/${hubRepoFolder(repo)}/snapshots/${commit}/${file}`;

/**
 * A Hub repo id as huggingface_hub's validate_repo_id accepts it (utils/_validators.py
 * REPO_ID_REGEX `^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$`): each part starts and ends with a word
 * character, so never with a dash that a CLI would read as a flag, nor a `.` or `..` path part.
 */
export const HUB_REPO_ID = /^(?:\w(?:[\w.-]*\w)?\/)?\w(?:[\w.-]{0,94}\w)?$/;

/**
 * A file of a Hub repo as a path in its snapshot: one rule wherever launcher takes such a name (a
 * recipe's `gguf`, the words of a download's command line, the names a node lists under
 * snapshots/REV/), since it becomes a path on the nodes and in the container, and a word after the
 * repo id on the downloader's command line. Refused, in this order: what each rule says.
 */
const REPO_FILE_RULES: readonly (readonly [(p: string) => boolean, string])[] = [
  [(p) => p === "", "an empty name"],
  [(p) => p.length > 1024, "a name over 1024 characters"],
  [(p) => /[\x00-\x1f\x7f]/.test(p), "a control character (a newline?) in the name"],
  [(p) => p.includes("\\"), "a backslash in the name"],
  [(p) => p.startsWith("/"), "an absolute path"],
  [(p) => p.startsWith("-"), "a leading -, which a command reads as a flag"],
  [(p) => p.split("/").some((s) => s === "" || s === "." || s === ".."), "a `.`, `..` or empty part, which would leave the snapshot"],
];

/** Why `path` is no file of a repo's snapshot, or undefined. */
export const repoFileProblem = (path: string): string | undefined => REPO_FILE_RULES.find(([bad]) => bad(path))?.[1];

/**
 * The same rule (but the length) as a pattern, for a JSON Schema, which has no functions: no
 * leading / or -, no `.`, `..` or empty part, no control character or backslash.
 * test/unit/llamacpp-gguf.test.ts checks that it agrees with repoFileProblem.
 */
export const REPO_FILE_PATTERN = String.raw`(?![/-])(?!.*(?:^|\/)\.{0,2}(?:\/|$))[^\x00-\x1f\x7f\\]+`;

/**
 * The longest GGUF path a recipe may name: every part of a split file is a word of the download's
 * command line, which reaches the node as one argument of sh -c, at most 128 KiB (Linux
 * MAX_ARG_STRLEN, include/uapi/linux/binfmts.h): 128 parts (MAX_SPLIT_PARTS) of this many stay under.
 */
export const GGUF_PATH_MAX_CHARS = 512;
