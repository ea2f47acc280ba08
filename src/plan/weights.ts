import type { ClusterNode } from "../cluster/cluster.js";
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
  const revisionFlags = adapterOf(recipe.engine)?.modelFlags.revision ?? [];
  const revision = findAnyFlag(flagsOfWords(recipe.args), revisionFlags)?.value;
  return {
    hub: `${home.replace(/\/+$/, "")}/hub`,
    repo: `models--${recipe.model.split("/").join("--")}`,
    ...(revision === undefined ? {} : { revision }),
    offline: recipe.env.HF_HUB_OFFLINE === "1" || recipe.env.HF_HUB_OFFLINE === "true",
  };
}

/** One file of a snapshot as the source lists it: a link to a blob (the usual case) or a plain file. */
export interface SnapshotFile {
  readonly path: string;
  readonly size: number;
  /** The symlink's target as written (../../blobs/HASH); undefined for a plain file. */
  readonly link?: string;
}

/** `L SIZE LINK PATH` / `F SIZE - PATH` lines, as LIST_SNAPSHOT prints them. */
export function parseSnapshotListing(text: string): SnapshotFile[] {
  const out: SnapshotFile[] = [];
  for (const line of text.split("\n")) {
    const m = /^([LF]) (\d+) (\S+) (.+)$/.exec(line);
    if (!m) continue;
    const path = (m[4] as string).replace(/^\.\//, "");
    out.push(m[1] === "L" ? { path, size: Number(m[2]), link: m[3] as string } : { path, size: Number(m[2]) });
  }
  return out;
}

/** A blob's name is its SHA-256 when it is 64 hex digits (LFS files), which lets a copy be checked. */
export const blobSha256 = (link: string): string | undefined => {
  const name = link.split("/").pop() ?? "";
  return /^[0-9a-f]{64}$/.test(name) ? name : undefined;
};
