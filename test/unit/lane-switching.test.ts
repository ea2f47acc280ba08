import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { laneKey } from "../../src/claims/locks.js";
import type { KnownDeployment, RouteTable } from "../../src/gateway/routes.js";
import { RouteCache, SWITCHING_RECHECK_MS } from "../../src/daemon/route-cache.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { Store } from "../../src/store/store.js";

// A lane the store marks "switching" whose `up` died (killed: its lane lock's holder is no live
// process) is routed as serving what it names; one whose `up` still runs answers 503 switching.
// The store as an `up` leaves it, the lane lock as the store keeps it, the routes as the daemon's
// route cache makes them (src/daemon/route-cache.ts).

const dir = mkdtempSync(path.join(tmpdir(), "launcher-lane-switching-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const old: KnownDeployment = {
  cluster: "c",
  deployment: "old",
  lane: "main",
  recipe: "r-old",
  recipe_hash: "h",
  served_model: "old-model",
  endpoint: "http://n1:8000",
  status: "serving",
  phase: "serving",
  uptime_seconds: 100,
  missing: [],
  unreachable: [],
  ranks: [{ rank: 0, node: "n1", container: "launcher-old-r0", state: "running", started_at: "t" }],
};

/** The daemon's route cache over `store`, one discovery snapshot (old serving) and a clock the test moves. */
function routesOver(store: Store): { resolveMain: () => ReturnType<RouteTable["resolve"]>; later: (ms: number) => void } {
  let now = 1_000_000;
  const snapshot: Snapshot = { deployments: [old], strangers: [], unreachable: [] };
  const cache = new RouteCache({
    store,
    discovery: { snapshot: () => snapshot, refreshSoon: () => undefined },
    supervisor: { version: 0, restarting: () => [] },
    snapshotSeen: () => undefined,
    tableMade: () => undefined,
    now: () => now,
  });
  return { resolveMain: () => cache.routes().resolve("main"), later: (ms) => void (now += ms) };
}

/** A pid of this host that no process has now: a child that has exited. */
const deadPid = (): number => {
  const r = spawnSync(process.execPath, ["-e", "0"]);
  assert.ok(r.pid !== undefined && r.status === 0);
  return r.pid;
};

test("a lane left switching by an up that died routes to what it served; while its up runs it answers 503 switching; an up that dies meanwhile is noticed", () => {
  const store = new Store(path.join(dir, "launcher.db"));
  try {
    const before = { name: "main", cluster: "c", deployment: "old", recipe: "r-old", served_model: "old-model", state: "serving" as const, since: "2026-01-01T00:00:00.000Z" };
    store.setLane(before);
    const at = new Date().toISOString();

    // As a killed up leaves it: marked switching, its lane lock held by a pid that is gone.
    const dead = { pid: deadPid(), host: hostname(), what: "launcher up (killed)" };
    assert.equal(store.acquire([laneKey("main")], dead, at, () => true).ok, true);
    store.setLane({ ...before, state: "switching", switching_to: "never-started", since: at });
    const { resolveMain } = routesOver(store);
    const stale = resolveMain();
    assert.equal(stale.kind === "route" ? stale.target.deployment : stale.kind, "old");
    assert.equal(store.lane("main")?.state, "switching", "the store's record is left as it is: routing reads past it");
    store.release([laneKey("main")], dead);

    // A live up holds the lane's lock: the switch is real.
    const me = { pid: process.pid, host: hostname(), what: "launcher up (this test)" };
    assert.equal(store.acquire([laneKey("main")], me, at, () => true).ok, true);
    store.setLane({ ...before, state: "switching", switching_to: "on-its-way", since: at });
    const live = routesOver(store);
    const switching = live.resolveMain();
    assert.equal(switching.kind === "unavailable" ? switching.code : switching.kind, "lane_switching");
    assert.match(switching.kind === "unavailable" ? switching.message : "", /^lane main is switching from old to on-its-way/);

    // That up dies (its lock's holder now a pid that is gone, the store unchanged otherwise):
    // noticed at the next look, a second on, with no write to the store to wake it.
    store.release([laneKey("main")], me);
    assert.equal(store.acquire([laneKey("main")], dead, at, () => true).ok, true);
    live.later(SWITCHING_RECHECK_MS + 1);
    const after = live.resolveMain();
    assert.equal(after.kind === "route" ? after.target.deployment : after.kind, "old");
    store.release([laneKey("main")], dead);
  } finally {
    store.close();
  }
});
