import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { FabricFacts } from "../cluster/detect.js";
import type { StoreFault } from "../config/errors.js";
import type { ImageFacts } from "../engine/image-contract.js";
import type { ActivityRecord } from "../contract/read-api.js";
import { benchRunFromStored, type BenchRun, type EvalRun, type EvidenceStore, type RunQuery } from "../contract/evidence.js";
import type { Meminfo } from "../memory/meminfo.js";
import type { Culprit, MemorySample } from "../memory/memory-watch.js";
import { MIGRATIONS } from "./migrations.js";
import type { OutageCause, OutageKind } from "../contract/outage.js";
import type { NodeGuardTripRecord } from "../contract/node-guard-trip.js";


/** How long a write waits for another process's write lock before it is a store fault. */
const BUSY_TIMEOUT_MS = 5000;
export type BootOutcome = "booting" | "ready" | "failed" | "interrupted";

export interface NewBoot {
  readonly deployment: string;
  readonly recipe: string;
  readonly recipe_hash: string;
  readonly lane?: string;
  readonly cluster: string;
  readonly served_model: string;
  readonly endpoint: string;
  readonly nodes: readonly string[];
  readonly started_at: string;
  /** The engine version the image reported in preflight. */
  readonly engine_version?: string;
}

export interface PhaseRecord {
  readonly node: string;
  readonly phase: string;
  readonly started_at: string;
  readonly ended_at?: string;
  readonly figures: Readonly<Record<string, string>>;
  /** The least MemAvailable the memory guard saw on the node during the phase (its peak use), KiB. */
  readonly min_available_kib?: number;
  readonly total_kib?: number;
}

export interface BootRecord extends NewBoot {
  readonly id: number;
  readonly ended_at?: string;
  readonly outcome: BootOutcome;
  readonly failed_node?: string;
  readonly error?: string;
  readonly phases: readonly PhaseRecord[];
}

export type LaneState = "serving" | "switching" | "empty";

export interface LaneRecord {
  readonly name: string;
  readonly cluster: string;
  readonly deployment?: string;
  readonly recipe?: string;
  readonly served_model?: string;
  readonly state: LaneState;
  /** The deployment being booted into the lane while it is switching. */
  readonly switching_to?: string;
  readonly since: string;
}

export type SwapMode = "first" | "disjoint" | "overlap" | "same";

export interface SwapRecord {
  readonly id: number;
  readonly lane: string;
  readonly mode: SwapMode;
  readonly from_deployment?: string;
  readonly from_recipe?: string;
  readonly to_deployment: string;
  readonly to_recipe: string;
  readonly started_at: string;
  readonly ended_at?: string;
  readonly outcome: string;
  readonly error?: string;
}

export type RestartOutcome = "restarting" | "ready" | "failed" | "cancelled";

/** One recreation of a whole group by the supervisor (src/supervise/supervisor.ts), and why. */
export interface NewRestart {
  readonly cluster: string;
  readonly deployment: string;
  readonly lane?: string;
  /** 1 for the first restart of the deployment's life. */
  readonly attempt: number;
  /** What the supervisor saw: rank-exited, unhealthy, node-unreachable, memory-guard. */
  readonly reason: string;
  readonly message: string;
  /** The dead rank, when there is one. */
  readonly node?: string;
  readonly rank?: number;
  /** The root cause from the dead rank's log (the boot log parser's), when it says one. */
  readonly cause?: string;
  readonly started_at: string;
}

export interface RestartRecord extends NewRestart {
  readonly id: number;
  readonly ended_at?: string;
  readonly outcome: RestartOutcome;
  readonly error?: string;
}

/**
 * A boot a daemon runs (src/boot/launch.ts), kept from just before its first container starts
 * until it ends, so that a daemon started after that one died adopts it (src/daemon/adopt.ts).
 */
export interface NewBootInProgress {
  /** Its launcher.boot id: every container of it carries it. */
  readonly boot: string;
  readonly cluster: string;
  readonly deployment: string;
  readonly lane?: string;
  /** The plan as it runs, stamped with its id (src/plan/saved.ts). */
  readonly plan: string;
  readonly started_at: string;
  /** When it times out, as its `up --timeout` said. */
  readonly deadline_at: string;
  /** The daemon process watching it. */
  readonly pid: number;
  readonly host: string;
}

export interface BootInProgress extends NewBootInProgress {
  /** Its row in the boots history, once written. */
  readonly history_id?: number;
}

export interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly what: string;
}

export interface LockHolder extends LockOwner {
  readonly key: string;
  readonly acquired_at: string;
}

type Row = Record<string, unknown>;

/** SQLite NULL becomes an absent property, as exactOptionalPropertyTypes wants. */
function compact<T>(row: Row): T {
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) if (v !== null) out[k] = v;
  return out as T;
}

/** $XDG_STATE_HOME/launcher, else ~/.local/state/launcher (the XDG base directory default). */
export function storeDir(env: NodeJS.ProcessEnv, home: string): string {
  const base = env.XDG_STATE_HOME && path.isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : path.join(home, ".local", "state");
  return path.join(base, "launcher");
}

