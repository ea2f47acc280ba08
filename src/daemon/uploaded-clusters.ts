import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { clientBaseName, clusterFileNameProblem } from "../app/up-submission.js";

/*
 * Cluster files a remote client uploaded with its `up` (UpSubmission.cluster_file), kept by the
 * daemon so that what it boots on them is routed and supervised like its own clusters: the
 * discovery watcher of a cluster (`launcher status --watch --cluster FILE`) reads a file, and a
 * daemon started again (kill -9, a reboot) watches them again and adopts their boots.
 *
 * Each is kept under its own folder (named by a hash of the cluster's name: any name, no escaping)
 * with the client's file name, so that a file that does not name its cluster gets the same name
 * here (the name defaults to the file's base name, src/cluster/parse.ts). A client's file sets no
 * [ssh] or [docker] (src/app/admit.ts refuses them): the kept file is the client's text with the
 * daemon's own two tables after it (src/app/admit.ts composeUploaded), so that the watcher of
 * discovery, which reads the file, reaches the nodes as the daemon does. What the daemon does with
 * them while it runs: ./watched-clusters.ts.
 */

/** The folder of uploaded cluster files under the daemon's state folder. */
export const uploadedClustersDir = (stateDir: string): string => path.join(stateDir, "uploaded-clusters");

const folderOf = (dir: string, name: string): string => path.join(dir, createHash("sha256").update(name).digest("hex").slice(0, 16));

/** How long an uploaded cluster with nothing deployed on it (and no boot) is still watched before it is forgotten. */
export const FORGET_UPLOADED_AFTER_MS = 10 * 60_000;

/** What the daemon does with a cluster file a client's `up` sent. */
export type UploadVerdict =
  | { readonly kind: "new" | "same" | "replace" }
  | { readonly kind: "refuse"; readonly message: string };

/**
 * A client's file named as one of the daemon's own clusters (--cluster) is refused: it would
 * otherwise be taken for the daemon's own, or replace it. A kept one
 * whose text changed (a node added, an address fixed) replaces the watched one, unless a boot on
 * it runs: that boot's supervision and rollback act on the old node list, so it is refused.
 */
export function uploadVerdict(name: string, o: { readonly own: boolean; readonly keptText: string | undefined; readonly text: string; readonly bootRunning: boolean }): UploadVerdict {
  if (o.own) return { kind: "refuse", message: `cluster ${name} is one of this daemon's own clusters: a client's cluster file never stands for it; give the file another name (name = "...")` };
  if (o.keptText === undefined) return { kind: "new" };
  if (o.keptText === o.text) return { kind: "same" };
  if (!o.bootRunning) return { kind: "replace" };
  return { kind: "refuse", message: `cluster ${name} changed since this daemon last received it, and a boot on it runs: wait for it to end (launcher attach / launcher status), or launcher down it, then up again` };
}

/** The text kept for cluster `name` (undefined: none kept). */
export function keptUploadedText(dir: string, name: string): string | undefined {
  try {
    const folder = folderOf(dir, name);
    const [file] = readdirSync(folder).filter((n) => n.endsWith(".toml"));
    return file === undefined ? undefined : readFileSync(path.join(folder, file), "utf8");
  } catch {
    return undefined;
  }
}

/** Drops the kept file of cluster `name`: a daemon started again no longer watches it. */
export function forgetUploadedCluster(dir: string, name: string): void {
  rmSync(folderOf(dir, name), { recursive: true, force: true });
}

/**
 * The uploaded clusters to forget now: those with no deployment seen and no boot running for
 * FORGET_UPLOADED_AFTER_MS. `busySince` (name -> last time seen busy, or when first watched) is updated.
 */
export function idleUploaded(busySince: Map<string, number>, busy: ReadonlySet<string>, now: number): string[] {
  const idle: string[] = [];
  for (const [name, at] of busySince) {
    if (busy.has(name)) busySince.set(name, now);
    else if (now - at >= FORGET_UPLOADED_AFTER_MS) idle.push(name);
  }
  return idle;
}

/**
 * The name a client's file is kept under: its base name, ending in .toml (which keptUploadedClusters
 * looks for; basename(kept, ".toml") is then still the cluster's default name). A name the
 * submission's decoder would have refused (src/app/up-submission.ts clusterFileNameProblem) becomes one named by
 * the cluster, so that keeping never fails on a name, nor leaves the cluster's folder.
 */
export function keptFileName(file: string, cluster: string): string {
  const base = clientBaseName(file);
  if (clusterFileNameProblem(file) !== undefined) return `${createHash("sha256").update(cluster).digest("hex").slice(0, 16)}.toml`;
  return base.endsWith(".toml") ? base : `${base}.toml`;
}

/** Writes the client's cluster file (mode 600: it names hosts and users) for the cluster `name`; returns where. */
export function keepUploadedCluster(dir: string, name: string, file: { readonly file: string; readonly text: string }): string {
  const folder = folderOf(dir, name);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const kept = path.join(folder, keptFileName(file.file, name));
  // One file per cluster: an earlier upload of it under another file name goes.
  for (const old of readdirSync(folder)) if (path.join(folder, old) !== kept) rmSync(path.join(folder, old), { force: true });
  writeFileSync(kept, file.text, { mode: 0o600 });
  return kept;
}

/** Every uploaded cluster file kept in `dir` (none when it does not exist). */
export function keptUploadedClusters(dir: string): string[] {
  let folders: string[];
  try {
    folders = readdirSync(dir);
  } catch {
    return [];
  }
  return folders.flatMap((f) => {
    try {
      return readdirSync(path.join(dir, f))
        .filter((n) => n.endsWith(".toml"))
        .map((n) => path.join(dir, f, n));
    } catch {
      return [];
    }
  });
}
