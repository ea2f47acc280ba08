import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { boot, damageBoots, storeWithBoots } from "./damaged-store.js";
import { readyEngine, SERVING_BOOT, servingNode, servingPlan } from "../support/docker-parts.js";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import Database from "better-sqlite3";
import { StoreFault, UserError, reportError } from "../../src/config/errors.js";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import { recordedWatch, recordStart } from "../../src/boot/launch.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { ContainerInfo, Docker } from "../../src/remote/docker.js";
import type { Plan } from "../../src/plan/plan.js";
import { storeFault } from "../../src/store/fault.js";
import { guardStore } from "../../src/store/guarded.js";
import { NullStore, openStateStore } from "../../src/store/open.js";
import { Store, type BootInProgress, type StateStore } from "../../src/store/store.js";
import { cliArgs } from "../built-cli.js";

// Store faults (issue 25): a store damaged in the middle, read-only, or on a full disk never costs
// a command a stack trace, and never leaves a boot half-recorded and running unrouted.

const dir = mkdtempSync(path.join(tmpdir(), "launcher-store-fault-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const asides = (file: string): string[] => readdirSync(path.dirname(file)).filter((f) => f.startsWith(`${path.basename(file)}.corrupt-`) && !f.endsWith("-wal") && !f.endsWith("-shm"));

test("a page damaged in the middle: a bare open misses it and the first read fails; openStateStore finds it at open, sets it aside and starts a new one", () => {
  const file = path.join(dir, "mid-open", "launcher.db");
  storeWithBoots(file);
  damageBoots(file);
  const damaged = readFileSync(file);
  // The premise, on a copy: SQLite's own open and a look at the schema see nothing wrong.
  copyFileSync(file, `${file}.copy`);
  const bare = new Store(`${file}.copy`);
  assert.throws(() => bare.history(undefined, 1000), (e: unknown) => e instanceof Database.SqliteError && e.code.startsWith("SQLITE_CORRUPT"));
  bare.close();
  rmSync(`${file}.copy`);

  const warnings: string[] = [];
  const s = openStateStore(file, (l) => warnings.push(l), () => new Date("2026-03-04T05:06:07.000Z"));
  const aside = `${file}.corrupt-20260304T050607Z`;
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0] ?? "", /^warning: the state store \S+ is corrupt \(SQLITE_CORRUPT: quick_check: .*\); moved it to \S+\.corrupt-20260304T050607Z for inspection and started a new one/);
  assert.deepEqual(readFileSync(aside), damaged, "set aside as it was");
  assert.deepEqual(s.history(undefined, 1000), [], "a new store");
  s.beginBoot(boot(1));
  assert.equal(s.history(undefined, 10).length, 1);
  assert.equal(s.fault(), undefined);
  s.close();
});

test("a page damaged while a command uses the store: that read answers empty, the file is set aside once and a new one started, the rest of the command records nothing", () => {
  const file = path.join(dir, "mid-use", "launcher.db");
  storeWithBoots(file);
  const warnings: string[] = [];
  const s = openStateStore(file, (l) => warnings.push(l), () => new Date("2026-03-04T05:06:07.000Z"));
  assert.deepEqual(warnings, []);
  // Between two steps of the command: the open saw a healthy store.
  damageBoots(file);
  assert.deepEqual(s.history(undefined, 1000), [], "no throw: the read answers as the stand-in does");
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(
    warnings[0] ?? "",
    /^warning: the state store \S+ failed \(SQLITE_CORRUPT\S*: [^)]+\): this command records nothing more \(a boot it runs is not recorded\); run `launcher status` to see what runs \(the labels on the nodes\); it is damaged: moved it to \S+\.corrupt-20260304T050607Z for inspection and started a new one$/,
  );
  assert.deepEqual(asides(file), ["launcher.db.corrupt-20260304T050607Z"]);
  assert.equal(s.fault()?.kind, "damaged");
  assert.ok(s.fault() instanceof UserError, "said without a stack where it is thrown");
  // Later calls: nothing written, nothing read, nothing said again.
  assert.equal(s.beginBoot(boot(1)), 0);
  assert.deepEqual(s.lanes(), []);
  s.close();
  assert.equal(warnings.length, 1);
  const fresh = new Store(file);
  assert.deepEqual(fresh.history(undefined, 10), [], "the new store the next command opens");
  fresh.close();
});

test("history on a store damaged in the middle: one warning, an empty history, exit 0, no stack", () => {
  const state = path.join(dir, "state-mid");
  const db = path.join(state, "launcher", "launcher.db");
  storeWithBoots(db);
  damageBoots(db);
  const r = spawnSync(process.execPath, [...cliArgs(), "history"], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: state } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, "no boots recorded\n");
  assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /^warning: the state store \S+ is corrupt \(SQLITE_CORRUPT/);
  assert.equal(asides(db).length, 1);
});

