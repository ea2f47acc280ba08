import type { ClusterNode } from "../cluster/cluster.js";
import type { ClusterSession } from "../nodes/session.js";
import type { Recipe } from "../recipe/recipe.js";
import { UserError } from "../config/errors.js";
import type { StateStore } from "../store/store.js";
import { processEnvironment } from "./environment.js";
import { consoleOutput, type Output } from "./output.js";
import { gpusPerNode } from "./lookup.js";
import { loadCluster, loadRecipe } from "./this-process.js";

/** Runs `fn` with the store open, and closes it however `fn` ends. */
export async function withStore<T>(fn: (store: StateStore) => T | Promise<T>, warn: (line: string) => void = consoleOutput.err): Promise<T> {
  const store = openStore(warn);
  try {
    return await fn(store);
  } finally {
    store.close();
  }
}

/**
 * The store of this user on this machine ($XDG_STATE_HOME/launcher/launcher.db); when it is corrupt
 * or cannot be opened, a stand-in and one warning line (src/store/open.ts): commands never stop
 * for want of history.
 */
export function openStore(warn: (line: string) => void = consoleOutput.err): StateStore {
  return processEnvironment().openStore(warn);
}

/** A recipe checked against a cluster, and a session open to the cluster's nodes. */
export async function recipeOnCluster(ref: string, clusterOption: string | undefined, io: Output): Promise<{ recipe: Recipe; session: ClusterSession }> {
  const cluster = loadCluster(clusterOption);
  const recipe = loadRecipe(ref, (ds) => io.diagnostics(ds), gpusPerNode(cluster));
  // Loaded here: the session's SSH and Docker code is no cost to commands that only read files.
  const { openSession } = await import("../nodes/session.js");
  return { recipe, session: await openSession(cluster) };
}

/** A comma-separated --nodes: the names, in the order given. */
export function parseNodes(value: string | undefined): string[] | undefined {
  return value === undefined ? undefined : value.split(",").map((n) => n.trim()).filter(Boolean);
}

/** The nodes a comma-separated --nodes names, in the cluster's order; all of them without it. */
export function namedNodes(session: ClusterSession, option: string | undefined): ClusterNode[] {
  const names = parseNodes(option);
  const unknown = (names ?? []).filter((n) => !session.cluster.nodes.some((c) => c.name === n));
  if (unknown.length > 0) throw new UserError(`no node ${unknown.join(", ")} in ${session.cluster.file}`, `its nodes are ${session.cluster.nodes.map((n) => n.name).join(", ")}`);
  return session.cluster.nodes.filter((n) => names === undefined || names.includes(n.name));
}
