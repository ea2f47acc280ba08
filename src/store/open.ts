import { existsSync, renameSync, statSync } from "node:fs";
import Database from "better-sqlite3";
import type { FabricFacts } from "../cluster/detect.js";
import type { ImageFacts } from "../engine/image-contract.js";
import type { BenchRun, EvalRun } from "../evidence/records.js";
import type { Meminfo } from "../deploy/meminfo.js";
import { Store, type BootInProgress, type BootRecord, type LaneRecord, type LockHolder, type MemoryTripRecord, type RestartRecord, type WatchedMemory, type StateStore, type SwapRecord } from "./store.js";

/**
 * The store when there is none to be had: it records nothing and reads as empty. The labels on the
 * nodes are the truth for what runs, so `down`, `status`, `logs`, `serve` and `up` go on without
 * history; the one warning is printed where the store was opened.
 */
export class NullStore implements StateStore {
  close(): void {}
  saveBenchRun(): void {}
  benchRuns(): BenchRun[] {
    return [];
  }
  saveEvalRun(): void {}
  evalRuns(): EvalRun[] {
    return [];
  }
  dataVersion(): number {
    return 0;
  }
  beginBoot(): number {
    return 0;
  }
  bootPhase(): void {}
  memoryPeak(): void {}
  endBoot(): void {}
  history(): BootRecord[] {
    return [];
  }
  deploymentReady(): void {}
  recordLaunch(): void {}
  launchedBoot(): string | undefined {
    return undefined;
  }
  engineKey(): string | undefined {
    return undefined;
  }
  deploymentStopped(): void {}
  lane(): LaneRecord | undefined {
    return undefined;
  }
  lanes(): LaneRecord[] {
    return [];
  }
  setLane(): void {}
  beginSwap(): number {
    return 0;
  }
  endSwap(): void {}
  swaps(): SwapRecord[] {
    return [];
  }
  saveFacts(): void {}
  saveMemory(): void {}
  saveWeights(): void {}
  saveWatchedMemory(): void {}
  watchedMemory(): Map<string, WatchedMemory> {
    return new Map();
  }
  saveMemoryTrip(): void {}
  memoryTrips(): MemoryTripRecord[] {
    return [];
  }
  weights(): Map<string, number> {
    return new Map();
  }
  memory(): Map<string, { meminfo: Meminfo; read_at: string }> {
    return new Map();
  }
  facts(): { facts: Map<string, FabricFacts> } {
    return { facts: new Map() };
  }
  imageFacts(): ImageFacts | undefined {
    return undefined;
  }
  saveImageFacts(): void {}
  savePlan(): void {}
  deploymentStopping(): void {}
  savedPlan(): string | undefined {
    return undefined;
  }
  deploymentServed(): boolean {
    return false;
  }
  lastBootSeconds(): number | undefined {
    return undefined;
  }
  beginRestart(): number {
    return 0;
  }
  endRestart(): void {}
  restarts(): RestartRecord[] {
    return [];
  }
  // No store, no boots kept: a daemon without one cannot adopt what another left.
  beginBootInProgress(): void {}
  bootInProgressRecorded(): void {}
  endBootInProgress(): void {}
  bootsInProgress(): BootInProgress[] {
    return [];
  }
  takeBootInProgress(): boolean {
    return false;
  }
  endOpenRestarts(): void {}
  // Lane locks guard this machine's store records; with no records there is nothing to guard.
  acquire(): { ok: true } {
    return { ok: true };
  }
  lockHolder(): LockHolder | undefined {
    return undefined;
  }
  release(): void {}
}

/** Why a store could not be opened: its content is damaged (set it aside), or it cannot be reached at all. */
export function openFailure(e: unknown): "corrupt" | "unusable" {
  const code = e instanceof Database.SqliteError ? e.code : "";
  return code === "SQLITE_NOTADB" || code.startsWith("SQLITE_CORRUPT") ? "corrupt" : "unusable";
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
 * The damage a read-only look finds in an existing store, if any. Read-only, so that SQLite
 * neither checkpoints nor deletes the -wal and -shm of a damaged store on close (a read-write
 * connection does): they are evidence.
 */
function damage(file: string): unknown {
  if (!existsSync(file)) return undefined;
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    db.prepare(`SELECT count(*) FROM sqlite_master`).get();
    return undefined;
  } catch (e) {
    return openFailure(e) === "corrupt" ? e : undefined;
  } finally {
    db?.close();
  }
}

/**
 * Opens the store at `file`. A corrupt one is renamed aside (with its -wal and -shm, so that
 * sqlite3 opens the copy as it was) and a new one started; one that cannot be opened at all (no
 * permission, a folder in its place) is left alone and the command goes on with a NullStore.
 * Each case says so in one `warn` line naming the paths.
 */
export function openStateStore(file: string, warn: (line: string) => void, now: () => Date): StateStore {
  const seen = inode(file);
  const unusable = (e: unknown): StateStore => {
    warn(`warning: cannot open the state store ${file} (${reason(e)}); ${WITHOUT} (check the path's permissions, or set XDG_STATE_HOME)`);
    return new NullStore();
  };
  const found = damage(file);
  if (found === undefined) {
    try {
      return new Store(file);
    } catch (e) {
      if (openFailure(e) === "unusable") return unusable(e);
      return setAside(file, e);
    }
  }
  return setAside(file, found);

  function setAside(file: string, e: unknown): StateStore {
    // Another launcher may have set it aside and started a new one meanwhile: never move that one.
    if (inode(file) !== seen) {
      try {
        return new Store(file);
      } catch (again) {
        return unusable(again);
      }
    }
    const aside = asideName(file, now());
    try {
      renameSync(file, aside);
      for (const suffix of ["-wal", "-shm"]) if (existsSync(file + suffix)) renameSync(file + suffix, aside + suffix);
      const fresh = new Store(file);
      warn(`warning: the state store ${file} is corrupt (${reason(e)}); moved it to ${aside} for inspection and started a new one (history and lanes start empty)`);
      return fresh;
    } catch (e2) {
      warn(`warning: the state store ${file} is corrupt (${reason(e)}) and could not be replaced (${reason(e2)}); ${WITHOUT}`);
      return new NullStore();
    }
  }
}
