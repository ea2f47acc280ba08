import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseCluster } from "../cluster/parse.js";
import { isClusterName, namedClusterFile, type ConfigDirs } from "../cluster/locate.js";
import { hasErrors } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";

/** The named clusters of the config folder (clusters/NAME.toml), sorted by name. */
export function namedClusters(dirs: ConfigDirs): { name: string; file: string }[] {
  if (!existsSync(dirs.clusters)) return [];
  return readdirSync(dirs.clusters)
    .filter((f) => f.endsWith(".toml") && isClusterName(f.slice(0, -".toml".length)))
    .map((f) => ({ name: f.slice(0, -".toml".length), file: path.join(dirs.clusters, f) }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

export function checkClusterName(name: string, flag: string): string {
  if (!isClusterName(name)) throw new UserError(`${flag} ${JSON.stringify(name)} is not a cluster name`, "letters, digits, _ and -, starting with a letter or digit (it becomes a file name)");
  return name;
}

/** Makes NAME the default cluster (the one read when neither --cluster, $LAUNCHER_CLUSTER nor ./cluster.toml says otherwise). */
export function useCluster(dirs: ConfigDirs, name: string): string {
  const file = namedClusterFile(dirs, checkClusterName(name, "cluster name"));
  if (!existsSync(file)) {
    const known = namedClusters(dirs).map((c) => c.name);
    throw new UserError(`no cluster named ${name} (${file})`, known.length === 0 ? "`launcher cluster init HOST...` writes one" : `the named clusters are ${known.join(", ")}`);
  }
  mkdirSync(dirs.root, { recursive: true });
  writeFileSync(dirs.defaultFile, `${name}\n`);
  return file;
}

/**
 * Writes a cluster file that `cluster init` rendered: never over an existing file without `force`
 * (the `wx` flag makes the check and the creation one step), and never a file launcher would refuse.
 */
export function writeClusterFile(file: string, text: string, force: boolean): void {
  const parsed = parseCluster(file, text);
  if (hasErrors(parsed.diagnostics)) throw new Error(`cluster init rendered a cluster file that does not parse: ${parsed.diagnostics.map((d) => d.message).join("; ")}`);
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  try {
    writeFileSync(file, text, { flag: force ? "w" : "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") throw refuseOverwrite(file);
    throw new UserError(`cannot write ${file}: ${(e as Error).message}`);
  }
}

export const refuseOverwrite = (file: string): UserError => new UserError(`${file} exists; nothing was written`, "pass --force to replace it, or --name/--file to write another");

/** A cluster file's text, for `cluster show`. */
export const clusterText = (file: string): string => readTextFile(file, "cluster file");
