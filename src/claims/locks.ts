import { hostname } from "node:os";
import { UserError } from "../config/errors.js";
import type { LockOwner, StateStore } from "../store/store.js";

export const laneKey = (lane: string): string => `lane:${lane}`;
/** A deployment name is unique across its cluster: two `up`s of one name on other nodes exclude each other. */
export const deploymentKey = (cluster: string, deployment: string): string => `deployment:${cluster}/${deployment}`;

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

const describeKey = (key: string): string => key.replace(/^lane:/, "lane ").replace(/^deployment:[^/]*\//, "deployment ");

/**
 * Holds `keys` for this process or fails at once with a "busy" error that names the holder.
 * A holder that died without releasing is noticed (its pid is gone) and replaced.
 */
export function holdOrBusy(store: StateStore, keys: readonly string[], what: string, now: () => Date): () => void {
  const owner: LockOwner = { pid: process.pid, host: hostname(), what };
  const r = store.acquire(keys, owner, now().toISOString(), isAlive);
  if (!r.ok) {
    const h = r.holder;
    throw new UserError(
      `busy: ${describeKey(h.key)} is in use by \`${h.what}\` (pid ${h.pid} on ${h.host}, since ${h.acquired_at})`,
      "wait for it to finish, or stop that command (Ctrl-C in its shell rolls it back)",
    );
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    store.release(keys, owner);
  };
}

/**
 * Whether a live process of this host holds `key`. A holder on another host cannot be checked
 * from here, so it counts as live.
 */
export function heldByLiveProcess(store: StateStore, key: string): boolean {
  const holder = store.lockHolder(key);
  if (holder === undefined) return false;
  return holder.host !== hostname() || isAlive(holder.pid);
}