function narrowMode(file: string): void {
  try {
    chmodSync(file, 0o600);
  } catch {
    // Another user's store that this one may write: its owner chose its mode.
  }
}

/** What commands use of the store: the SQLite one, or the stand-in when it cannot be had (src/store/open.ts). */
/** A node's last sample under the daemon's guard. */
/** A deployment the daemon's generation watch found wedged (src/contract/generation.ts), as `status` reads it. */
export interface StoredWedge {
  /** The launch it was found wedged in (its launcher.boot label; '' when it carries none). */
  readonly boot: string;
  /** ISO: its last completed generation (or when it was first seen serving). */
  readonly since: string;
  readonly message: string;
  /** ISO: when the daemon found it wedged. */
  readonly at: string;
}

/** A node that stopped answering while launcher's ranks ran there (src/nodes/outage.ts), as the store keeps it. */
export interface NodeOutageRecord {
  readonly cluster: string;
  readonly node: string;
  readonly kind: OutageKind;
  readonly since: string;
  /** When a poll read it again; absent while it lasts (or its daemon stopped before). */
  readonly ended_at?: string;
  readonly deployments: readonly { readonly deployment: string; readonly ranks: readonly number[] }[];
  readonly memory?: MemorySample & { readonly at: string };
  /** What the node's own guard said of it once the node answered again; absent: nothing known (yet). */
  readonly cause?: OutageCause;
}

export interface WatchedMemory {
  readonly deployment: string;
  readonly sample: MemorySample;
  readonly at: string;
}

/** One trip of the guard after ready, as the store keeps it. */
export interface MemoryTripRecord {
  readonly cluster: string;
  readonly deployment: string;
  readonly node: string;
  readonly phase: string;
  readonly culprit: Culprit;
  readonly message: string;
  readonly detail: readonly string[];
  readonly at: string;
}

export type StateStore = { [K in keyof Store]: Store[K] };

/**
 * launcher's local memory: lanes, deployments and the history of every boot. The nodes' labels
 * stay the truth for what runs; this records what launcher did and intends.
 */
export class Store implements EvidenceStore {
  private readonly db: Database.Database;

  constructor(file: string) {
    if (file !== ":memory:") {
      // The store holds engine API keys: readable by its owner alone. SQLite gives the -wal and
      // -shm files the database file's own mode (sqlite src/os_unix.c, findCreateFileMode), so a
      // new file is made 0600 before SQLite opens it, and an older one is narrowed once opened.
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      try {
        closeSync(openSync(file, "wx", 0o600));
      } catch {
        // There already (or not creatable): SQLite opens it, or says why it cannot.
      }
    }
    this.db = new Database(file);
    try {
      // busy_timeout first: even switching to WAL waits for a writer. The daemon reads while CLI
      // commands write: WAL lets them.
      if (file !== ":memory:") narrowMode(file);
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("foreign_keys = ON");
      this.migrate();
      // Reads the whole schema: a damaged one shows here, at open, and not in the middle of a command.
      this.db.prepare(`SELECT count(*) FROM sqlite_master`).get();
    } catch (e) {
      this.db.close();
      throw e;
    }
  }

  private migrate(): void {
    for (let step = 0; step < MIGRATIONS.length; step++) {
      // Read the version inside the write lock: two processes opening a new store at once must
      // not both run the same migration.
      const done = this.db.transaction((): boolean => {
        const v = this.db.pragma("user_version", { simple: true }) as number;
        if (v >= MIGRATIONS.length) return true;
        this.db.exec(MIGRATIONS[v] as string);
        this.db.pragma(`user_version = ${v + 1}`);
        return false;
      }).immediate();
      if (done) return;
    }
  }

  close(): void {
    this.db.close();
  }

  /**
   * The fault that put the store out of use during this process, if one did: the guard that
   * openStateStore puts around a store answers it (src/store/guarded.ts); a bare Store has none.
   */
  fault(): StoreFault | undefined {
    return undefined;
  }

  /**
   * Changes whenever anyone commits: a cheap "has anything changed?" for the daemon. PRAGMA
   * data_version changes only for other connections' commits (https://www.sqlite.org/pragma.html#pragma_data_version),
   * and the daemon's own boots write through this one (a lane swap it runs), so this connection's
   * own changes (total_changes(), https://www.sqlite.org/lang_corefunc.html#total_changes) are
   * added: both only grow, so their sum moves when either does.
   */
  dataVersion(): number {
    return this.perRequest().dataVersion.get() as number;
  }

  private prepared: { readonly dataVersion: Database.Statement; readonly engineKey: Database.Statement } | undefined;
  /**
   * The daemon's gateway asks these on every request it proxies: prepared once (after the
   * migrations), not compiled by SQLite each time as better-sqlite3's pragma() and prepare() do.
   */
  private perRequest(): NonNullable<Store["prepared"]> {
    this.prepared ??= {
      dataVersion: this.db.prepare("SELECT (SELECT data_version FROM pragma_data_version()) + total_changes()").pluck(),
      engineKey: this.db.prepare("SELECT api_key FROM deployments WHERE cluster = ? AND name = ? AND stopped_at IS NULL").pluck(),
    };
    return this.prepared;
  }

