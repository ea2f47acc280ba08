import { existsSync, renameSync, statSync } from "node:fs";
import Database from "better-sqlite3";
import type { StoreFault } from "../config/errors.js";
import { isDamaged, storeFault } from "./fault.js";
import { guardStore, type Reopen } from "./guarded.js";
import { NullStore } from "./null.js";
import { Store, type StateStore } from "./store.js";

export { NullStore };

/** Why a store could not be opened: its content is damaged (set it aside), or it cannot be reached at all. */
export function openFailure(e: unknown): "corrupt" | "unusable" {
  const fault = storeFault(e, "");
  return fault !== undefined && isDamaged(fault) ? "corrupt" : "unusable";
}

/** `launcher.db.corrupt-20260102T030405Z`: sorts by time, no characters a shell or Windows minds. */
export const asideName = (file: string, at: Date): string => `${file}.corrupt-${at.toISOString().replace(/[-:]|\.\d+/g, "")}`;

const reason = (e: unknown): string => {
  const err = e as NodeJS.ErrnoException;
  return err.code === undefined ? err.message : `${err.code}: ${err.message}`;
};

const inode = (file: string): number | undefined => {
  try {
    return statSync(file).ino;
  } catch {
    return undefined;
  }
};

const WITHOUT = "going on without it: history and lane records are neither read nor written by this command";

/**
 * The damage a read-only look finds in an existing store, if any. `quick_check` reads every page
 * of every table and index (sqlite doc pragma.html#pragma_quick_check: integrity_check without the
 * index-content checks, O(N) in the file's size), so a page damaged in the middle shows here, before
 * a command starts anything, and not at its first read halfway through an `up`. Read-only, so that
 * SQLite neither checkpoints nor deletes the -wal and -shm of a damaged store on close (a
 * read-write connection does): they are evidence.
 */
function damage(file: string): unknown {
  if (!existsSync(file)) return undefined;
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    // One row "ok", or up to N rows saying what is wrong (the argument bounds them).
    const found = db.prepare(`PRAGMA quick_check(1)`).pluck().all() as string[];
    if (found.length === 1 && found[0] === "ok") return undefined;
    // What it found, on the one line the warning is.
    return new Database.SqliteError(`quick_check: ${found.join(" ").replace(/\s+/g, " ").slice(0, 300)}`, "SQLITE_CORRUPT");
  } catch (e) {
    return openFailure(e) === "corrupt" ? e : undefined;
  } finally {
    db?.close();
  }
}

/** Where a damaged store went (and why no new one could be made, if so), or why it stayed. */
type Moved = { readonly aside: string; readonly fresh?: unknown } | { readonly replaced: true } | { readonly failed: unknown };

/**
 * Renames a damaged store aside, with its -wal and -shm (so that sqlite3 opens the copy as it
 * was), unless `file` is no longer the one this process opened (`seen`): another launcher set it
 * aside and started a new one meanwhile, never to be moved.
 */
function moveAside(file: string, seen: number | undefined, now: () => Date): Moved {
  if (inode(file) !== seen) return { replaced: true };
  const aside = asideName(file, now());
  try {
    renameSync(file, aside);
    for (const suffix of ["-wal", "-shm"]) if (existsSync(file + suffix)) renameSync(file + suffix, aside + suffix);
    return { aside };
  } catch (e) {
    return { failed: e };
  }
}

/** What to do while a daemon tries to open its store again, where fault.ts's hint (made for a one-shot command) does not fit. */
const HINT_WHILE_REOPENING: Partial<Record<StoreFault["kind"], string>> = {
  busy: "another launcher on this machine holds the store: once it lets go, this one goes on recording",
};

/** Options of openStateStore. */
export interface OpenOptions {
  /** A process that lives long (the daemon): after a fault the store is opened again (src/store/guarded.ts). */
  readonly reopen?: { readonly clock?: () => number };
}

