import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { boot, damageBoots, storeWithBoots } from "./damaged-store.js";
import { guardStore, nextReopenWait, REOPEN_FIRST_MS, REOPEN_MOST_MS } from "../../src/store/guarded.js";
import { openStateStore } from "../../src/store/open.js";
import { Store, type StateStore } from "../../src/store/store.js";

// The daemon keeps one store for its life: a fault that passes (a lock, a disk freed, a damaged
// file replaced) must not leave it without one for good (issue 25).

const dir = mkdtempSync(path.join(tmpdir(), "launcher-store-reopen-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A store that gives up on a lock after 20 ms, not the 5 s a command waits: the test waits on nothing. */
function quickToGiveUp(store: Store): Store {
  (store as unknown as { db: Database.Database }).db.pragma("busy_timeout = 20");
  return store;
}

test("a lock another connection holds past the busy timeout, then lets go: the daemon's store answers as the stand-in meanwhile, then records again", () => {
  const file = path.join(dir, "busy", "launcher.db");
  storeWithBoots(file, 1);
  let t = 0;
  const said: string[] = [];
  const s = guardStore(quickToGiveUp(new Store(file)), file, (f) => said.push(`fault ${f.kind}`), {
    open: () => quickToGiveUp(new Store(file)),
    recovered: () => said.push("recovered"),
    clock: () => t,
  });
  const holder = new Database(file);
  holder.exec("BEGIN IMMEDIATE");
  try {
    assert.equal(s.beginBoot(boot(2)), 0, "the write that met the lock answers as the stand-in");
    assert.deepEqual(said, ["fault busy"]);
    assert.deepEqual(s.history(undefined, 10), [], "reads empty while out of use");
    assert.equal(s.fault()?.kind, "busy");
    t = REOPEN_FIRST_MS - 1;
    assert.deepEqual(s.history(undefined, 10), [], "not tried again before the wait is over");
  } finally {
    holder.exec("ROLLBACK");
    holder.close();
  }
  t = REOPEN_FIRST_MS;
  assert.equal(s.history(undefined, 10).length, 1, "opened again: the boot recorded before the lock is read");
  assert.deepEqual(said, ["fault busy", "recovered"]);
  assert.equal(s.fault(), undefined);
  assert.ok(s.beginBoot(boot(3)) > 0, "and written");
  assert.equal(s.history(undefined, 10).length, 2);
  s.close();
  const check = new Store(file);
  assert.equal(check.history(undefined, 10).length, 2);
  check.close();
});

test("tries to open again are spaced out, doubling up to a bound; a fault after a recovery is said again", () => {
  const faultOf = (code: string): Error => new Database.SqliteError(`failed (${code})`, code);
  let t = 0;
  let opens = 0;
  const tries: number[] = [];
  let refuse = 3;
  const failing = (): StateStore =>
    Object.assign(new Store(":memory:"), {
      lanes: () => {
        throw faultOf("SQLITE_IOERR_READ");
      },
    });
  const said: string[] = [];
  const s = guardStore(failing(), "/s/launcher.db", (f) => said.push(`fault ${f.kind}`), {
    open: () => {
      tries.push(t);
      opens++;
      if (refuse-- > 0) throw faultOf("SQLITE_FULL");
      return failing();
    },
    recovered: () => said.push("recovered"),
    clock: () => t,
  });
  assert.deepEqual(s.lanes(), []);
  for (t = 0; t <= 20_000; t += 250) s.dataVersion();
  assert.deepEqual(tries, [1000, 3000, 7000, 15000], "1 s, then 2, 4, 8 s after each failed try");
  assert.deepEqual(said, ["fault io", "recovered"], "a failed try is silent");
  assert.deepEqual(s.lanes(), []);
  assert.deepEqual(said, ["fault io", "recovered", "fault io"], "the next fault is a new episode");
  assert.equal(opens, 4);
  // Failing again at once after it was opened (a disk that opens but cannot write): the wait goes
  // on doubling, so the store is not opened, nor its fault said, every second.
  const back = t;
  for (; t <= back + 16_000; t += 250) s.dataVersion();
  assert.deepEqual(tries.slice(4), [back + 16_000]);
  assert.equal(opens, 5);
  assert.equal(nextReopenWait(REOPEN_MOST_MS), REOPEN_MOST_MS);
  s.close();
  t += 60_000;
  s.lanes();
  assert.equal(opens, 5, "closed: never opened again");
});

test("a bug while opening again is not taken for a store fault", () => {
  let t = 0;
  const s = guardStore(
    Object.assign(new Store(":memory:"), {
      lanes: () => {
        throw new Database.SqliteError("locked", "SQLITE_BUSY");
      },
    }),
    "/s/launcher.db",
    () => undefined,
    {
      open: () => {
        throw new TypeError("a bug");
      },
      recovered: () => undefined,
      clock: () => t,
    },
  );
  assert.deepEqual(s.lanes(), []);
  t = REOPEN_FIRST_MS;
  assert.throws(() => s.lanes(), TypeError);
});

test("a store damaged while the daemon uses it: set aside, a new one opened, and the daemon records in it", () => {
  const file = path.join(dir, "damaged", "launcher.db");
  storeWithBoots(file);
  let t = 0;
  const said: string[] = [];
  const s = openStateStore(file, (l) => said.push(l), () => new Date("2026-03-04T05:06:07Z"), { reopen: { clock: () => t } });
  assert.deepEqual(said, []);
  damageBoots(file);
  assert.deepEqual(s.history(undefined, 1000), [], "the read that met the damage answers empty");
  assert.equal(said.length, 1, said.join("\n"));
  assert.match(said[0] ?? "", /failed \(SQLITE_CORRUPT\S*: [^)]+\): launcher records nothing \(a boot it runs is not recorded\) until it can open the store again.*; it is damaged: moved it to \S+\.corrupt-20260304T050607Z for inspection and started a new one$/);
  t = REOPEN_FIRST_MS;
  assert.equal(s.fault(), undefined, "a boot is no longer refused");
  assert.deepEqual(said.slice(1), [`the state store ${file} is in use again: launcher records from here on`]);
  assert.ok(s.beginBoot(boot(1)) > 0);
  assert.equal(s.history(undefined, 10).length, 1, "the new store holds what was recorded since");
  s.close();
  assert.deepEqual(
    readdirSync(path.dirname(file)).filter((f) => f.includes(".corrupt-") && !f.endsWith("-wal") && !f.endsWith("-shm")),
    ["launcher.db.corrupt-20260304T050607Z"],
  );
});
