import type { ClusterNode } from "../cluster/cluster.js";
import { RemoteError } from "../config/errors.js";
import { hubRepoFolder, repoFileProblem } from "../engine/hf-snapshot.js";
import { adapterOf } from "../engine/registry.js";
import { findAnyFlag, flagsOfWords } from "../recipe/args.js";
import type { Recipe } from "../recipe/recipe.js";
import { expandHome } from "./plan.js";

/** Where a node keeps the recipe's model: its HF hub folder, the repo folder, the revision wanted. */
export interface WeightsLocation {
  readonly hub: string;
  readonly repo: string;
  /** A pinned `--revision` of the recipe, else undefined: whatever refs/main names. */
  readonly revision?: string;
  /** The snapshot's files the engine reads, when the recipe names them (adapter.weightFiles); undefined: all of them. */
  readonly files?: readonly string[];
  readonly offline: boolean;
}

/**
 * The hub is the host side of the mount whose env is HF_HOME (plus /hub), else
 * ~/.cache/huggingface/hub of the node's user. Undefined when `~` cannot be expanded.
 */
export function weightsLocation(recipe: Recipe, node: ClusterNode): WeightsLocation | undefined {
  const mount = recipe.extra_mounts.find((m) => m.env === "HF_HOME");
  const home = expandHome(mount?.host ?? "~/.cache/huggingface", node);
  if (home === undefined) return undefined;
  const adapter = adapterOf(recipe.engine);
  const named = adapter?.weightFiles?.(recipe);
  const revision = named?.revision ?? findAnyFlag(flagsOfWords(recipe.args), adapter?.modelFlags.revision ?? [])?.value;
  return {
    hub: `${home.replace(/\/+$/, "")}/hub`,
    repo: hubRepoFolder(recipe.model),
    ...(revision === undefined ? {} : { revision }),
    ...(named === undefined ? {} : { files: named.files }),
    offline: recipe.env.HF_HUB_OFFLINE === "1" || recipe.env.HF_HUB_OFFLINE === "true",
  };
}

/**
 * A revision, as a recipe pins it and as refs/* hold it: a commit (40 hex, huggingface_hub
 * file_download.py REGEX_COMMIT_HASH) or a plain branch or tag name: parts of letters, digits,
 * `_`, `.` and `-` between single `/`, none starting with `.` or `-`, no `..`. It becomes a path
 * (snapshots/REV) and a command-line word, so nothing else passes.
 */
const REVISION = /^(?:[0-9a-f]{40}|[A-Za-z0-9_][A-Za-z0-9_.-]*(?:\/[A-Za-z0-9_][A-Za-z0-9_.-]*)*)$/;

/** Why `value` is no revision, or undefined when it is one. */
export function revisionProblem(value: string): string | undefined {
  if (value === "") return "it is empty";
  if (value.length > 200) return "it is over 200 characters";
  if (!REVISION.test(value) || value.includes("..")) return "it is neither a 40-hex commit nor a plain branch or tag name";
  return undefined;
}


/** Whether only the head reads the recipe's model files (EngineAdapter.weightsReadBy). */
export const headReadsWeights = (recipe: Pick<Recipe, "engine">): boolean => adapterOf(recipe.engine)?.weightsReadBy === "head";

/** Of a deployment's nodes in rank order (head first), those that read the model's files: all, or the head alone. */
export function weightReaders<T>(recipe: Pick<Recipe, "engine">, nodes: readonly T[]): readonly T[] {
  return headReadsWeights(recipe) ? nodes.slice(0, 1) : nodes;
}

/** Why a file name a node listed under snapshots/REV/ is refused, or undefined: the one rule of a repo's file (repoFileProblem). */
export const namePathProblem = repoFileProblem;

/**
 * A blob's name: its ETag, which is the file's SHA-256 for an LFS file and its git blob SHA-1 for
 * one stored in git (huggingface_hub file_download.py, hf_hub_url's notes, at 003956d3e85b).
 */
const BLOB_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * The blob a snapshot file at `path` links to, or why the link is refused. huggingface_hub links
 * each file to its blob by the relative path from the link's folder (os.path.relpath, as
 * are_symlinks_supported says _create_symlink does): `../` once per folder of `path`, twice more
 * for snapshots/REV, then blobs/NAME. Anything else could point outside the repo.
 */
export function linkedBlob(path: string, link: string): { blob: string } | { problem: string } {
  const ups = "../".repeat(path.split("/").length + 1);
  const name = link.startsWith(`${ups}blobs/`) ? link.slice(ups.length + "blobs/".length) : undefined;
  if (name === undefined || !BLOB_NAME.test(name)) return { problem: `it links to ${shown(link)}, not to a blob of this repo (${ups}blobs/HASH)` };
  return { blob: name };
}

/** A blob's name is its SHA-256 when it is 64 hex digits (LFS files), which lets a copy be checked. */
export const blobSha256 = (name: string): string | undefined => (/^[0-9a-f]{64}$/.test(name) ? name : undefined);

/** Text from a node, quoted and bounded for a message. */
const shown = (s: string): string => JSON.stringify(s.length > 120 ? `${s.slice(0, 120)}...` : s);

