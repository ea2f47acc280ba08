/**
 * Each entry moves the database one version up (PRAGMA user_version). Append only: a released
 * migration is never edited, so every store opens the same way on every machine.
 */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE boots (
     id INTEGER PRIMARY KEY,
     deployment TEXT NOT NULL,
     recipe TEXT NOT NULL,
     recipe_hash TEXT NOT NULL,
     lane TEXT,
     cluster TEXT NOT NULL,
     served_model TEXT NOT NULL,
     endpoint TEXT NOT NULL,
     nodes TEXT NOT NULL,
     started_at TEXT NOT NULL,
     ended_at TEXT,
     outcome TEXT NOT NULL DEFAULT 'booting',
     failed_node TEXT,
     error TEXT
   );
   CREATE INDEX boots_recipe ON boots (recipe, started_at);
   CREATE TABLE boot_phases (
     boot_id INTEGER NOT NULL REFERENCES boots (id) ON DELETE CASCADE,
     node TEXT NOT NULL,
     phase TEXT NOT NULL,
     started_at TEXT NOT NULL,
     ended_at TEXT,
     figures TEXT NOT NULL DEFAULT '{}',
     PRIMARY KEY (boot_id, node, phase)
   );
   CREATE TABLE deployments (
     cluster TEXT NOT NULL,
     name TEXT NOT NULL,
     recipe TEXT NOT NULL,
     recipe_hash TEXT NOT NULL,
     lane TEXT,
     served_model TEXT NOT NULL,
     endpoint TEXT NOT NULL,
     nodes TEXT NOT NULL,
     boot_id INTEGER REFERENCES boots (id),
     ready_at TEXT NOT NULL,
     stopped_at TEXT,
     PRIMARY KEY (cluster, name)
   );
   CREATE TABLE lanes (
     name TEXT PRIMARY KEY,
     cluster TEXT NOT NULL,
     deployment TEXT,
     recipe TEXT,
     served_model TEXT,
     state TEXT NOT NULL,
     switching_to TEXT,
     since TEXT NOT NULL
   );
   CREATE TABLE lane_swaps (
     id INTEGER PRIMARY KEY,
     lane TEXT NOT NULL,
     mode TEXT NOT NULL,
     from_deployment TEXT,
     from_recipe TEXT,
     to_deployment TEXT NOT NULL,
     to_recipe TEXT NOT NULL,
     started_at TEXT NOT NULL,
     ended_at TEXT,
     outcome TEXT NOT NULL DEFAULT 'running',
     error TEXT
   );
   CREATE TABLE locks (
     key TEXT PRIMARY KEY,
     pid INTEGER NOT NULL,
     host TEXT NOT NULL,
     what TEXT NOT NULL,
     acquired_at TEXT NOT NULL
   );`,
  `CREATE TABLE node_facts (
     cluster TEXT NOT NULL,
     node TEXT NOT NULL,
     facts TEXT NOT NULL,
     detected_at TEXT NOT NULL,
     PRIMARY KEY (cluster, node)
   );`,
  // The key a deployment's engine demands (--api-key / VLLM_API_KEY in its recipe), kept where
  // the gateway and a lane's drain find it for the running deployment; never printed.
  `ALTER TABLE deployments ADD COLUMN api_key TEXT;`,
  // What an engine image is (entrypoint, engine version), read once per image ID; the engine
  // version each boot ran.
  `CREATE TABLE image_facts (
     image_id TEXT PRIMARY KEY,
     facts TEXT NOT NULL,
     read_at TEXT NOT NULL
   );
   ALTER TABLE boots ADD COLUMN engine_version TEXT;`,
  // Supervision (up --restart): the plan a deployment was booted from, so that the daemon can boot
  // it again (it holds the engine key too: the store is its owner's alone), and every restart of a
  // group with what killed it.
  `CREATE TABLE deployment_plans (
     cluster TEXT NOT NULL,
     name TEXT NOT NULL,
     plan TEXT NOT NULL,
     saved_at TEXT NOT NULL,
     PRIMARY KEY (cluster, name)
   );
   CREATE TABLE restarts (
     id INTEGER PRIMARY KEY,
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     lane TEXT,
     attempt INTEGER NOT NULL,
     reason TEXT NOT NULL,
     message TEXT NOT NULL,
     node TEXT,
     rank INTEGER,
     cause TEXT,
     started_at TEXT NOT NULL,
     ended_at TEXT,
     outcome TEXT NOT NULL DEFAULT 'restarting',
     error TEXT
   );
   CREATE INDEX restarts_deployment ON restarts (cluster, deployment, id);
   ALTER TABLE deployments ADD COLUMN stopping_at TEXT;`,
  // The boots a daemon runs, from just before their first container starts until they end: the
  // plan as it runs (stamped with its launcher.boot id), its history row, its deadline and the
  // daemon's process. A daemon started after that one died adopts them (src/daemon/adopt.ts).
  `CREATE TABLE boots_in_progress (
     boot TEXT PRIMARY KEY,
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     lane TEXT,
     plan TEXT NOT NULL,
     history_id INTEGER REFERENCES boots (id),
     started_at TEXT NOT NULL,
     deadline_at TEXT NOT NULL,
     pid INTEGER NOT NULL,
     host TEXT NOT NULL
   );`,
  // The evidence of an A/B (src/contract/evidence.ts): each bench and eval run whole, as JSON,
  // with the columns a query filters on beside it.
  `CREATE TABLE bench_runs (
     id TEXT PRIMARY KEY,
     series TEXT NOT NULL,
     run INTEGER NOT NULL,
     target TEXT NOT NULL,
     deployment TEXT,
     recipe TEXT,
     started_at TEXT NOT NULL,
     body TEXT NOT NULL
   );
   CREATE INDEX bench_runs_series ON bench_runs (series, run);
   CREATE TABLE eval_runs (
     id TEXT PRIMARY KEY,
     target TEXT NOT NULL,
     deployment TEXT,
     recipe TEXT,
     set_sha256 TEXT NOT NULL,
     started_at TEXT NOT NULL,
     body TEXT NOT NULL
   );`,
  // Each node's /proc/meminfo as doctor last read it, and the size of a model's snapshot on each
  // node as up's preflight last read it: `plan` prints the memory fit from them.
  `CREATE TABLE node_memory (
     cluster TEXT NOT NULL,
     node TEXT NOT NULL,
     meminfo TEXT NOT NULL,
     read_at TEXT NOT NULL,
     PRIMARY KEY (cluster, node)
   );
   CREATE TABLE node_weights (
     cluster TEXT NOT NULL,
     node TEXT NOT NULL,
     model TEXT NOT NULL,
     bytes INTEGER NOT NULL,
     read_at TEXT NOT NULL,
     PRIMARY KEY (cluster, node, model)
   );`,
  // 9: the memory guard (src/memory/guard.ts): each node's least available memory in each phase
  // of a boot (its peak use), and the total it was out of, in KiB as /proc/meminfo gives them.
  `ALTER TABLE boot_phases ADD COLUMN min_available_kib INTEGER;
   ALTER TABLE boot_phases ADD COLUMN total_kib INTEGER;`,
  // 10: the memory guard after ready (src/supervise/ready-guard.ts, run by the daemon): each node's
  // last sample while a deployment on it is watched (what `status` shows), and every trip.
  `CREATE TABLE memory_watch (
     cluster TEXT NOT NULL,
     node TEXT NOT NULL,
     deployment TEXT NOT NULL,
     total_kib INTEGER NOT NULL,
     available_kib INTEGER NOT NULL,
     at TEXT NOT NULL,
     PRIMARY KEY (cluster, node)
   );
   CREATE TABLE memory_trips (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     node TEXT NOT NULL,
     phase TEXT NOT NULL,
     culprit TEXT NOT NULL,
     message TEXT NOT NULL,
     detail TEXT NOT NULL,
     at TEXT NOT NULL
   );`,
  // 11: the launcher.boot id each deployment was last launched with, written just before its first
  // container starts (src/boot/launch.ts): a container whose labels name the deployment but
  // carry another id is not that deployment's (src/claims/ownership.ts). Boots a daemon left in
  // progress carry theirs already; a deployment serving before it gets '' (UNRECORDED_LAUNCH): the
  // first launch the daemon sees of it is taken as its own, once.
  `CREATE TABLE launched_boots (
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     boot TEXT NOT NULL,
     at TEXT NOT NULL,
     PRIMARY KEY (cluster, deployment)
   );
   INSERT OR REPLACE INTO launched_boots (cluster, deployment, boot, at) SELECT cluster, deployment, boot, started_at FROM boots_in_progress;
   INSERT OR IGNORE INTO launched_boots (cluster, deployment, boot, at) SELECT cluster, name, '', ready_at FROM deployments WHERE stopped_at IS NULL;`,
  // 12: the gateway's activity log (src/gateway/activity-log.ts): each request through it, as its
  // record (src/contract/read-api.ts ActivityRecord: never a key, never a body) and its time;
  // only the newest rows are kept (Store.saveActivity).
  `CREATE TABLE activity (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     t INTEGER NOT NULL,
     record TEXT NOT NULL
   );`,
  // 13: the key a launch's engine demands, from its start (a secret, like deployments.api_key): the
  // read API redacts it from a booting deployment's logs, before the deployment is ready.
  `ALTER TABLE launched_boots ADD COLUMN api_key TEXT;`,
  // 14: the deployments the daemon's generation watch finds wedged now (src/supervise/generation-watch.ts):
  // /health answers but no generation completes. Written when one becomes wedged, removed when it
  // generates again or is no longer watched; `status` shows it while its launch still runs.
  `CREATE TABLE wedged (
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     boot TEXT NOT NULL,
     since TEXT NOT NULL,
     message TEXT NOT NULL,
     at TEXT NOT NULL,
     PRIMARY KEY (cluster, deployment)
   );`,
  // 15: nodes that stopped answering while launcher's ranks ran there (src/nodes/outage.ts), as the
  // daemon's discovery found them: open while ended_at is NULL. deployments is JSON (RanBefore[]),
  // memory the node's last sample before it (JSON, or NULL when none was known).
  `CREATE TABLE node_outages (
     id INTEGER PRIMARY KEY,
     cluster TEXT NOT NULL,
     node TEXT NOT NULL,
     kind TEXT NOT NULL,
     since TEXT NOT NULL,
     ended_at TEXT,
     deployments TEXT NOT NULL,
     memory TEXT
   );
   CREATE INDEX node_outages_open ON node_outages (cluster, node, ended_at);`,
  // 16: the trips of the nodes' own guards (src/contract/node-guard-trip.ts) the daemon read, one
  // row per trip (a trip read twice, by a death and by a poll, is one); stopped and unreached are
  // JSON arrays of nodes. An outage's cause, read from the node's guard once it answered again
  // (JSON OutageCause, src/contract/outage.ts; NULL: none known).
  `CREATE TABLE node_guard_trips (
     id INTEGER PRIMARY KEY,
     cluster TEXT NOT NULL,
     deployment TEXT NOT NULL,
     boot TEXT NOT NULL,
     node TEXT NOT NULL,
     at TEXT NOT NULL,
     available_kib INTEGER NOT NULL,
     floor_kib INTEGER NOT NULL,
     killed INTEGER NOT NULL,
     stopped TEXT NOT NULL,
     unreached TEXT NOT NULL,
     message TEXT NOT NULL,
     read_at TEXT NOT NULL,
     UNIQUE (cluster, deployment, node, at)
   );
   ALTER TABLE node_outages ADD COLUMN cause TEXT;`,
];
