import type { StoreFault } from "../config/errors.js";
import { storeFault } from "./fault.js";
import { NullStore } from "./null.js";
import type { StateStore } from "./store.js";

const NULL = new NullStore();

/**
 * `inner` with every call going through one boundary: an error that is a store fault
 * (./fault.ts) puts the store out of use for the rest of this process. The connection is closed,
 * `failed` hears of the fault once (to warn, and to set a damaged file aside), and that call and
 * every later one answer as the NullStore does: records nothing, reads as empty. A command thus
 * goes on as it would without a store, and what must not go on unrecorded asks `fault()`
 * (src/deploy/launch.ts). Any other error (a bug) passes through unchanged.
 */
export function guardStore(inner: StateStore, file: string, failed: (fault: StoreFault) => void): StateStore {
  let current: StateStore = inner;
  let fault: StoreFault | undefined;
  const fall = (e: unknown): void => {
    const f = storeFault(e, file);
    if (f === undefined) throw e;
    if (fault !== undefined) return;
    fault = f;
    current = NULL;
    try {
      inner.close();
    } catch {
      // Closing checkpoints the WAL: on a damaged or full disk that may fail too, and changes nothing here.
    }
    failed(f);
  };
  const call = (name: keyof StateStore, args: unknown[]): unknown => {
    const target = current;
    try {
      return (target[name] as (...a: unknown[]) => unknown).apply(target, args);
    } catch (e) {
      fall(e);
      return (NULL[name] as (...a: unknown[]) => unknown).apply(NULL, args);
    }
  };
  // One wrapper per method, made once: the gateway asks the store on every request it proxies.
  const wrappers = new Map<string | symbol, (...args: unknown[]) => unknown>([["fault", (): StoreFault | undefined => fault]]);
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
