import type { Target } from "./routes.js";

/** The engines' keys as the gateway asks for them on each request it proxies. */
export interface EngineKeys {
  /** The key the target's engine demands; undefined: none recorded. */
  get(target: Pick<Target, "cluster" | "deployment">): string | undefined;
  /** Forgets every key kept: the daemon calls it whenever it builds its route table anew. */
  clear(): void;
}

/**
 * `read` (the store) asked once per deployment and route table instead of on every request: a
 * key found is kept until `clear`. The daemon rebuilds its table whenever another process writes
 * the store (a new deployment's `up`) and on every discovery poll, so a key kept is at most one
 * poll old, and a deployment's key only changes when it is booted again, which takes longer. A
 * key not found is not kept: `up` records it once the engine is ready, which a poll may see first,
 * and the next request must find it.
 */
export function engineKeys(read: (cluster: string, deployment: string) => string | undefined): EngineKeys {
  // By cluster, then deployment: no joined string that two pairs could share.
  let kept = new Map<string, Map<string, string>>();
  return {
    get({ cluster, deployment }) {
      const found = kept.get(cluster)?.get(deployment);
      if (found !== undefined) return found;
      const key = read(cluster, deployment);
      if (key === undefined) return undefined;
      const ofCluster = kept.get(cluster) ?? new Map<string, string>();
      ofCluster.set(deployment, key);
      kept.set(cluster, ofCluster);
      return key;
    },
    clear() {
      kept = new Map();
    },
  };
}
