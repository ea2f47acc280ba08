import type { NodeFacts } from "../nodes/outage.js";
import type { StateStore } from "../store/store.js";
import type { OutageHooks } from "./discovery.js";

/**
 * A node's last memory sample before it stopped answering: the daemon's guard's (newest while it
 * watches a deployment there), else doctor's reading; undefined when neither was ever taken.
 */
export function lastMemory(store: Pick<StateStore, "watchedMemory" | "memory">, cluster: string, node: string): ReturnType<NodeFacts["memory"]> {
  const watched = store.watchedMemory(cluster).get(node);
  if (watched !== undefined) return { ...watched.sample, at: watched.at };
  const read = store.memory(cluster).get(node);
  return read === undefined ? undefined : { availableKiB: read.meminfo.availableKiB, totalKiB: read.meminfo.totalKiB, at: read.read_at };
}

/**
 * The daemon's node outages kept in the store (migration 16): begun and ended as discovery finds
 * them. `heartbeat` is the node guard's last heartbeat the daemon read, when it has one to give.
 */
export function outageHooksFor(store: StateStore, heartbeat: NodeFacts["heartbeat"] = () => undefined): OutageHooks {
  return {
    facts: { memory: (cluster, node) => lastMemory(store, cluster, node), heartbeat },
    started: (o) => store.saveOutage(o),
    ended: (o, at) => store.endOutage(o.cluster, o.node, o.kind, at),
  };
}
