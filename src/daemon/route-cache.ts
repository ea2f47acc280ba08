import { isDeepStrictEqual } from "node:util";
import { heldByLiveProcess, laneKey } from "../claims/locks.js";
import { asRouted } from "../lanes/lane-state.js";
import { routeTable, type RouteTable } from "../gateway/routes.js";
import type { LaneRecord, StateStore } from "../store/store.js";
import type { Supervisor } from "../supervise/supervisor.js";
import type { GenerationWatch } from "../supervise/generation-watch.js";
import type { Snapshot } from "./discovery.js";

/**
 * The lanes as the gateway serves them: a lane marked switching by an `up` that died (SIGKILL, a
 * crash) is served as it was, since its lock (src/claims/locks.ts) says no live process holds it.
 */
export function lanesAsServed(store: StateStore): LaneRecord[] {
  return store.lanes().map((l) => asRouted(l, () => heldByLiveProcess(store, laneKey(l.name))));
}

/** How often a switching lane is looked at again: the `up` switching it may die meanwhile. */
export const SWITCHING_RECHECK_MS = 1000;

/** What the route table is made of, and who hears that it changed. */
export interface RouteSources {
  readonly store: StateStore;
  readonly discovery: { snapshot(): Snapshot; refreshSoon(): void };
  readonly supervisor: Pick<Supervisor, "version" | "restarting">;
  /** The wedged deployments (src/supervise/generation-watch.ts): not routed to. Absent: none are. */
  readonly generation?: Pick<GenerationWatch, "version" | "wedged">;
  /** A new discovery snapshot (the gateway's metrics count its deployments). */
  readonly snapshotSeen: (snapshot: Snapshot) => void;
  /** A new table: what was kept per table (the engines' keys) is dropped. */
  readonly tableMade: () => void;
  readonly now: () => number;
}

/**
 * The gateway's route table, rebuilt only when the labels, the lanes or the supervisor changed.
 * The store is checked on every request because a lane switch must take effect before its old
 * deployment is stopped; a group being recreated answers with a Retry-After that shrinks, so the
 * table is rebuilt on each request then. Most store writes are not lanes (a boot's phases, the
 * memory guard's samples every few seconds): those change neither the table nor the polling.
 */
export class RouteCache {
  private lanes: LaneRecord[];
  private storeVersion: number;
  private switchingCheckedAt: number;
  private table: RouteTable | undefined;
  private tableSnapshot: Snapshot;
  private supervisorVersion: number;
  private generationVersion: number | undefined;

  constructor(private readonly from: RouteSources) {
    this.lanes = lanesAsServed(from.store);
    this.storeVersion = from.store.dataVersion();
    this.switchingCheckedAt = from.now();
    this.tableSnapshot = from.discovery.snapshot();
    this.supervisorVersion = from.supervisor.version;
    this.generationVersion = from.generation?.version;
  }

  routes(): RouteTable {
    const { store, discovery, supervisor } = this.from;
    const version = store.dataVersion();
    const snapshot = discovery.snapshot();
    const recheck = this.lanes.some((l) => l.state === "switching") && this.from.now() - this.switchingCheckedAt > SWITCHING_RECHECK_MS;
    if (version !== this.storeVersion || recheck) {
      const lanes = lanesAsServed(store);
      // A lane changed: the labels are worth reading again now.
      if (version !== this.storeVersion && !isDeepStrictEqual(lanes, this.lanes)) discovery.refreshSoon();
      if (!isDeepStrictEqual(lanes, this.lanes)) this.table = undefined;
      this.storeVersion = version;
      this.switchingCheckedAt = this.from.now();
      this.lanes = lanes;
    }
    if (supervisor.version !== this.supervisorVersion || supervisor.restarting().length > 0) {
      this.supervisorVersion = supervisor.version;
      this.table = undefined;
    }
    if (this.from.generation !== undefined && this.from.generation.version !== this.generationVersion) {
      this.generationVersion = this.from.generation.version;
      this.table = undefined;
    }
    if (snapshot !== this.tableSnapshot) {
      this.tableSnapshot = snapshot;
      this.table = undefined;
      this.from.snapshotSeen(snapshot);
    }
    if (this.table === undefined) {
      this.from.tableMade();
      this.table = routeTable(snapshot.deployments, this.lanes, snapshot.at?.getTime(), snapshot.unreachable, supervisor.restarting(), this.from.generation?.wedged() ?? []);
    }
    return this.table;
  }
}
