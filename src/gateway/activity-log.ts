import type { ActivityRecord } from "../contract/read-api.js";
import type { StateStore } from "../store/store.js";

export interface ActivityLogOptions {
  readonly store: Pick<StateStore, "saveActivity" | "activity">;
  /** Records kept in memory (what `recent` answers from). */
  readonly ringSize: number;
  /** Rows the store keeps. */
  readonly keepRows: number;
  /** How often new records are written to the store, in one transaction. */
  readonly flushMs: number;
}

/** The daemon's defaults: the last 1000 requests in memory, 100 000 in the store, written each second. */
export const ACTIVITY_RING = 1_000;
export const ACTIVITY_KEEP_ROWS = 100_000;
export const ACTIVITY_FLUSH_MS = 1_000;

/**
 * The gateway's activity log: each answered request's record, in a bounded ring in memory and in
 * the store. `add` is on the request path, so it only appends: records reach the store in one
 * batch per flushMs (a synchronous SQLite write per request would hold every stream the gateway
 * serves for its length). Records waiting for the store are bounded too: past keepRows the oldest
 * are dropped, as the store would drop them anyway.
 */
export class ActivityLog {
  #ring: ActivityRecord[] = [];
  #pending: ActivityRecord[] = [];
  readonly #listeners = new Set<(r: ActivityRecord) => void>();
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ActivityLogOptions) {
    // The newest records of the daemon before this one: the page opened after a restart still has them.
    this.#ring = options.store.activity(options.ringSize).reverse();
  }

  add(record: ActivityRecord): void {
    this.#ring.push(record);
    if (this.#ring.length > this.options.ringSize * 2) this.#ring = this.#ring.slice(-this.options.ringSize);
    this.#pending.push(record);
    if (this.#pending.length > this.options.keepRows) this.#pending.splice(0, this.#pending.length - this.options.keepRows);
    for (const f of this.#listeners) f(record);
  }

  /** The newest `limit` records (at most the ring's size), newest first. */
  recent(limit: number): ActivityRecord[] {
    const n = Math.max(0, Math.min(limit, this.options.ringSize, this.#ring.length));
    return this.#ring.slice(this.#ring.length - n).reverse();
  }

  /** Calls `f` with each new record; returns the unsubscribe. */
  subscribe(f: (r: ActivityRecord) => void): () => void {
    this.#listeners.add(f);
    return () => this.#listeners.delete(f);
  }

  /** Writes the records not yet in the store (the store's guard keeps a fault from throwing here). */
  flush(): void {
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    // The store busy with another process's write: the batch waits for the next flush (still bounded).
    if (!this.options.store.saveActivity(batch, this.options.keepRows)) this.#pending = [...batch, ...this.#pending].slice(-this.options.keepRows);
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.flush(), this.options.flushMs);
    this.#timer.unref();
  }

  /** Stops the timer and writes what is left. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.flush();
  }
}
