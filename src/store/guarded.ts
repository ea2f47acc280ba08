import type { StoreFault } from "../config/errors.js";
import { storeFault } from "./fault.js";
import { NullStore } from "./null.js";
import type { StateStore } from "./store.js";

const NULL = new NullStore();

/** The least wait between two tries to open the store again, and the most it grows to. */
export const REOPEN_FIRST_MS = 1000;
export const REOPEN_MOST_MS = 30_000;

/**
 * How a long-lived process (the daemon) gets its store back after a fault. A one-shot command has
 * none: it ends soon, and the next command opens the store afresh.
 */
export interface Reopen {
  /** A new connection to the store (the file set aside and a new one made first when damaged); throws a store fault when it still cannot. */
  readonly open: () => StateStore;
  /** Said once the store is in use again after a fault. */
  readonly recovered: () => void;
  /** Milliseconds on a clock that never goes back; performance.now by default. */
  readonly clock?: () => number;
}

/**
 * When the next try to reopen may be made: tries are at least REOPEN_FIRST_MS apart, each failed
 * one doubling the wait up to REOPEN_MOST_MS. An open that waits on a lock blocks for the busy
 * timeout, so a store held for long must not be tried at a steady rate.
 */
export function nextReopenWait(previousMs: number | undefined): number {
  return previousMs === undefined ? REOPEN_FIRST_MS : Math.min(REOPEN_MOST_MS, previousMs * 2);
}

/**
 * `inner` with every call going through one boundary: an error that is a store fault
 * (./fault.ts) puts the store out of use. The connection is closed, `failed` hears of the fault
 * once (to warn, and to set a damaged file aside), and that call and every later one answer as the
 * NullStore does: records nothing, reads as empty. A command thus goes on as it would without a
 * store, and what must not go on unrecorded asks `fault()` (src/boot/launch.ts). Any other error
 * (a bug) passes through unchanged.
 *
 * Without `reopen` (a one-shot command) that lasts for the rest of the process. With it, a call
 * (or `fault()`) after the wait of nextReopenWait opens the store again: every kind of fault may
 * pass (a lock released, space freed, a mode fixed, a damaged file replaced), and a process that
 * serves for weeks must not stay without its store for one passing lock. A failed try is silent;
 * success ends the fault and is said through `reopen.recovered`, and a later fault is said again.
 */
export function guardStore(inner: StateStore, file: string, failed: (fault: StoreFault) => void, reopen?: Reopen): StateStore {
  const clock = reopen?.clock ?? ((): number => performance.now());
  let current: StateStore = inner;
  let fault: StoreFault | undefined;
  let wait: number | undefined;
  let tryAt = 0;
  let closed = false;
  let reopenedAt: number | undefined;
  const fall = (e: unknown): void => {
    const f = storeFault(e, file);
    if (f === undefined) throw e;
    if (fault !== undefined) return;
    fault = f;
    const broken = current;
    current = NULL;
    // A store that fails again soon after it was opened again (a disk still full: it opens, but
    // cannot write) goes on with the wait it had, so that it is not opened and said every second.
    const flapping = reopenedAt !== undefined && clock() - reopenedAt < REOPEN_MOST_MS;
    wait = nextReopenWait(flapping ? wait : undefined);
    tryAt = clock() + wait;
    try {
      broken.close();
    } catch {
      // Closing checkpoints the WAL: on a damaged or full disk that may fail too, and changes nothing here.
    }
    failed(f);
  };
  // The store back, when a fault put it out of use and the wait since the last try is over.
  const revive = (): void => {
    if (fault === undefined || reopen === undefined || closed || clock() < tryAt) return;
    try {
      current = reopen.open();
    } catch (e) {
      if (storeFault(e, file) === undefined) throw e;
      wait = nextReopenWait(wait);
      tryAt = clock() + wait;
      return;
    }
    fault = undefined;
    reopenedAt = clock();
    reopen.recovered();
  };
  const call = (name: keyof StateStore, args: unknown[]): unknown => {
    revive();
    const target = current;
    try {
      return (target[name] as (...a: unknown[]) => unknown).apply(target, args);
    } catch (e) {
      fall(e);
      return (NULL[name] as (...a: unknown[]) => unknown).apply(NULL, args);
    }
  };
  const askFault = (): StoreFault | undefined => {
    revive();
    return fault;
  };
  // Closing is no reason to open the store again.
  const close = (): void => {
    closed = true;
    call("close", []);
  };
  // One wrapper per method, made once: the gateway asks the store on every request it proxies.
  const wrappers = new Map<string | symbol, (...args: unknown[]) => unknown>([
    ["fault", askFault],
    ["close", close],
  ]);
  return new Proxy(inner, {
    get(_target, prop) {
      const made = wrappers.get(prop);
      if (made !== undefined) return made;
      const value: unknown = Reflect.get(current, prop);
      if (typeof value !== "function") return value;
      const wrapper = (...args: unknown[]): unknown => call(prop as keyof StateStore, args);
      wrappers.set(prop, wrapper);
      return wrapper;
    },
  });
}