  beginBoot(b: NewBoot): number {
    const r = this.db
      .prepare(
        `INSERT INTO boots (deployment, recipe, recipe_hash, lane, cluster, served_model, endpoint, nodes, started_at, engine_version)
         VALUES (@deployment, @recipe, @recipe_hash, @lane, @cluster, @served_model, @endpoint, @nodes, @started_at, @engine_version)`,
      )
      .run({ ...b, lane: b.lane ?? null, engine_version: b.engine_version ?? null, nodes: JSON.stringify(b.nodes) });
    return Number(r.lastInsertRowid);
  }

  /** A node entered `phase` (or its figures grew): the node's previous phase ends now. */
  bootPhase(bootId: number, node: string, phase: string, at: string, figures: Readonly<Record<string, string>>): void {
    this.db.transaction(() => {
      this.db.prepare(`UPDATE boot_phases SET ended_at = ? WHERE boot_id = ? AND node = ? AND phase <> ? AND ended_at IS NULL`).run(at, bootId, node, phase);
      this.db
        .prepare(
          `INSERT INTO boot_phases (boot_id, node, phase, started_at, figures) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (boot_id, node, phase) DO UPDATE SET figures = excluded.figures`,
        )
        .run(bootId, node, phase, at, JSON.stringify(figures));
    })();
  }

  /** The memory guard saw `availableKiB` on the node during `phase`: kept when it is the phase's least. */
  memoryPeak(bootId: number, node: string, phase: string, availableKiB: number, totalKiB: number): void {
    this.db
      .prepare(
        `UPDATE boot_phases SET min_available_kib = MIN(COALESCE(min_available_kib, @available), @available), total_kib = @total
         WHERE boot_id = @boot AND node = @node AND phase = @phase`,
      )
      .run({ boot: bootId, node, phase, available: availableKiB, total: totalKiB });
  }

  endBoot(bootId: number, outcome: Exclude<BootOutcome, "booting">, at: string, failure?: { node: string; error: string }): void {
    this.db.transaction(() => {
      this.db.prepare(`UPDATE boot_phases SET ended_at = ? WHERE boot_id = ? AND ended_at IS NULL`).run(at, bootId);
      this.db
        .prepare(`UPDATE boots SET ended_at = ?, outcome = ?, failed_node = ?, error = ? WHERE id = ?`)
        .run(at, outcome, failure?.node ?? null, failure?.error ?? null, bootId);
    })();
  }

  /** Past boots, newest first, optionally of one recipe. */
  history(recipe: string | undefined, limit: number): BootRecord[] {
    const rows = this.db
      .prepare(`SELECT * FROM boots WHERE (@recipe IS NULL OR recipe = @recipe) ORDER BY id DESC LIMIT @limit`)
      .all({ recipe: recipe ?? null, limit }) as Row[];
    const phases = this.db.prepare(`SELECT node, phase, started_at, ended_at, figures, min_available_kib, total_kib FROM boot_phases WHERE boot_id = ? ORDER BY started_at, rowid`);
    return rows.map((row) => {
      const base = compact<Omit<BootRecord, "nodes" | "phases"> & { nodes: string }>(row);
      return {
        ...base,
        nodes: JSON.parse(base.nodes) as string[],
        phases: (phases.all(base.id) as Row[]).map((p) => {
          const rec = compact<Omit<PhaseRecord, "figures"> & { figures: string }>(p);
          return { ...rec, figures: JSON.parse(rec.figures) as Record<string, string> };
        }),
      };
    });
  }

  /** `apiKey`: the key the deployment's engine demands, if any (a secret: only engineKey reads it back). */
  deploymentReady(d: Omit<NewBoot, "started_at"> & { boot_id: number; ready_at: string }, apiKey?: string): void {
    this.db
      .prepare(
        `INSERT INTO deployments (cluster, name, recipe, recipe_hash, lane, served_model, endpoint, nodes, boot_id, ready_at, api_key)
         VALUES (@cluster, @deployment, @recipe, @recipe_hash, @lane, @served_model, @endpoint, @nodes, @boot_id, @ready_at, @api_key)
         ON CONFLICT (cluster, name) DO UPDATE SET recipe = excluded.recipe, recipe_hash = excluded.recipe_hash, lane = excluded.lane,
           served_model = excluded.served_model, endpoint = excluded.endpoint, nodes = excluded.nodes, boot_id = excluded.boot_id,
           ready_at = excluded.ready_at, stopped_at = NULL, stopping_at = NULL, api_key = excluded.api_key`,
      )
      .run({ ...d, lane: d.lane ?? null, nodes: JSON.stringify(d.nodes), api_key: apiKey ?? null });
  }

  /** `boot`: the launcher.boot id every container of this launch of the deployment carries. */
  recordLaunch(cluster: string, deployment: string, boot: string, at: string, apiKey?: string): void {
    this.db.prepare(`INSERT OR REPLACE INTO launched_boots (cluster, deployment, boot, at, api_key) VALUES (?, ?, ?, ?, ?)`).run(cluster, deployment, boot, at, apiKey ?? null);
  }

