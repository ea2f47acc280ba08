import { existsSync } from "node:fs";
import path from "node:path";
import type { Cluster } from "../cluster/cluster.js";
import { parseCluster } from "../cluster/parse.js";
import { formatDiagnostic, hasErrors, sortDiagnostics, type Diagnostic } from "../config/diagnostic.js";
import type { ArgsJudge } from "../nodes/image-check.js";
import { fileRecipeSource, type FoundHere } from "../recipe/fs-source.js";
import type { Recipe } from "../recipe/recipe.js";
import { resolveRecipe, type RecipeSource, type ResolveOptions, type Resolved } from "../recipe/resolve.js";
import { recordingSource, type RecipeLookup } from "../recipe/uploaded-source.js";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { consoleOutput } from "./output.js";
import { PACKAGE_ROOT } from "../config/package-info.js";
import { chooseCluster, configDirs, foundInCurrentFolder, sshFileProblem, type ClusterChoice, type ConfigDirs, type SkippedFile } from "../cluster/locate.js";
import { FOUND_FILE_RULE, FOUND_RECIPE_RULE, foundFileTrust, foundRecipeTrust } from "../config/private-dir.js";

// Where recipes, clusters and image folders are for given places, and reading them. The daemon and
// `up` call these with the places of the Environment they were handed (./environment.ts); the
// CLI's other commands call ./this-process.ts, which gives them this process's. Apart from
// environment.ts, which opens the store too, so that commands that only read files (validate)
// load neither the store nor better-sqlite3.

/**
 * Where files are looked for: the environment's variables (LAUNCHER_RECIPES, LAUNCHER_CLUSTER,
 * XDG_CONFIG_HOME, ...) and the home folder; relative paths are the current folder's. Every reader
 * here is given one: the daemon and `up` the places of the Environment they were handed
 * (./environment.ts), the CLI's other commands this process's (./this-process.ts).
 */
export interface Places {
  readonly vars: Readonly<Record<string, string | undefined>>;
  readonly home: string;
}

export function recipeDirs(places: Places): string[] {
  const fromEnv = places.vars.LAUNCHER_RECIPES;
  const dirs = fromEnv ? fromEnv.split(":").filter(Boolean) : [];
  return [...dirs, path.resolve("recipes"), path.join(PACKAGE_ROOT, "recipes")];
}

/**
 * The folders whose recipes launcher finds by a bare name without being told (the current folder
 * and ./recipes): whoever controls the current folder chooses what is there, so a recipe found in
 * them is read only when trusted (src/recipe/fs-source.ts FoundHere). Each passed-over file is
 * said once per process on `warn`.
 */
export function foundRecipes(warn: (line: string) => void = consoleOutput.warn): FoundHere {
  return {
    // Launcher's own folder is not judged: whoever may write there may write launcher's code.
    dirs: [process.cwd(), path.resolve("recipes")].filter((d) => d !== PACKAGE_ROOT && d !== path.join(PACKAGE_ROOT, "recipes")),
    trust: foundRecipeTrust,
    skipped: (file, problem) => {
      const line = `${file} is not read: ${problem}; ${FOUND_RECIPE_RULE}`;
      if (!warned.has(line)) warn(line);
      warned.add(line);
    },
  };
}

/** Where image folders live: docker-images/ beside each recipes/ folder, and $LAUNCHER_DOCKER_IMAGES. */
export function imageRoots(places: Places): string[] {
  const fromEnv = places.vars.LAUNCHER_DOCKER_IMAGES;
  return [...(fromEnv ? fromEnv.split(":").filter(Boolean) : []), ...recipeDirs(places).map((d) => path.join(path.dirname(d), "docker-images"))];
}

/** The recipe folders of this machine, as a source. */
export const localRecipes = (places: Places, warn: (line: string) => void): RecipeSource => fileRecipeSource(recipeDirs(places), foundRecipes(warn));

export function resolveRecipeRef(ref: string, source: RecipeSource, gpusPerNode?: number, checks: Pick<ResolveOptions, "imageFolders" | "flagsFor"> = {}): Resolved {
  return resolveRecipe(ref, source, { ...checks, ...(gpusPerNode === undefined ? {} : { gpusPerNode }) });
}

/**
 * The recipe files `ref` resolves to on this machine (itself and its `extends` parents), as a
 * daemon elsewhere is sent them; none when this machine has no such recipe (the daemon may).
 */
export function localRecipeLookups(ref: string, places: Places, warn: (line: string) => void): RecipeLookup[] {
  const { source, lookups } = recordingSource(localRecipes(places, warn));
  resolveRecipe(ref, source);
  return lookups;
}

/** Loads a recipe from `source` or throws a UserError carrying every diagnostic; warnings go to `warn`. */
export function loadRecipe(ref: string, source: RecipeSource, warn: (d: readonly Diagnostic[]) => void, gpusPerNode?: number): Recipe {
  const resolved = resolveRecipeRef(ref, source, gpusPerNode);
  if (resolved.recipe === undefined || hasErrors(resolved.diagnostics)) {
    throw new UserError(`recipe ${ref} has errors`, "fix the errors above; `launcher validate` lists them", resolved.diagnostics);
  }
  warn(resolved.diagnostics);
  return resolved.recipe;
}

