import { homedir } from "node:os";
import path from "node:path";
import type { Cluster } from "../cluster/cluster.js";
import type { RecipeSource } from "../recipe/resolve.js";
import { catalogueSource } from "../recipe/uploaded-source.js";
import { openStateStore } from "../store/open.js";
import { storeDir, type StateStore } from "../store/store.js";
import type { ClusterSession } from "../nodes/session.js";
import { clusterOf, clusterPath, foundRecipes, loadCluster, localRecipes, readClusterFile, recipeDirs, type Places } from "./lookup.js";
import { consoleOutput, type Output } from "./output.js";

/**
 * Where this process finds its recipes, clusters, store and nodes, and where it speaks: made once
 * from process.env and the home folder by the entry that runs (processEnvironment), and handed
 * down, so that a test gives a daemon or `up`'s preparation one over a folder of its own
 * (environmentOf) and nodes of its own. Relative paths are the current folder's. The daemon and
 * `up` read launcher's variables, files and nodes only through the one they are handed; the CLI's
 * other commands read this process's places through ./this-process.ts, which binds
 * ./lookup.ts's readers to them.
 */
export interface Environment {
  /** The variables of the environment (LAUNCHER_API_KEY, LAUNCHER_ADMIN_KEY, ...). */
  readonly vars: Readonly<Record<string, string | undefined>>;
  /** This user's state folder: the store, the daemon's socket and record, uploaded clusters. */
  readonly stateDir: string;
  /**
   * The store in stateDir; when it cannot be opened, a stand-in and one line on `warn`
   * (src/store/open.ts). `reopen`: a long-lived process opens it again after a fault.
   */
  openStore(warn: (line: string) => void, options?: { readonly reopen?: boolean }): StateStore;
  /** The cluster file `--cluster option` names, or the one found (src/cluster/locate.ts has the order). */
  clusterPath(option: string | undefined): string;
  /** That file and its text. */
  readClusterFile(option: string | undefined): { file: string; text: string };
  /** This machine's recipe folders, as a source (ref: a name, a folder or a recipe.toml). */
  localRecipes(): RecipeSource;
  /** A cluster file's text, parsed; its errors name `file`. */
  clusterOf(f: { readonly file: string; readonly text: string }): Cluster;
  /** The cluster `--cluster option` names, read and parsed. */
  loadCluster(option: string | undefined): Cluster;
  /** The recipes a daemon's client may name by their bare name; a passed-over file is said on `warn`. */
  recipeCatalogue(warn: (line: string) => void): RecipeSource;
  /** The command line that runs this same launcher with other arguments (the daemon's watchers). */
  selfArgv(args: readonly string[]): string[];
  /**
   * A session on a cluster's nodes, where `up` (in this process or a daemon) runs its boot:
   * over SSH (src/nodes/session.ts openSession) unless a test gives fake nodes.
   */
  openSession(cluster: Cluster): Promise<ClusterSession>;
  readonly console: Output;
}

/** The environment of these places, speaking on `console`. */
export function environmentOf(places: Places, console: Output): Environment {
  const stateDir = storeDir(places.vars, places.home);
  return {
    vars: places.vars,
    stateDir,
    openStore: (warn, options = {}) => openStateStore(path.join(stateDir, "launcher.db"), warn, () => new Date(), options.reopen === true ? { reopen: {} } : {}),
    clusterPath: (option) => clusterPath(option, places),
    readClusterFile: (option) => readClusterFile(option, places),
    localRecipes: () => localRecipes(places, console.warn),
    clusterOf,
    loadCluster: (option) => loadCluster(option, places),
    recipeCatalogue: (warn) => catalogueSource(recipeDirs(places), foundRecipes(warn)),
    selfArgv,
    // Loaded when a boot opens it: commands that read only files load no SSH code.
    openSession: async (cluster) => (await import("../nodes/session.js")).openSession(cluster),
    console,
  };
}

/** This process's environment: process.env, the home folder, stdout and stderr. */
export const processEnvironment = (): Environment => environmentOf({ vars: process.env, home: homedir() }, consoleOutput);

/** The command line that runs this same launcher (dist or sources) with other arguments. */
export function selfArgv(args: readonly string[]): string[] {
  return [process.execPath, ...process.execArgv, process.argv[1] ?? "launcher", ...args];
}
