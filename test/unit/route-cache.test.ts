import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { laneKey } from "../../src/claims/locks.js";
import { Store, type LaneRecord } from "../../src/store/store.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { lanesAsServed, RouteCache } from "../../src/daemon/route-cache.js";

// The daemon's route cache over a store file that another connection (an `up`) writes: the table is
// kept while nothing changed, and made again when the store, the labels or the supervisor did.

/** A pid no process has: above Linux's largest pid_max, 2^22 (kernel/pid.c PID_MAX_LIMIT). */
const NO_PROCESS = 2 ** 22 + 1;

const lane = (name: string, state: LaneRecord["state"]): LaneRecord => ({ name, cluster: "lab", deployment: `${name}-old`, recipe: "r", served_model: "m", state, since: "2026-01-01T00:00:00Z", ...(state === "switching" ? { switching_to: `${name}-new` } : {}) });

function stores(): { daemon: Store; up: Store; done: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-route-cache-"));
  const file = path.join(dir, "launcher.db");
  const up = new Store(file);
  const daemon = new Store(file);
  return { daemon, up, done: () => (up.close(), daemon.close(), rmSync(dir, { recursive: true, force: true })) };
}

test("a lane left switching by an up that died is served as it was; one whose up lives, or runs on another host, is switching", () => {
  const { daemon, up, done } = stores();
  try {
    up.setLane(lane("dead", "switching"));
    up.setLane(lane("live", "switching"));
    up.setLane(lane("away", "switching"));
    up.setLane(lane("calm", "serving"));
    const at = "2026-01-01T00:00:00Z";
    assert.deepEqual(up.acquire([laneKey("dead")], { pid: NO_PROCESS, host: hostname(), what: "up" }, at, () => true), { ok: true });
    assert.deepEqual(up.acquire([laneKey("live")], { pid: process.pid, host: hostname(), what: "up" }, at, () => true), { ok: true });
    assert.deepEqual(up.acquire([laneKey("away")], { pid: NO_PROCESS, host: "another-machine", what: "up" }, at, () => true), { ok: true });
    const states = Object.fromEntries(lanesAsServed(daemon).map((l) => [l.name, l.state]));
    assert.deepEqual(states, { away: "switching", calm: "serving", dead: "serving", live: "switching" });
  } finally {
    done();
  }
});

test("the route table is kept while nothing changed; a lane written, a new snapshot or a supervisor change makes it again", () => {
  const { daemon, up, done } = stores();
  try {
    let snapshot: Snapshot = { deployments: [], strangers: [], unreachable: [] };
    const supervisor = { version: 0, restarting: () => [] };
    const heard = { refresh: 0, snapshots: 0, tables: 0 };
    let now = 0;
    const cache = new RouteCache({
      store: daemon,
      discovery: { snapshot: () => snapshot, refreshSoon: () => void heard.refresh++ },
      supervisor,
      snapshotSeen: () => void heard.snapshots++,
      tableMade: () => void heard.tables++,
      now: () => now,
    });
    const first = cache.routes();
    assert.equal(cache.routes(), first, "nothing changed: the same table");
    assert.deepEqual(heard, { refresh: 0, snapshots: 0, tables: 1 });

    up.setLane(lane("chat", "serving"));
    const second = cache.routes();
    assert.notEqual(second, first);
    assert.deepEqual(heard, { refresh: 1, snapshots: 0, tables: 2 }, "a lane changed: the labels are read again soon");

    // The daemon's own writes that are not lanes (the memory guard's samples, every few seconds
    // per node) neither rebuild the table nor make discovery poll before its interval.
    daemon.saveWatchedMemory("lab", "n1", "chat-old", { totalKiB: 100, availableKiB: 50 }, "2026-01-01T00:00:01Z");
    assert.equal(cache.routes(), second);
    assert.deepEqual(heard, { refresh: 1, snapshots: 0, tables: 2 }, "no lane changed: no poll, the same table");

    snapshot = { ...snapshot, at: new Date(0) };
    const third = cache.routes();
    assert.notEqual(third, second);
    assert.deepEqual(heard, { refresh: 1, snapshots: 1, tables: 3 });

    supervisor.version++;
    assert.notEqual(cache.routes(), third);
    assert.equal(heard.tables, 4);

    // A switching lane whose up lives is looked at again once a second, and nothing changes.
    up.acquire([laneKey("chat")], { pid: process.pid, host: hostname(), what: "up" }, "2026-01-01T00:00:00Z", () => true);
    up.setLane(lane("chat", "switching"));
    const switching = cache.routes();
    now += 500;
    assert.equal(cache.routes(), switching);
    now += 600;
    assert.equal(cache.routes(), switching, "looked at again: its up lives, so nothing changed");
  } finally {
    done();
  }
});

test("a switching lane whose up dies, with nothing written to the store, is served as it was at the next look", async () => {
  const { daemon, up, done } = stores();
  // The lane's `up`: a process of its own, so that it can die without a word to the store.
  const holder = spawn("sleep", ["60"], { stdio: "ignore" });
  try {
    const pid = holder.pid as number;
    assert.deepEqual(up.acquire([laneKey("chat")], { pid, host: hostname(), what: "up" }, "2026-01-01T00:00:00Z", () => true), { ok: true });
    up.setLane(lane("chat", "switching"));
    let now = 0;
    const snapshot: Snapshot = { deployments: [], strangers: [], unreachable: [] };
    const cache = new RouteCache({ store: daemon, discovery: { snapshot: () => snapshot, refreshSoon: () => undefined }, supervisor: { version: 0, restarting: () => [] }, snapshotSeen: () => undefined, tableMade: () => undefined, now: () => now });
    const switching = cache.routes();
    now += 1100;
    assert.equal(cache.routes(), switching, "looked at again: its up lives, so nothing changed");
    const exited = once(holder, "exit");
    holder.kill("SIGKILL");
    await exited;
    now += 500;
    assert.equal(cache.routes(), switching, "not looked at again before a second has passed");
    now += 600;
    assert.notEqual(cache.routes(), switching);
  } finally {
    holder.kill("SIGKILL");
    done();
  }
});