/** The config folder of this user ($XDG_CONFIG_HOME/launcher, default ~/.config/launcher). */
export const userConfigDirs = (places: Places): ConfigDirs => configDirs(places.vars, places.home);

/** The default cluster's name, as `cluster use` wrote it; undefined when none was chosen. */
export function defaultClusterName(dirs: ConfigDirs): string | undefined {
  if (!existsSync(dirs.defaultFile)) return undefined;
  return readTextFile(dirs.defaultFile, "default cluster name").trim() || undefined;
}

/** The warning for a file of the current folder that was passed over: said once per process, however often the cluster is looked up. */
export const skippedFileWarning = (s: SkippedFile): string => `./${s.file} is not read: it ${s.problem}; ${FOUND_FILE_RULE}`;
const warned = new Set<string>();

/**
 * Which cluster file a command reads (src/cluster/locate.ts has the order): `--cluster PATH|NAME`,
 * $LAUNCHER_CLUSTER (empty counts as unset), ./cluster.toml, then the default cluster. A file of
 * the current folder that fails the trust check is passed over with a warning on `warn`.
 */
export function findCluster(option: string | undefined, places: Places, warn: (line: string) => void = consoleOutput.warn): ClusterChoice {
  const dirs = userConfigDirs(places);
  const env = places.vars.LAUNCHER_CLUSTER || undefined;
  const defaultName = defaultClusterName(dirs);
  const choice = chooseCluster({ dirs, ...(option === undefined ? {} : { option }), ...(env === undefined ? {} : { env }), ...(defaultName === undefined ? {} : { defaultName }), exists: existsSync, trust: foundFileTrust });
  for (const s of choice.skipped ?? []) {
    const line = skippedFileWarning(s);
    if (!warned.has(line)) warn(line);
    warned.add(line);
  }
  return choice;
}

export function clusterPath(option: string | undefined, places: Places): string {
  const choice = findCluster(option, places);
  if (!choice.found) throw new UserError(choice.message, choice.hint);
  if (foundInCurrentFolder(choice)) checkFoundSshFiles(choice.file);
  return choice.file;
}

/**
 * A cluster file found in the current folder is refused when a file its [ssh] names fails the
 * same rule (src/cluster/locate.ts sshFileProblem); one with errors is left for its reader to report.
 */
function checkFoundSshFiles(file: string): void {
  const parsed = parseCluster(file, readTextFile(file, "cluster file"));
  if (parsed.cluster === undefined) return;
  // Missing is ssh's to report; present and untrusted is refused.
  const bad = sshFileProblem(parsed.cluster.ssh, (f) => (existsSync(f) ? foundFileTrust(f) : undefined));
  if (bad !== undefined) {
    throw new UserError(
      `./${file} is not used: the file its [ssh] ${bad.key} names, ${bad.file}, ${bad.problem}`,
      `${FOUND_FILE_RULE}, and so are the files it names under [ssh]; fix the owner or mode, or pass --cluster with the path if you trust them`,
    );
  }
}

/** The cluster file to read when one is given or found, else undefined (for commands that can do without). */
export function optionalClusterPath(option: string | undefined, places: Places): string | undefined {
  const choice = findCluster(option, places);
  // Nothing anywhere is fine here; a cluster named but missing is still an error.
  if (!choice.found && choice.source === undefined) return undefined;
  return clusterPath(option, places);
}

export function loadCluster(option: string | undefined, places: Places): Cluster {
  return clusterOf(readClusterFile(option, places));
}

/** The cluster file a command names (or finds), as it is on this machine: its name here and its text. */
export function readClusterFile(option: string | undefined, places: Places): { file: string; text: string } {
  const file = clusterPath(option, places);
  return { file, text: readTextFile(file, "cluster file") };
}

/** A cluster file's text, parsed; its errors name `file` (where the text came from, maybe another machine). */
export function clusterOf(f: { readonly file: string; readonly text: string }): Cluster {
  const parsed = parseCluster(f.file, f.text);
  if (parsed.cluster === undefined) throw new UserError(`cluster file ${f.file} has errors`, undefined, parsed.diagnostics);
  return parsed.cluster;
}

/** GPUs per node, from the head: the parallel-size check assumes nodes alike, as Sparks are. */
export function gpusPerNode(cluster: Cluster): number {
  return cluster.nodes[0]?.gpus ?? 1;
}

/**
 * The recipe's args judged again by a flag table (the image's own parser, read in up's preflight):
 * its errors as `file:line:col: message (hint)`, from the very files `ref` was planned from.
 */
export function argsJudge(ref: string, source: RecipeSource, gpusPerNode: number): ArgsJudge {
  return (flags) => {
    const resolved = resolveRecipeRef(ref, source, gpusPerNode, { flagsFor: () => flags });
    return sortDiagnostics(resolved.diagnostics.filter((d) => d.severity === "error")).map((d) => formatDiagnostic(d).replace("\n  hint: ", "; "));
  };
}