  /** The key the engine of the deployment's last launch demands (recorded at its start); undefined: none. */
  launchedKey(cluster: string, deployment: string): string | undefined {
    return (this.db.prepare(`SELECT api_key FROM launched_boots WHERE cluster = ? AND deployment = ?`).pluck().get(cluster, deployment) as string | null | undefined) ?? undefined;
  }

  /** The launcher.boot id the deployment was last launched with; undefined: launcher never recorded one. */
  launchedBoot(cluster: string, deployment: string): string | undefined {
    return (this.db.prepare(`SELECT boot FROM launched_boots WHERE cluster = ? AND deployment = ?`).pluck().get(cluster, deployment) as string | undefined) ?? undefined;
  }

  /** The key the engine of a running deployment demands, as `up` recorded it; undefined: none. */
  engineKey(cluster: string, name: string): string | undefined {
    return (this.perRequest().engineKey.get(cluster, name) as string | null | undefined) ?? undefined;
  }

  deploymentStopped(cluster: string, name: string, at: string): void {
    this.db.prepare(`UPDATE deployments SET stopped_at = ? WHERE cluster = ? AND name = ? AND stopped_at IS NULL`).run(at, cluster, name);
    this.db.prepare(`UPDATE lanes SET state = 'empty', deployment = NULL, recipe = NULL, served_model = NULL, since = ? WHERE cluster = ? AND deployment = ? AND state = 'serving'`).run(at, cluster, name);
  }

  lane(name: string): LaneRecord | undefined {
    const row = this.db.prepare(`SELECT * FROM lanes WHERE name = ?`).get(name) as Row | undefined;
    return row === undefined ? undefined : compact<LaneRecord>(row);
  }

  lanes(): LaneRecord[] {
    return (this.db.prepare(`SELECT * FROM lanes ORDER BY name`).all() as Row[]).map((r) => compact<LaneRecord>(r));
  }

  setLane(lane: LaneRecord): void {
    this.db
      .prepare(
        `INSERT INTO lanes (name, cluster, deployment, recipe, served_model, state, switching_to, since)
         VALUES (@name, @cluster, @deployment, @recipe, @served_model, @state, @switching_to, @since)
         ON CONFLICT (name) DO UPDATE SET cluster = excluded.cluster, deployment = excluded.deployment, recipe = excluded.recipe,
           served_model = excluded.served_model, state = excluded.state, switching_to = excluded.switching_to, since = excluded.since`,
      )
      .run({ deployment: null, recipe: null, served_model: null, switching_to: null, ...lane });
  }

  beginSwap(s: Omit<SwapRecord, "id" | "outcome" | "ended_at" | "error">): number {
    const r = this.db
      .prepare(
        `INSERT INTO lane_swaps (lane, mode, from_deployment, from_recipe, to_deployment, to_recipe, started_at)
         VALUES (@lane, @mode, @from_deployment, @from_recipe, @to_deployment, @to_recipe, @started_at)`,
      )
      .run({ from_deployment: null, from_recipe: null, ...s });
    return Number(r.lastInsertRowid);
  }

  endSwap(id: number, outcome: "ok" | "failed" | "interrupted", at: string, error?: string): void {
    this.db.prepare(`UPDATE lane_swaps SET ended_at = ?, outcome = ?, error = ? WHERE id = ?`).run(at, outcome, error ?? null, id);
  }

  swaps(lane: string, limit: number): SwapRecord[] {
    return (this.db.prepare(`SELECT * FROM lane_swaps WHERE lane = ? ORDER BY id DESC LIMIT ?`).all(lane, limit) as Row[]).map((r) => compact<SwapRecord>(r));
  }

  /** The plan a deployment was last booted from, as `up` saved it (JSON: src/supervise/supervisor.ts reads it). */
  savePlan(cluster: string, name: string, plan: string, at: string): void {
    this.db.prepare(`INSERT OR REPLACE INTO deployment_plans (cluster, name, plan, saved_at) VALUES (?, ?, ?, ?)`).run(cluster, name, plan, at);
  }

  savedPlan(cluster: string, name: string): string | undefined {
    const row = this.db.prepare(`SELECT plan FROM deployment_plans WHERE cluster = ? AND name = ?`).get(cluster, name) as { plan: string } | undefined;
    return row?.plan;
  }

  /** The endpoint it was recorded serving at, while no `down` or swap has stopped it; undefined: none. */
  servedEndpoint(cluster: string, name: string): string | undefined {
    return (this.db.prepare(`SELECT endpoint FROM deployments WHERE cluster = ? AND name = ? AND stopped_at IS NULL`).pluck().get(cluster, name) as string | undefined) ?? undefined;
  }

  /** Did it serve, and has no `down` or swap stopped it (or begun to) since? */
  deploymentServed(cluster: string, name: string): boolean {
    return this.db.prepare(`SELECT 1 FROM deployments WHERE cluster = ? AND name = ? AND stopped_at IS NULL AND stopping_at IS NULL`).get(cluster, name) !== undefined;
  }

