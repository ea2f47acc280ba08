import { homedir } from "node:os";
import type { Cluster } from "../cluster/cluster.js";
import type { ClusterChoice, ConfigDirs } from "../cluster/locate.js";
import type { Diagnostic } from "../config/diagnostic.js";
import type { Recipe } from "../recipe/recipe.js";
import type { RecipeSource, ResolveOptions, Resolved } from "../recipe/resolve.js";
import type { RecipeLookup } from "../recipe/uploaded-source.js";
import * as lookup from "./lookup.js";
import { consoleOutput } from "./output.js";

// ./lookup.ts's readers over this process's places (process.env and the home folder), for the
// CLI's commands, which run as this user here. The daemon and `up` never call these: they read
// the places of the Environment they were handed (./environment.ts), so that a test's folder is
// all they see. Apart from environment.ts, which opens the store, so that validate loads no store.

export { clusterOf, foundRecipes, gpusPerNode, skippedFileWarning } from "./lookup.js";

/** This process's places: process.env and the home folder, read when asked. */
export const thisProcess = (): lookup.Places => ({ vars: process.env, home: homedir() });

export const recipeDirs = (): string[] => lookup.recipeDirs(thisProcess());
export const imageRoots = (): string[] => lookup.imageRoots(thisProcess());
export const localRecipes = (): RecipeSource => lookup.localRecipes(thisProcess(), consoleOutput.warn);
/** The files `ref` resolves to here, as a daemon elsewhere is sent them (./lookup.ts localRecipeLookups). */
export const localRecipeLookups = (ref: string): RecipeLookup[] => lookup.localRecipeLookups(ref, thisProcess(), consoleOutput.warn);

/** `ref` resolved from this machine's recipe folders. */
export const resolveRecipeRef = (ref: string, gpusPerNode?: number, checks: Pick<ResolveOptions, "imageFolders"> = {}): Resolved => lookup.resolveRecipeRef(ref, localRecipes(), gpusPerNode, checks);

/** A recipe of this machine's recipe folders, or a UserError carrying every diagnostic; warnings go to `warn`. */
export const loadRecipe = (ref: string, warn: (d: readonly Diagnostic[]) => void, gpusPerNode?: number): Recipe => lookup.loadRecipe(ref, localRecipes(), warn, gpusPerNode);

export const userConfigDirs = (): ConfigDirs => lookup.userConfigDirs(thisProcess());
export const defaultClusterName = (dirs: ConfigDirs = userConfigDirs()): string | undefined => lookup.defaultClusterName(dirs);
/** Which cluster file a command reads (./lookup.ts findCluster). */
export const findCluster = (option: string | undefined, warn?: (line: string) => void): ClusterChoice => lookup.findCluster(option, thisProcess(), warn);
export const clusterPath = (option: string | undefined): string => lookup.clusterPath(option, thisProcess());
export const optionalClusterPath = (option: string | undefined): string | undefined => lookup.optionalClusterPath(option, thisProcess());
export const loadCluster = (option: string | undefined): Cluster => lookup.loadCluster(option, thisProcess());
export const readClusterFile = (option: string | undefined): { file: string; text: string } => lookup.readClusterFile(option, thisProcess());
