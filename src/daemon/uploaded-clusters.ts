import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/*
 * Cluster files a remote client uploaded with its `up` (UpSubmission.cluster_file), kept by the
 * daemon so that what it boots on them is routed and supervised like its own clusters: the
 * discovery watcher of a cluster (`launcher status --watch --cluster FILE`) reads a file, and a
 * daemon started again (kill -9, a reboot) watches them again and adopts their boots.
 *
 * Each is kept under its own folder (named by a hash of the cluster's name: any name, no escaping)
 * with the client's file name, so that a file that does not name its cluster gets the same name
 * here (the name defaults to the file's base name, src/cluster/parse.ts). Paths the file gives
 * relative to itself (ssh.config, known_hosts, identity) resolve in that folder, not the client's.
 */

/** The folder of uploaded cluster files under the daemon's state folder. */
export const uploadedClustersDir = (stateDir: string): string => path.join(stateDir, "uploaded-clusters");

/** Writes the client's cluster file (mode 600: it names hosts and users) for the cluster `name`; returns where. */
export function keepUploadedCluster(dir: string, name: string, file: { readonly file: string; readonly text: string }): string {
  const folder = path.join(dir, createHash("sha256").update(name).digest("hex").slice(0, 16));
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const kept = path.join(folder, path.basename(file.file) || "cluster.toml");
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