  /**
   * `launcher down` is about to remove it: from now on the daemon's supervisor takes its ranks
   * exiting for the `down`, not a failure (src/supervise/supervisor.ts). Its key stays readable until
   * it is stopped for good.
   */
  deploymentStopping(cluster: string, name: string, at: string): void {
    this.db.prepare(`UPDATE deployments SET stopping_at = ? WHERE cluster = ? AND name = ? AND stopped_at IS NULL`).run(at, cluster, name);
  }

  /** How long the deployment's last successful boot took, in seconds. */
  lastBootSeconds(cluster: string, name: string): number | undefined {
    const row = this.db
      .prepare(`SELECT (julianday(ended_at) - julianday(started_at)) * 86400 AS s FROM boots WHERE cluster = ? AND deployment = ? AND outcome = 'ready' ORDER BY id DESC LIMIT 1`)
      .get(cluster, name) as { s: number | null } | undefined;
    return row?.s ?? undefined;
  }

  beginRestart(r: NewRestart): number {
    const res = this.db
      .prepare(
        `INSERT INTO restarts (cluster, deployment, lane, attempt, reason, message, node, rank, cause, started_at)
         VALUES (@cluster, @deployment, @lane, @attempt, @reason, @message, @node, @rank, @cause, @started_at)`,
      )
      .run({ lane: null, node: null, rank: null, cause: null, ...r });
    return Number(res.lastInsertRowid);
  }

  endRestart(id: number, outcome: Exclude<RestartOutcome, "restarting">, at: string, error?: string): void {
    this.db.prepare(`UPDATE restarts SET ended_at = ?, outcome = ?, error = ? WHERE id = ?`).run(at, outcome, error ?? null, id);
  }

  /** Restarts, newest first; of one deployment when named. */
  restarts(deployment: string | undefined, limit: number): RestartRecord[] {
    return (this.db.prepare(`SELECT * FROM restarts WHERE (@d IS NULL OR deployment = @d) ORDER BY id DESC LIMIT @limit`).all({ d: deployment ?? null, limit }) as Row[]).map((r) => compact<RestartRecord>(r));
  }

  beginBootInProgress(b: NewBootInProgress): void {
    this.db
      .prepare(
        `INSERT OR REPLACE INTO boots_in_progress (boot, cluster, deployment, lane, plan, started_at, deadline_at, pid, host)
         VALUES (@boot, @cluster, @deployment, @lane, @plan, @started_at, @deadline_at, @pid, @host)`,
      )
      .run({ lane: null, ...b });
  }

  bootInProgressRecorded(boot: string, historyId: number): void {
    this.db.prepare(`UPDATE boots_in_progress SET history_id = ? WHERE boot = ?`).run(historyId, boot);
  }

  endBootInProgress(boot: string): void {
    this.db.prepare(`DELETE FROM boots_in_progress WHERE boot = ?`).run(boot);
  }

  bootsInProgress(): BootInProgress[] {
    return (this.db.prepare(`SELECT * FROM boots_in_progress ORDER BY started_at, boot`).all() as Row[]).map((r) => compact<BootInProgress>(r));
  }

  /**
   * This process watches the boot from now on, if it still belongs to `from` (the process that
   * died): of two daemons started at once, one wins.
   */
  takeBootInProgress(boot: string, from: { pid: number; host: string }, to: { pid: number; host: string }): boolean {
    return this.db.prepare(`UPDATE boots_in_progress SET pid = ?, host = ? WHERE boot = ? AND pid = ? AND host = ?`).run(to.pid, to.host, boot, from.pid, from.host).changes === 1;
  }

  /** Ends the restarts of a deployment still open (a restart whose boot a daemon adopted ended so). */
  endOpenRestarts(cluster: string, deployment: string, outcome: Exclude<RestartOutcome, "restarting">, at: string, error?: string): void {
    this.db.prepare(`UPDATE restarts SET ended_at = ?, outcome = ?, error = ? WHERE cluster = ? AND deployment = ? AND outcome = 'restarting'`).run(at, outcome, error ?? null, cluster, deployment);
  }

  /** What doctor or up last detected on each node of a cluster. */
  saveFacts(cluster: string, facts: ReadonlyMap<string, FabricFacts>, at: string): void {
    const put = this.db.prepare(`INSERT OR REPLACE INTO node_facts (cluster, node, facts, detected_at) VALUES (?, ?, ?, ?)`);
    this.db.transaction(() => {
      for (const [node, f] of facts) put.run(cluster, node, JSON.stringify(f), at);
    })();
  }

  facts(cluster: string): { facts: Map<string, FabricFacts>; detected_at?: string } {
    const rows = this.db.prepare(`SELECT node, facts, detected_at FROM node_facts WHERE cluster = ? ORDER BY node`).all(cluster) as { node: string; facts: string; detected_at: string }[];
    const at = rows.map((r) => r.detected_at).sort()[0];
    return { facts: new Map(rows.map((r) => [r.node, JSON.parse(r.facts) as FabricFacts])), ...(at === undefined ? {} : { detected_at: at }) };
  }

