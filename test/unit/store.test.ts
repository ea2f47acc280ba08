import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { headPhases } from "../../src/cli/history.js";
import { Store, storeDir } from "../../src/store/store.js";
import { MIGRATIONS } from "../../src/store/migrations.js";
import { NullStore, openFailure, openStateStore } from "../../src/store/open.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-store-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const boot = { deployment: "d", recipe: "r", recipe_hash: "abc", cluster: "c", served_model: "m", endpoint: "http://h:8000", nodes: ["n1", "n2"], started_at: "2026-01-01T00:00:00.000Z" };

test("the store lives under $XDG_STATE_HOME/launcher, else ~/.local/state/launcher", () => {
  assert.equal(storeDir({ XDG_STATE_HOME: "/x/state" }, "/home/u"), "/x/state/launcher");
  assert.equal(storeDir({}, "/home/u"), "/home/u/.local/state/launcher");
  // The XDG spec: a relative value is invalid and ignored.
  assert.equal(storeDir({ XDG_STATE_HOME: "rel" }, "/home/u"), "/home/u/.local/state/launcher");
});

test("opening migrates a new database to the latest version, and reopening keeps the data", () => {
  const file = path.join(dir, "m", "launcher.db");
  const s = new Store(file);
  s.beginBoot(boot);
  s.close();
  const raw = new Database(file);
  assert.equal(raw.pragma("user_version", { simple: true }), MIGRATIONS.length);
  raw.close();
  const again = new Store(file);
  assert.equal(again.history(undefined, 10).length, 1);
  again.close();
});

test("a boot's phases end when the next begins; history is newest first with per-phase times", () => {
  const s = new Store(":memory:");
  const id = s.beginBoot(boot);
  s.bootPhase(id, "n1", "starting", "2026-01-01T00:00:01.000Z", {});
  s.bootPhase(id, "n1", "loading", "2026-01-01T00:00:03.000Z", {});
  s.bootPhase(id, "n1", "loading", "2026-01-01T00:00:10.000Z", { model_gib: "84.1" });
  s.bootPhase(id, "n2", "loading", "2026-01-01T00:00:02.000Z", {});
  s.bootPhase(id, "n1", "serving", "2026-01-01T00:00:20.000Z", { model_gib: "84.1" });
  s.endBoot(id, "ready", "2026-01-01T00:00:21.000Z");
  const second = s.beginBoot({ ...boot, recipe: "other", started_at: "2026-01-02T00:00:00.000Z" });
  s.endBoot(second, "failed", "2026-01-02T00:01:00.000Z", { node: "n2", error: "CUDA out of memory" });

  const all = s.history(undefined, 10);
  assert.deepEqual(all.map((b) => [b.recipe, b.outcome]), [["other", "failed"], ["r", "ready"]]);
  assert.equal(all[0]?.failed_node, "n2");
  const r = s.history("r", 10)[0];
  assert.ok(r);
  assert.deepEqual(r.nodes, ["n1", "n2"]);
  const n1 = r.phases.filter((p) => p.node === "n1").map((p) => [p.phase, p.started_at.slice(17, 19), p.ended_at?.slice(17, 19)]);
  assert.deepEqual(n1, [["starting", "01", "03"], ["loading", "03", "20"], ["serving", "20", "21"]]);
  assert.deepEqual(headPhases(r).map((p) => [p.phase, p.seconds, p.figures]), [["starting", 2, {}], ["loading", 17, { model_gib: "84.1" }]]);
  s.close();
});