test("store faults are sorted by their code alone; any other error is not the store's and passes through the guard", () => {
  const kind = (e: Error) => storeFault(e, "/s/launcher.db")?.kind;
  assert.equal(kind(new Database.SqliteError("database disk image is malformed", "SQLITE_CORRUPT")), "damaged");
  assert.equal(kind(new Database.SqliteError("x", "SQLITE_CORRUPT_INDEX")), "damaged");
  assert.equal(kind(new Database.SqliteError("file is not a database", "SQLITE_NOTADB")), "damaged");
  assert.equal(kind(new Database.SqliteError("x", "SQLITE_READONLY_DBMOVED")), "read-only");
  assert.equal(kind(new Database.SqliteError("database or disk is full", "SQLITE_FULL")), "full");
  assert.equal(kind(new Database.SqliteError("disk I/O error", "SQLITE_IOERR_WRITE")), "io");
  assert.equal(kind(new Database.SqliteError("unable to open database file", "SQLITE_CANTOPEN")), "unreachable");
  assert.equal(kind(Object.assign(new Error("no space"), { code: "ENOSPC" })), "full");
  assert.equal(kind(Object.assign(new Error("read-only file system"), { code: "EROFS" })), "read-only");
  // The same words with another code are not a fault: text is never what decides.
  assert.equal(kind(new Database.SqliteError("database disk image is malformed", "SQLITE_CONSTRAINT_FOREIGNKEY")), undefined);
  assert.equal(kind(new Error("SQLITE_CORRUPT: database disk image is malformed")), undefined);
  assert.equal(kind(Object.assign(new Error("x"), { code: "SQLITE_FULL" })), undefined, "an SQLite code only from SQLite");

  const throwing = (e: Error): StateStore =>
    Object.assign(new NullStore(), {
      lanes: () => {
        throw e;
      },
    });
  const said: string[] = [];
  const bug = new TypeError("x is undefined");
  assert.throws(() => guardStore(throwing(bug), "/s/launcher.db", (f) => said.push(f.message)).lanes(), (e) => e === bug);
  const constraint = new Database.SqliteError("FOREIGN KEY constraint failed", "SQLITE_CONSTRAINT_FOREIGNKEY");
  assert.throws(() => guardStore(throwing(constraint), "/s/launcher.db", (f) => said.push(f.message)).lanes(), (e) => e === constraint);
  assert.deepEqual(said, []);
  // A StoreFault reaches the user as a user error: its message and hint, exit 1, no stack.
  const fault = storeFault(new Database.SqliteError("database or disk is full", "SQLITE_FULL"), "/s/launcher.db") as StoreFault;
  const out: string[] = [];
  assert.equal(reportError(fault, (t) => out.push(t)), 1);
  assert.deepEqual(out, ["launcher: the state store /s/launcher.db failed (SQLITE_FULL: database or disk is full)", "  hint: free space on the disk that holds /s"]);
});

/** A small tmpfs at a new folder, for `fn`; unmounted however `fn` ends. Root only (the tests run as root). */
async function withTmpfs(name: string, size: string, fn: (mnt: string) => void | Promise<void>): Promise<void> {
  const mnt = path.join(dir, name);
  mkdirSync(mnt, { recursive: true });
  const mount = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", mnt], { encoding: "utf8" });
  assert.equal(mount.status, 0, `mount: ${mount.stderr}`);
  let failed = true;
  try {
    await fn(mnt);
    failed = false;
  } finally {
    const u = spawnSync("umount", [mnt], { encoding: "utf8" });
    // After a failure a store may still hold files there: detached lazily, and the failure is what is said.
    if (failed && u.status !== 0) spawnSync("umount", ["-l", mnt]);
    else assert.equal(u.status, 0, `umount: ${u.stderr}`);
  }
}