  /** Each node's memory as doctor read it (the fit check of `plan`). */
  saveMemory(cluster: string, memory: ReadonlyMap<string, Meminfo>, at: string): void {
    const put = this.db.prepare(`INSERT OR REPLACE INTO node_memory (cluster, node, meminfo, read_at) VALUES (?, ?, ?, ?)`);
    this.db.transaction(() => {
      for (const [node, m] of memory) put.run(cluster, node, JSON.stringify(m), at);
    })();
  }

  memory(cluster: string): Map<string, { meminfo: Meminfo; read_at: string }> {
    const rows = this.db.prepare(`SELECT node, meminfo, read_at FROM node_memory WHERE cluster = ?`).all(cluster) as { node: string; meminfo: string; read_at: string }[];
    return new Map(rows.map((r) => [r.node, { meminfo: JSON.parse(r.meminfo) as Meminfo, read_at: r.read_at }]));
  }

  /** A node's last memory sample while the daemon's guard watches `deployment` on it (what `status` shows). */
  saveWatchedMemory(cluster: string, node: string, deployment: string, sample: MemorySample, at: string): void {
    this.db.prepare(`INSERT OR REPLACE INTO memory_watch (cluster, node, deployment, total_kib, available_kib, at) VALUES (?, ?, ?, ?, ?, ?)`).run(cluster, node, deployment, sample.totalKiB, sample.availableKiB, at);
  }

  /** Each node's last watched sample on a cluster, with the deployment it was watched for and when. */
  watchedMemory(cluster: string): Map<string, WatchedMemory> {
    const rows = this.db.prepare(`SELECT node, deployment, total_kib, available_kib, at FROM memory_watch WHERE cluster = ?`).all(cluster) as { node: string; deployment: string; total_kib: number; available_kib: number; at: string }[];
    return new Map(rows.map((r) => [r.node, { deployment: r.deployment, sample: { totalKiB: r.total_kib, availableKiB: r.available_kib }, at: r.at }]));
  }

  /** The daemon found `deployment` wedged (a StoredWedge), or (undefined) no longer: generating again, or not watched. */
  saveWedge(cluster: string, deployment: string, wedge: StoredWedge | undefined): void {
    if (wedge === undefined) this.db.prepare(`DELETE FROM wedged WHERE cluster = ? AND deployment = ?`).run(cluster, deployment);
    else this.db.prepare(`INSERT OR REPLACE INTO wedged (cluster, deployment, boot, since, message, at) VALUES (?, ?, ?, ?, ?, ?)`).run(cluster, deployment, wedge.boot, wedge.since, wedge.message, wedge.at);
  }

  /** The deployments of a cluster the daemon last found wedged, by name. */
  wedges(cluster: string): Map<string, StoredWedge> {
    const rows = this.db.prepare(`SELECT deployment, boot, since, message, at FROM wedged WHERE cluster = ?`).all(cluster) as (StoredWedge & { deployment: string })[];
    return new Map(rows.map(({ deployment, ...w }) => [deployment, w]));
  }

  /** A node outage begins (its end is written by endOutage). */
  saveOutage(o: NodeOutageRecord): void {
    this.db
      .prepare(`INSERT INTO node_outages (cluster, node, kind, since, ended_at, deployments, memory) VALUES (?, ?, ?, ?, ?, ?, ?)`)
      .run(o.cluster, o.node, o.kind, o.since, o.ended_at ?? null, JSON.stringify(o.deployments), o.memory === undefined ? null : JSON.stringify(o.memory));
  }

  /** The node answers again: every outage of it still open ends now, with the kind it ended as. */
  endOutage(cluster: string, node: string, kind: OutageKind, at: string): void {
    this.db.prepare(`UPDATE node_outages SET ended_at = ?, kind = ? WHERE cluster = ? AND node = ? AND ended_at IS NULL`).run(at, kind, cluster, node);
  }

  /** What the node's guard said of its outage that began at `since` (read once it answered again). */
  saveOutageCause(cluster: string, node: string, since: string, cause: OutageCause): void {
    this.db.prepare(`UPDATE node_outages SET cause = ? WHERE cluster = ? AND node = ? AND since = ?`).run(JSON.stringify(cause), cluster, node, since);
  }

