import * as z from "zod";

/**
 * What a `models pull` still has to write on a node: the Hub's file list of the revision, less the
 * blobs that node's cache already holds. Pure: the Hub's answer and the cache's listing come in as
 * text, the bytes go out.
 */

/** One file of the revision as the Hub lists it, with the name of its blob in the cache. */
export interface HubFile {
  readonly path: string;
  readonly size: number;
  /**
   * The blob's name under blobs/: the ETag huggingface_hub stores it under, which is the SHA-256 of
   * an LFS file (X-Linked-Etag) and the git blob id of any other (ETag).
   */
  readonly blob: string;
}

/**
 * The Hub's model info with per-file metadata, as huggingface_hub's `HfApi.model_info(...,
 * files_metadata=True)` asks it: GET {endpoint}/api/models/{repo_id}/revision/{quote(revision,
 * safe='')} with the query `blobs=True`, and reads each sibling's rfilename, size, blobId and
 * lfs {size, sha256, pointerSize} (huggingface_hub src/huggingface_hub/hf_api.py, model_info and
 * ModelInfo.__init__'s RepoSibling; the same in 2.0.0 and at f7c9b7dfd5e5). One request, not the
 * paginated tree listing (list_repo_tree follows Link headers page by page).
 */
const MODEL_INFO = z.object({
  sha: z.string().regex(/^[0-9a-f]{40}$/),
  siblings: z.array(
    z.object({
      rfilename: z.string(),
      size: z.number().int().nonnegative(),
      blobId: z.string().regex(/^[0-9a-f]+$/),
      lfs: z.object({ size: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) }).nullish(),
    }),
  ),
});

/** The answer's text: a proxy's or a server's HTML error page is no JSON, as much "not a model info" as a wrong shape. */
const MODEL_INFO_TEXT = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: "custom", message: "not JSON" });
      return z.NEVER;
    }
  })
  .pipe(MODEL_INFO);

/** The query of the model-info request (with blobs: each file's size and blob id). */
export const MODEL_INFO_QUERY = "blobs=true";

/** The model-info URL of a repo at a revision (huggingface_hub quotes the revision with safe=''). */
export const modelInfoUrl = (endpoint: string, repo: string, revision: string): string =>
  `${endpoint.replace(/\/+$/, "")}/api/models/${repo}/revision/${encodeURIComponent(revision)}?${MODEL_INFO_QUERY}`;

/** The commit and files of the Hub's answer; undefined when it is not a model info with file sizes. */
export function parseModelInfo(body: string): { commit: string; files: HubFile[] } | undefined {
  const info = MODEL_INFO_TEXT.safeParse(body);
  if (!info.success) return undefined;
  return {
    commit: info.data.sha,
    files: info.data.siblings.map((s) => (s.lfs ? { path: s.rfilename, size: s.lfs.size, blob: s.lfs.sha256 } : { path: s.rfilename, size: s.size, blob: s.blobId })),
  };
}

/** A file in a node's blobs/ folder and its size on disk. */
export interface BlobEntry {
  readonly name: string;
  readonly bytes: number;
}

/** `NAME SIZE` lines (find -printf '%f %s\n') as entries; other lines are skipped. */
export function parseBlobListing(out: string): BlobEntry[] {
  return out.split("\n").flatMap((line) => {
    const m = /^(\S+) (\d+)$/.exec(line.trim());
    return m === null ? [] : [{ name: m[1] as string, bytes: Number(m[2]) }];
  });
}

/**
 * The partial-file suffix a writer resumes from. huggingface_hub before PR #4228 appended to
 * BLOB.incomplete and resumed it with a Range request (file_download.py _download_to_tmp_and_move
 * at f7c9b7dfd5e5), and so does the practice image's stand-in `hf`; `models sync` appends to
 * BLOB.launcher-partial. huggingface_hub 1.33 and later write BLOB.<8 hex>.incomplete, unique to
 * the process, and never resume one: those are STALE_PARTIAL, litter once their writer is gone.
 */
export const RESUMED_PARTIAL = { download: ".incomplete", sync: ".launcher-partial" } as const;

/** huggingface_hub >= 1.33's per-process partial file: ETAG.<uuid4 hex[:8]>.incomplete (file_download.py). */
export const STALE_PARTIAL = /^[0-9a-f]+\.[0-9a-f]{8}\.incomplete$/;

export interface StillNeeded {
  /** Bytes the writer still has to put on the node. */
  readonly bytes: number;
  /** Blobs it has to write (wholly or in part). */
  readonly blobs: number;
  /** Bytes of partial blobs already there that it resumes from. */
  readonly resumed: number;
}

/**
 * What is still to be written for `files` into a cache whose blobs/ holds `onDisk`: each distinct
 * blob once (two paths with the same content share one), nothing for a blob already there (as
 * huggingface_hub, which skips a blob whose file exists), and for a blob with a partial file the
 * writer resumes (`partial` suffix) only the bytes after it. A partial longer than the blob is not
 * resumed (the writer starts it again).
 */
export function stillNeeded(files: readonly HubFile[], onDisk: readonly BlobEntry[], partial: string): StillNeeded {
  const have = new Map(onDisk.map((e) => [e.name, e.bytes]));
  const blobs = new Map(files.map((f) => [f.blob, f.size]));
  let bytes = 0;
  let count = 0;
  let resumed = 0;
  for (const [blob, size] of blobs) {
    if (have.has(blob)) continue;
    const part = have.get(`${blob}${partial}`) ?? 0;
    const kept = part <= size ? part : 0;
    bytes += size - kept;
    resumed += kept;
    count++;
  }
  return { bytes, blobs: count, resumed };
}