/** Fills the file system that holds `folder` to its last byte. */
function fill(folder: string): void {
  const fd = openSync(path.join(folder, "filler"), "w");
  try {
    for (const chunk of [65536, 4096, 1]) {
      const buf = Buffer.alloc(chunk, 1);
      for (;;) {
        try {
          writeSync(fd, buf);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ENOSPC") break;
          throw e;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

const stamped = { cluster: "c", deployment: "d", lane: "chat", recipe: { id: "r" }, nodes: [] } as unknown as Plan;

test("a full disk under the state folder: the first write that fails is said once with what to do, the file stays where it is, and a boot's launch that cannot be recorded starts nothing", async () => {
  await withTmpfs("full", "2m", (mnt) => {
    const file = path.join(mnt, "launcher", "launcher.db");
    storeWithBoots(file, 20);
    const warnings: string[] = [];
    const s = openStateStore(file, (l) => warnings.push(l), () => new Date());
    assert.deepEqual(warnings, []);
    fill(mnt);
    // History goes on without: each write either lands or is dropped, never thrown.
    for (let i = 0; i < 200 && s.fault() === undefined; i++) s.beginBoot(boot(i));
    assert.equal(s.fault()?.kind, "full", "the disk filled up");
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0] ?? "", /^warning: the state store \S+ failed \(SQLITE_FULL: database or disk is full\): this command records nothing more .*; free space on the disk that holds \S+$/);
    assert.deepEqual(asides(file), [], "a full disk is no damage: nothing moved");
    // The launch id is what must be recorded before a container starts: without it, nothing starts.
    assert.throws(
      () => recordStart(s, stamped, "0123456789ab", { startedAt: "t", deadline: 0, kept: false }, () => new Date()),
      (e: unknown) => e instanceof StoreFault && e.kind === "full" && /nothing of d was started/.test(e.message),
    );
    s.close();
    rmSync(path.join(mnt, "filler"));
    const after = new Store(file);
    assert.equal(after.history(undefined, 1000).length >= 20, true, "what was there is still there");
    after.close();
  });
});

test("a read-only store folder (0555, file 0444) for a user who is not root: history and lanes work, say once that nothing is recorded, exit 0", () => {
  const state = path.join(dir, "state-ro");
  const db = path.join(state, "launcher", "launcher.db");
  storeWithBoots(db, 3);
  chmodSync(dir, 0o755);
  chmodSync(state, 0o755);
  chmodSync(db, 0o444);
  chmodSync(path.dirname(db), 0o555);
  const home = mkdtempSync(path.join(tmpdir(), "launcher-ro-home-"));
  chmodSync(home, 0o777);
  try {
    for (const args of [["history"], ["lanes"]]) {
      // Root ignores modes: as nobody (65534), as a user whose store is not writable.
      const r = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, ...cliArgs(), ...args], {
        encoding: "utf8",
        cwd: path.resolve("."),
        env: { ...process.env, NODE_OPTIONS: "", HOME: home, XDG_STATE_HOME: state, TMPDIR: home },
      });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /internal error|\n\s+at /);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, /^warning: (cannot open the state store \S+ \(SQLITE_(CANTOPEN|READONLY)\S*: .*\); going on without it|the state store \S+ failed \(SQLITE_READONLY\S*: .*\): this command records nothing more)/);
    }
    assert.deepEqual(readdirSync(path.dirname(db)), ["launcher.db"], "nothing moved");
    assert.ok(existsSync(db));
  } finally {
    chmodSync(path.dirname(db), 0o755);
    rmSync(home, { recursive: true, force: true });
  }
});

// A boot watched against fake nodes (as test/unit/adopt.test.ts does): the store fails once its
// container runs.

const BOOT = SERVING_BOOT;

/** A store whose disk fails at the boot's first phase write, as a page damaged mid-boot does. */
function failingAtPhase(): Store {
  const store = new Store(":memory:");
  return Object.assign(store, {
    bootPhase: () => {
      throw new Database.SqliteError("database disk image is malformed", "SQLITE_CORRUPT");
    },
  });
}

async function watchWith(store: StateStore, url: string, removed: string[]): Promise<unknown> {
  const plan = servingPlan(url);
  const session = { cluster: { nodes: [] }, docker: new Map([["n1", servingNode(removed)]]) } as unknown as ClusterSession;
  const kept: BootInProgress = { boot: BOOT, cluster: "c", deployment: "d", plan: "{}", started_at: "2026-01-01T00:00:00.000Z", deadline_at: "2099-01-01T00:00:00.000Z", pid: 1, host: "h" };
  const progress = { node: () => undefined, note: () => undefined, done: () => undefined };
  return recordedWatch(kept, plan, session, { timeoutMs: 20_000, signal: new AbortController().signal, progress }, store, () => new Date());
}

test("a store that fails while a boot runs (its container started): the boot goes on to ready, says once that it is not recorded, nothing is rolled back or thrown", async () => {
  const engine = await readyEngine();
  try {
    // Unguarded, SQLite's error is launcher's own fault: it escapes the boot, but only after the
    // boot's running container is rolled back (the finding left it running).
    const rolledBack: string[] = [];
    await assert.rejects(watchWith(failingAtPhase(), engine.url, rolledBack), (e: unknown) => e instanceof Database.SqliteError);
    assert.deepEqual(rolledBack, ["n1:launcher-d-r0"], "an unexpected fault rolls the boot back");

    const warnings: string[] = [];
    const guarded = guardStore(failingAtPhase(), "/s/launcher.db", (f) => warnings.push(f.message));
    const removed: string[] = [];
    const result = (await watchWith(guarded, engine.url, removed)) as { status: string };
    assert.equal(result.status, "ready");
    assert.deepEqual(removed, [], "nothing rolled back");
    assert.deepEqual(warnings, ["the state store /s/launcher.db failed (SQLITE_CORRUPT: database disk image is malformed)"]);
    assert.equal(guarded.fault()?.kind, "damaged");
    assert.deepEqual(guarded.history(undefined, 10), [], "the rest of the boot went unrecorded");
  } finally {
    engine.server.close();
  }
});