  /** A trip of a node's own guard, read by the daemon: false when this trip was recorded already. */
  saveNodeGuardTrip(t: NodeGuardTripRecord): boolean {
    const r = this.db
      .prepare(`INSERT OR IGNORE INTO node_guard_trips (cluster, deployment, boot, node, at, available_kib, floor_kib, killed, stopped, unreached, message, read_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(t.cluster, t.deployment, t.boot, t.node, t.at, t.available_kib, t.floor_kib, t.killed, JSON.stringify(t.stopped), JSON.stringify(t.unreached), t.message, t.read_at);
    return r.changes > 0;
  }

  /** What the daemon did on the other nodes after a trip it recorded. */
  saveNodeGuardKills(t: Pick<NodeGuardTripRecord, "cluster" | "deployment" | "node" | "at" | "stopped" | "unreached">): void {
    this.db.prepare(`UPDATE node_guard_trips SET stopped = ?, unreached = ? WHERE cluster = ? AND deployment = ? AND node = ? AND at = ?`).run(JSON.stringify(t.stopped), JSON.stringify(t.unreached), t.cluster, t.deployment, t.node, t.at);
  }

  /** The nodes' own guards' trips, newest first: of one cluster (and deployment), or of all. */
  nodeGuardTrips(cluster: string | undefined, deployment: string | undefined, limit: number): NodeGuardTripRecord[] {
    const rows = this.db
      .prepare(`SELECT cluster, deployment, boot, node, at, available_kib, floor_kib, killed, stopped, unreached, message, read_at FROM node_guard_trips WHERE (? IS NULL OR cluster = ?) AND (? IS NULL OR deployment = ?) ORDER BY at DESC, id DESC LIMIT ?`)
      .all(cluster ?? null, cluster ?? null, deployment ?? null, deployment ?? null, limit) as (Omit<NodeGuardTripRecord, "stopped" | "unreached"> & { stopped: string; unreached: string })[];
    return rows.map((r) => ({ ...r, stopped: JSON.parse(r.stopped) as string[], unreached: JSON.parse(r.unreached) as string[] }));
  }

  /** Node outages, newest first: of one cluster, or of all. */
  outages(cluster: string | undefined, limit: number): NodeOutageRecord[] {
    const rows = this.db
      .prepare(`SELECT cluster, node, kind, since, ended_at, deployments, memory, cause FROM node_outages WHERE ? IS NULL OR cluster = ? ORDER BY since DESC, id DESC LIMIT ?`)
      .all(cluster ?? null, cluster ?? null, limit) as { cluster: string; node: string; kind: OutageKind; since: string; ended_at: string | null; deployments: string; memory: string | null; cause: string | null }[];
    return rows.map((r) => ({
      cluster: r.cluster,
      node: r.node,
      kind: r.kind,
      since: r.since,
      ...(r.ended_at === null ? {} : { ended_at: r.ended_at }),
      deployments: JSON.parse(r.deployments) as NodeOutageRecord["deployments"],
      ...(r.memory === null ? {} : { memory: JSON.parse(r.memory) as NonNullable<NodeOutageRecord["memory"]> }),
      ...(r.cause === null ? {} : { cause: JSON.parse(r.cause) as OutageCause }),
    }));
  }

  /** A trip of the guard after ready: the deployment was killed on every node. */
  saveMemoryTrip(trip: MemoryTripRecord): void {
    this.db
      .prepare(`INSERT INTO memory_trips (cluster, deployment, node, phase, culprit, message, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(trip.cluster, trip.deployment, trip.node, trip.phase, trip.culprit, trip.message, JSON.stringify(trip.detail), trip.at);
  }

  /** A deployment's trips, newest first. */
  memoryTrips(cluster: string, deployment: string, limit: number): MemoryTripRecord[] {
    const rows = this.db.prepare(`SELECT cluster, deployment, node, phase, culprit, message, detail, at FROM memory_trips WHERE cluster = ? AND deployment = ? ORDER BY id DESC LIMIT ?`).all(cluster, deployment, limit) as (Omit<MemoryTripRecord, "detail"> & { detail: string })[];
    return rows.map((r) => ({ ...r, detail: JSON.parse(r.detail) as string[] }));
  }

  /** The size of a model's snapshot on each node, as preflight read it (the weights of `plan`'s fit). */
  saveWeights(cluster: string, model: string, bytes: ReadonlyMap<string, number>, at: string): void {
    const put = this.db.prepare(`INSERT OR REPLACE INTO node_weights (cluster, node, model, bytes, read_at) VALUES (?, ?, ?, ?, ?)`);
    this.db.transaction(() => {
      for (const [node, b] of bytes) put.run(cluster, node, model, b, at);
    })();
  }

  weights(cluster: string, model: string): Map<string, number> {
    const rows = this.db.prepare(`SELECT node, bytes FROM node_weights WHERE cluster = ? AND model = ?`).all(cluster, model) as { node: string; bytes: number }[];
    return new Map(rows.map((r) => [r.node, r.bytes]));
  }

  /** What was read of an image, by its ID (an ID names one exact content, so it never goes stale). */
  imageFacts(imageId: string): ImageFacts | undefined {
    const row = this.db.prepare(`SELECT facts FROM image_facts WHERE image_id = ?`).get(imageId) as { facts: string } | undefined;
    return row === undefined ? undefined : (JSON.parse(row.facts) as ImageFacts);
  }

  saveImageFacts(imageId: string, facts: ImageFacts, at: string): void {
    this.db.prepare(`INSERT OR REPLACE INTO image_facts (image_id, facts, read_at) VALUES (?, ?, ?)`).run(imageId, JSON.stringify(facts), at);
  }

  /**
   * Takes every key or none, atomically across processes. A key held by a process of this host
   * that no longer lives is taken over; `isAlive` is how that is checked.
   */
  acquire(keys: readonly string[], owner: LockOwner, at: string, isAlive: (pid: number) => boolean): { ok: true } | { ok: false; holder: LockHolder } {
    return this.db.transaction((): { ok: true } | { ok: false; holder: LockHolder } => {
      const get = this.db.prepare(`SELECT * FROM locks WHERE key = ?`);
      for (const key of keys) {
        const held = get.get(key) as LockHolder | undefined;
        if (held === undefined) continue;
        const stale = held.host === owner.host && (held.pid === owner.pid || !isAlive(held.pid));
        if (!stale) return { ok: false, holder: held };
      }
      const put = this.db.prepare(`INSERT OR REPLACE INTO locks (key, pid, host, what, acquired_at) VALUES (?, ?, ?, ?, ?)`);
      for (const key of keys) put.run(key, owner.pid, owner.host, owner.what, at);
      return { ok: true };
    }).immediate();
  }

  lockHolder(key: string): LockHolder | undefined {
    return this.db.prepare(`SELECT * FROM locks WHERE key = ?`).get(key) as LockHolder | undefined;
  }

  release(keys: readonly string[], owner: LockOwner): void {
    const del = this.db.prepare(`DELETE FROM locks WHERE key = ? AND pid = ? AND host = ?`);
    this.db.transaction(() => {
      for (const key of keys) del.run(key, owner.pid, owner.host);
    })();
  }

  /**
   * Appends the gateway's records (oldest first) in one transaction, then drops all but the newest
   * `keep` rows: the table stays bounded however long the daemon serves.
   */
  /**
   * Writes the records, or returns false at once when another process holds the store's write lock
   * (the caller keeps them for its next flush): the daemon's loop, which serves every stream, never
   * waits out the busy timeout for its activity log. Busy is told by SQLite's code, SQLITE_BUSY.
   */
  saveActivity(records: readonly ActivityRecord[], keep: number): boolean {
    if (records.length === 0) return true;
    const put = this.db.prepare(`INSERT INTO activity (t, record) VALUES (?, ?)`);
    // One thread: nothing else uses the connection while its busy timeout is 0.
    this.db.pragma("busy_timeout = 0");
    try {
      this.db.transaction(() => {
        let last = 0;
        for (const r of records) last = Number(put.run(r.t, JSON.stringify(r)).lastInsertRowid);
        // AUTOINCREMENT ids only grow (https://www.sqlite.org/autoinc.html), so the newest `keep`
        // rows are those above last - keep: a range of the primary key, not a count of the table
        // (OFFSET would step through every kept row, on the daemon's loop, each flush).
        this.db.prepare(`DELETE FROM activity WHERE id <= ?`).run(last - Math.max(0, Math.floor(keep)));
      })();
      return true;
    } catch (e) {
      if ((e as { code?: unknown }).code === "SQLITE_BUSY") return false;
      throw e;
    } finally {
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  /** The newest `limit` records, newest first. */
  activity(limit: number): ActivityRecord[] {
    const rows = this.db.prepare(`SELECT record FROM activity ORDER BY id DESC LIMIT ?`).pluck().all(limit) as string[];
    return rows.map((r) => JSON.parse(r) as ActivityRecord);
  }

  saveBenchRun(run: BenchRun): void {
    this.db
      .prepare(`INSERT INTO bench_runs (id, series, run, target, deployment, recipe, started_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
      .run(run.id, run.series, run.run, run.subject.target, run.subject.deployment ?? null, run.subject.recipe ?? null, run.started_at, JSON.stringify(run));
  }

  benchRuns(query: RunQuery): BenchRun[] {
    return this.runs("bench_runs", query, query.series === undefined ? [] : [["series", query.series]]).map(benchRunFromStored);
  }

  saveEvalRun(run: EvalRun): void {
    this.db
      .prepare(`INSERT INTO eval_runs (id, target, deployment, recipe, set_sha256, started_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)`)
      .run(run.id, run.subject.target, run.subject.deployment ?? null, run.subject.recipe ?? null, run.set.sha256, run.started_at, JSON.stringify(run));
  }

  evalRuns(query: RunQuery): EvalRun[] {
    return this.runs("eval_runs", query, []) as EvalRun[];
  }

  /** The stored runs a query names, newest first: the filters are columns, never text put into SQL. */
  private runs(table: "bench_runs" | "eval_runs", query: RunQuery, extra: ReadonlyArray<readonly [string, string]>): unknown[] {
    const filters: Array<readonly [string, string]> = [...extra];
    for (const column of ["id", "target", "deployment", "recipe"] as const) {
      const value = query[column];
      if (value !== undefined) filters.push([column, value]);
    }
    const where = filters.length === 0 ? "" : `WHERE ${filters.map(([c]) => `${c} = ?`).join(" AND ")}`;
    const rows = this.db
      .prepare(`SELECT body FROM ${table} ${where} ORDER BY started_at DESC, rowid DESC LIMIT ?`)
      .pluck()
      .all(...filters.map(([, v]) => v), query.limit ?? -1) as string[];
    return rows.map((body) => JSON.parse(body) as unknown);
  }
}