/** One file of a snapshot as a node holds it: a link to a blob (the usual case) or a plain file. */
export interface SnapshotFile {
  readonly path: string;
  /** The blob's size for a link (-1: the blob is absent), the file's for a plain file. */
  readonly size: number;
  /** The blob a link points to (its name under blobs/); undefined for a plain file. */
  readonly blob?: string;
  /** The link as written (../../blobs/NAME). */
  readonly link?: string;
}

/** What a node holds of a repo: why it lacks the snapshot, or the snapshot's files. */
export type Inspection =
  | { readonly kind: "missing"; readonly reason: string }
  | { readonly kind: "snapshot"; readonly revision: string; readonly files: readonly SnapshotFile[]; readonly ref?: { readonly name: string; readonly commit: string } };

const utf8 = (hex: string): string | undefined => {
  if (!/^(?:[0-9a-f]{2})*$/.test(hex)) return undefined;
  const bytes = Buffer.from(hex, "hex");
  const text = bytes.toString("utf8");
  return Buffer.from(text, "utf8").equals(bytes) ? text : undefined;
};

/**
 * The lines CACHE_PERL's `inspect` prints (src/transfer/hf-cache.ts) as an Inspection, every name
 * and link checked; anything a node could use to send sync outside the repo is a RemoteError naming
 * the node and the file (a ref file's content is never shown: it may be anything). `repoPath` is
 * the repo folder as messages name it, `pin` the recipe's revision ("" for refs/main).
 */
export function parseInspection(node: string, repoPath: string, pin: string, text: string): Inspection {
  const refused = (file: string, why: string): RemoteError =>
    new RemoteError(node, `${repoPath}/${file}: ${why}; launcher reads nothing further of this cache`, undefined, "something other than huggingface_hub wrote this cache (a container that mounts it read-write?): remove the repo folder there and download the model again");
  const lines = text.split("\n");
  let revision = pin;
  let ref: { name: string; commit: string } | undefined;
  const files: SnapshotFile[] = [];
  for (const line of lines) {
    const [word, a = "", b = "", c = ""] = line.split(" ");
    if (word === "missing") return { kind: "missing", reason: `${line.slice(8)}${line === "missing no snapshot" ? ` ${revision}` : ""}` };
    if (word === "ref") {
      const name = utf8(a) ?? "?";
      const value = (utf8(b) ?? "\0").replace(/\n$/, "");
      const problem = revisionProblem(value);
      if (problem !== undefined) throw refused(`refs/${name}`, `${problem} (${Buffer.from(b, "hex").length} bytes)`);
      revision = value;
      ref = { name, commit: value };
    } else if (word === "L" || word === "F" || word === "O") {
      const decoded = utf8(b);
      const path = decoded ?? "";
      const where = `snapshots/${revision}`;
      const pathProblem = decoded === undefined ? "a name that is not UTF-8" : namePathProblem(path);
      if (pathProblem !== undefined) throw refused(where, `lists ${shown(path)}: ${pathProblem}`);
      if (word === "O") throw refused(`${where}/${path}`, "neither a file nor a link");
      const size = Number(a);
      if (word === "F") files.push({ path, size });
      else {
        const link = utf8(c) ?? "";
        const linked = linkedBlob(path, link);
        if ("problem" in linked) throw refused(`${where}/${path}`, linked.problem);
        files.push({ path, size, blob: linked.blob, link });
      }
    } else if (word === "end") {
      if (revisionProblem(revision) !== undefined) throw refused("refs", `no snapshot for revision ${shown(revision)}`);
      return { kind: "snapshot", revision, files, ...(ref === undefined ? {} : { ref }) };
    }
  }
  throw new RemoteError(node, `the listing of ${repoPath} was cut short`, undefined, "run it again");
}

/**
 * Of a snapshot's files, those the engine reads (`wanted`, WeightsLocation.files; undefined: all),
 * and the wanted ones the snapshot lacks or whose blob is absent. Pure.
 */
export function wantedFiles(files: readonly SnapshotFile[], wanted: readonly string[] | undefined): { readonly files: readonly SnapshotFile[]; readonly missing: readonly string[] } {
  if (wanted === undefined) return { files, missing: [] };
  const want = new Set(wanted);
  const kept = files.filter((f) => want.has(f.path));
  const whole = new Set(kept.filter((f) => f.size >= 0).map((f) => f.path));
  return { files: kept, missing: wanted.filter((w) => !whole.has(w)) };
}

/** A snapshot's count, its bytes (each blob once, as on disk) and its links to absent blobs. */
export function snapshotTotals(files: readonly SnapshotFile[]): { files: number; bytes: number; broken: number } {
  const blobs = new Map<string, number>();
  let bytes = 0;
  for (const f of files) {
    if (f.blob === undefined) bytes += f.size;
    else if (f.size >= 0) blobs.set(f.blob, f.size);
  }
  for (const s of blobs.values()) bytes += s;
  const broken = files.filter((f) => f.size < 0).length;
  return { files: files.length - broken, bytes, broken };
}