/** The one line said when the store fails while a command uses it (src/store/guarded.ts). */
export function faultLine(fault: StoreFault, moved: Moved | undefined, reopening = false): string {
  const until = reopening
    ? "launcher records nothing (a boot it runs is not recorded) until it can open the store again, which it tries every few seconds"
    : "this command records nothing more (a boot it runs is not recorded)";
  const head = `warning: the state store ${fault.file} failed (${fault.code}: ${fault.reason}): ${until}; run \`launcher status\` to see what runs (the labels on the nodes)`;
  if (moved === undefined) return `${head}; ${(reopening ? HINT_WHILE_REOPENING[fault.kind] : undefined) ?? fault.hint ?? ""}`;
  if ("aside" in moved) {
    const fresh = moved.fresh === undefined ? "started a new one" : `could not start a new one (${reason(moved.fresh)})`;
    return `${head}; it is damaged: moved it to ${moved.aside} for inspection and ${fresh}`;
  }
  if ("replaced" in moved) return `${head}; it is damaged, and another launcher has set it aside already`;
  return `${head}; it is damaged and could not be set aside (${reason(moved.failed)})`;
}

/**
 * The store at `file` opened again by a process that lost it to a fault. Damage found (the file set
 * aside at the fault could not be, or was damaged again) is set aside now, and said; what still
 * fails is thrown, for the guard to try again later.
 */
function reopenStore(file: string, warn: (line: string) => void, now: () => Date): Store {
  const found = damage(file);
  if (found !== undefined) {
    const moved = moveAside(file, inode(file), now);
    if ("failed" in moved) throw found;
    if ("aside" in moved) warn(`warning: the state store ${file} is corrupt (${reason(found)}); moved it to ${moved.aside} for inspection and started a new one (history and lanes start empty)`);
  }
  return new Store(file);
}

/**
 * Opens the store at `file`. A corrupt one is renamed aside and a new one started; one that cannot
 * be opened at all (no permission, a folder in its place, a full disk) is left alone and the
 * command goes on with a NullStore. Each case says so in one `warn` line naming the paths. The
 * store returned is guarded (src/store/guarded.ts): a fault while the command uses it is said in
 * one line too, a damaged file set aside then, and the command goes on recording nothing; with
 * `options.reopen` (the daemon) only until the store can be opened again.
 */
export function openStateStore(file: string, warn: (line: string) => void, now: () => Date, options: OpenOptions = {}): StateStore {
  const seen = inode(file);
  const unusable = (e: unknown): StateStore => {
    warn(`warning: cannot open the state store ${file} (${reason(e)}); ${WITHOUT} (check the path's permissions, or set XDG_STATE_HOME)`);
    return new NullStore();
  };
  const guarded = (store: Store): StateStore => {
    // The file this connection has open: only that one is ever moved aside.
    let mine = inode(file);
    const reopen: Reopen | undefined =
      options.reopen === undefined
        ? undefined
        : {
            ...options.reopen,
            open: () => {
              const again = reopenStore(file, warn, now);
              mine = inode(file);
              return again;
            },
            recovered: () => warn(`the state store ${file} is in use again: launcher records from here on`),
          };
    return guardStore(store, file, (fault) => warn(faultLine(fault, isDamaged(fault) ? renew(mine) : undefined, reopen !== undefined)), reopen);
  };
  // A damaged store found while in use: set aside, and a new one made for the commands that follow
  // (this one goes on without: its boot ids and locks were the old store's).
  const renew = (mine: number | undefined): Moved => {
    const moved = moveAside(file, mine, now);
    if (!("aside" in moved)) return moved;
    try {
      new Store(file).close();
      return moved;
    } catch (e) {
      return { ...moved, fresh: e };
    }
  };
  const found = damage(file);
  if (found === undefined) {
    try {
      return guarded(new Store(file));
    } catch (e) {
      if (openFailure(e) === "unusable") return unusable(e);
      return setAside(e);
    }
  }
  return setAside(found);

  function setAside(e: unknown): StateStore {
    const moved = moveAside(file, seen, now);
    if ("replaced" in moved) {
      try {
        return guarded(new Store(file));
      } catch (again) {
        return unusable(again);
      }
    }
    if ("failed" in moved) {
      warn(`warning: the state store ${file} is corrupt (${reason(e)}) and could not be replaced (${reason(moved.failed)}); ${WITHOUT}`);
      return new NullStore();
    }
    try {
      const fresh = new Store(file);
      warn(`warning: the state store ${file} is corrupt (${reason(e)}); moved it to ${moved.aside} for inspection and started a new one (history and lanes start empty)`);
      return guarded(fresh);
    } catch (e2) {
      warn(`warning: the state store ${file} is corrupt (${reason(e)}) and could not be replaced (${reason(e2)}); ${WITHOUT}`);
      return new NullStore();
    }
  }
}
