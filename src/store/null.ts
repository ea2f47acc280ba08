import type { FabricFacts } from "../cluster/detect.js";
import type { StoreFault } from "../config/errors.js";
import type { ImageFacts } from "../engine/image-contract.js";
import type { BenchRun, EvalRun } from "../contract/evidence.js";
import type { ActivityRecord } from "../contract/read-api.js";
import type { Meminfo } from "../memory/meminfo.js";
import type { NodeGuardTripRecord } from "../contract/node-guard-trip.js";
import type { BootInProgress, BootRecord, LaneRecord, LockHolder, MemoryTripRecord, NodeOutageRecord, RestartRecord, WatchedMemory, StoredWedge, StateStore, SwapRecord } from "./store.js";

/**
 * The store when there is none to be had: it records nothing and reads as empty. The labels on the
 * nodes are the truth for what runs, so `down`, `status`, `logs`, `serve` and `up` go on without
 * history; the one warning is printed where the store was opened.
 */
export class NullStore implements StateStore {
  close(): void {}
  // Out of use from the start, as its opener said: no fault of this command's.
  fault(): StoreFault | undefined {
    return undefined;
  }
  saveActivity(): boolean {
    return true;
  }
  activity(): ActivityRecord[] {
    return [];
  }
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
  launchedKey(): string | undefined {
    return undefined;
  }
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
  saveWedge(): void {}
  wedges(): Map<string, StoredWedge> {
    return new Map();
  }
  saveOutage(): void {}
  endOutage(): void {}
  outages(): NodeOutageRecord[] {
    return [];
  }
  saveOutageCause(): void {}
  // Never recorded before: the daemon's own memory of the trips it dealt with is all there is.
  saveNodeGuardTrip(): boolean {
    return true;
  }
  saveNodeGuardKills(): void {}
  nodeGuardTrips(): NodeGuardTripRecord[] {
    return [];
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
  servedEndpoint(): string | undefined {
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