test("lanes: set, switch, emptied when their deployment stops; swaps are kept", () => {
  const s = new Store(":memory:");
  s.setLane({ name: "vision", cluster: "c", deployment: "a", recipe: "ra", served_model: "m", state: "serving", since: "t1" });
  const swap = s.beginSwap({ lane: "vision", mode: "disjoint", from_deployment: "a", from_recipe: "ra", to_deployment: "b", to_recipe: "rb", started_at: "t2" });
  s.setLane({ name: "vision", cluster: "c", deployment: "b", recipe: "rb", served_model: "m", state: "serving", since: "t3" });
  s.endSwap(swap, "ok", "t3");
  assert.equal(s.lane("vision")?.deployment, "b");
  assert.equal(s.lane("vision")?.switching_to, undefined);
  s.deploymentStopped("c", "a", "t4");
  assert.equal(s.lane("vision")?.state, "serving", "stopping the old deployment leaves the lane alone");
  s.deploymentStopped("c", "b", "t5");
  assert.deepEqual(s.lane("vision"), { name: "vision", cluster: "c", state: "empty", since: "t5" });
  assert.deepEqual(s.swaps("vision", 5).map((w) => [w.from_deployment, w.to_deployment, w.outcome]), [["a", "b", "ok"]]);
  s.close();
});

test("locks: all keys or none; a live holder makes others busy; a dead holder's lock is taken over", () => {
  const file = path.join(dir, "locks.db");
  const a = new Store(file);
  const b = new Store(file);
  const alive = new Set([100, 200]);
  const isAlive = (pid: number) => alive.has(pid);
  const one = { pid: 100, host: "h", what: "launcher up x" };
  const two = { pid: 200, host: "h", what: "launcher up y" };
  assert.deepEqual(a.acquire(["lane:v", "node:c/n1"], one, "t", isAlive), { ok: true });
  const busy = b.acquire(["node:c/n2", "node:c/n1"], two, "t", isAlive);
  assert.equal(busy.ok, false);
  assert.equal(!busy.ok && busy.holder.what, "launcher up x");
  // Nothing was taken by the refused attempt: n2 is still free.
  assert.deepEqual(b.acquire(["node:c/n2"], two, "t", isAlive), { ok: true });
  alive.delete(100);
  assert.deepEqual(b.acquire(["node:c/n1"], two, "t", isAlive), { ok: true }, "the holder died: its lock is stale");
  a.release(["node:c/n1"], one);
  assert.equal(a.acquire(["node:c/n1"], one, "t", () => true).ok, false, "release only frees one's own locks");
  b.release(["node:c/n1", "node:c/n2"], two);
  assert.equal(a.acquire(["node:c/n1", "node:c/n2"], one, "t", () => true).ok, true);
  a.close();
  b.close();
});

test("data_version tells a reader that another connection wrote", () => {
  const file = path.join(dir, "dv.db");
  const reader = new Store(file);
  const writer = new Store(file);
  const before = reader.dataVersion();
  assert.equal(reader.dataVersion(), before);
  writer.setLane({ name: "l", cluster: "c", state: "empty", since: "t" });
  assert.notEqual(reader.dataVersion(), before);
  reader.close();
  writer.close();
});

test("a corrupt store is set aside with its -wal and -shm, a new one is started, and the warning names both", () => {
  const folder = path.join(dir, "corrupt");
  mkdirSync(folder, { recursive: true });
  const file = path.join(folder, "launcher.db");
  writeFileSync(file, "this is not a database, just garbage ".repeat(200));
  writeFileSync(`${file}-wal`, "wal");
  writeFileSync(`${file}-shm`, "shm");
  const warnings: string[] = [];
  const at = new Date("2026-03-04T05:06:07.890Z");
  const s = openStateStore(file, (l) => warnings.push(l), () => at);
  const aside = path.join(folder, "launcher.db.corrupt-20260304T050607Z");
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0]?.startsWith(`warning: the state store ${file} is corrupt (SQLITE_NOTADB`), true, warnings[0]);
  assert.match(warnings[0] ?? "", new RegExp(`moved it to ${aside.replace(/[.]/g, "\\.")} for inspection and started a new one`));
  assert.match(readFileSync(aside, "utf8"), /^this is not a database/, "kept for inspection");
  assert.equal(readFileSync(`${aside}-wal`, "utf8"), "wal");
  assert.ok(existsSync(`${aside}-shm`), "SQLite rebuilds the -shm index, but it goes along");
  assert.ok(s instanceof Store, "a real store again");
  s.beginBoot(boot);
  assert.equal(s.history(undefined, 10).length, 1);
  s.close();
  // The next open finds the new store healthy: nothing more is moved or said.
  const again = openStateStore(file, (l) => warnings.push(l), () => at);
  assert.equal(again.history(undefined, 10).length, 1);
  again.close();
  assert.equal(warnings.length, 1);
});

test("a store that cannot be opened is left alone: commands get a stand-in that records nothing, and one warning", () => {
  const file = path.join(dir, "folder-in-place", "launcher.db");
  mkdirSync(path.join(file, "inside"), { recursive: true });
  const warnings: string[] = [];
  const s = openStateStore(file, (l) => warnings.push(l), () => new Date());
  assert.equal(s instanceof NullStore, true);
  assert.deepEqual(warnings, [
    `warning: cannot open the state store ${file} (SQLITE_CANTOPEN: unable to open database file); going on without it: history and lane records are neither read nor written by this command (check the path's permissions, or set XDG_STATE_HOME)`,
  ]);
  assert.ok(statSync(path.join(file, "inside")).isDirectory(), "not renamed, not touched");
  assert.deepEqual(readdirSync(path.dirname(file)), ["launcher.db"]);
  // Reads are empty and writes vanish, whatever a command does.
  const id = s.beginBoot(boot);
  s.endBoot(id, "ready", boot.started_at);
  s.setLane({ name: "l", cluster: "c", state: "serving", since: boot.started_at });
  assert.deepEqual(s.history(undefined, 10), []);
  assert.deepEqual(s.lanes(), []);
  assert.equal(s.lane("l"), undefined);
  assert.deepEqual(s.acquire(["lane:l"], { pid: 1, host: "h", what: "w" }, boot.started_at, () => true), { ok: true });
  s.close();
  assert.equal(warnings.length, 1, "said once");
});

test("only a damaged database counts as corrupt; anything else leaves the file where it is", () => {
  assert.equal(openFailure(new Database.SqliteError("file is not a database", "SQLITE_NOTADB")), "corrupt");
  assert.equal(openFailure(new Database.SqliteError("database disk image is malformed", "SQLITE_CORRUPT")), "corrupt");
  assert.equal(openFailure(new Database.SqliteError("x", "SQLITE_CORRUPT_INDEX")), "corrupt");
  assert.equal(openFailure(new Database.SqliteError("unable to open database file", "SQLITE_CANTOPEN")), "unusable");
  assert.equal(openFailure(new Database.SqliteError("attempt to write a readonly database", "SQLITE_READONLY")), "unusable");
  assert.equal(openFailure(Object.assign(new Error("permission denied"), { code: "EACCES" })), "unusable");
});

test("a deployment's engine API key is kept for the gateway and a lane's drain, and gone once it stopped", () => {
  const s = new Store(path.join(dir, "key", "launcher.db"));
  const { started_at: _started, ...d } = boot;
  s.deploymentReady({ ...d, boot_id: s.beginBoot(boot), ready_at: "t" }, "engine-secret");
  s.deploymentReady({ ...d, deployment: "open", boot_id: s.beginBoot(boot), ready_at: "t" });
  assert.equal(s.engineKey("c", "d"), "engine-secret");
  assert.equal(s.engineKey("c", "open"), undefined);
  s.deploymentStopped("c", "d", "t2");
  assert.equal(s.engineKey("c", "d"), undefined);
  s.close();
});

test("the store file is readable by its owner alone (it holds engine API keys), an older one too", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-store-mode-"));
  try {
    const fresh = path.join(dir, "new", "launcher.db");
    new Store(fresh).close();
    assert.equal(statSync(fresh).mode & 0o777, 0o600);
    assert.equal(statSync(path.dirname(fresh)).mode & 0o777, 0o700);
    const older = path.join(dir, "old.db");
    writeFileSync(older, "", { mode: 0o644 });
    new Store(older).close();
    assert.equal(statSync(older).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
