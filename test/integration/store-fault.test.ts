import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { damageBoots, storeWithBoots } from "../unit/damaged-store.js";
import { launcher, launcherContainers, ok, practiceSuite } from "./practice-cluster.js";

// Issue 25: a store damaged in the middle broke `up` halfway. The worker on n2 started, then the
// boot's first history write met the damaged page: SqliteError with a stack, exit 70, and the
// worker left running, never rolled back.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-store-fault-it-");

describe("a damaged state store on the practice cluster", { concurrency: false }, () => {
  test("a page damaged where up writes its boot: found at open and set aside, up is ready, no stack; down leaves no container", async () => {
    const env = { XDG_STATE_HOME: path.join(dir, "damaged") };
    const db = path.join(env.XDG_STATE_HOME, "launcher", "launcher.db");
    // A store with history, damaged in the boots table's last leaf: the page the next boot is
    // written to, read only after the first container (the worker on n2) started.
    storeWithBoots(db);
    damageBoots(db, "last");
    try {
      const up = await launcher(["up", "practice-2x"], 180_000, env);
      assert.equal(up.code, 0, up.stderr);
      assert.match(up.stdout, /practice-2x is ready in/);
      assert.doesNotMatch(up.stderr, /internal error|SqliteError|\n\s+at /);
      const said = up.stderr.split("\n").filter((l) => l.includes("state store"));
      assert.equal(said.length, 1, up.stderr);
      assert.match(said[0] ?? "", new RegExp(`^warning: the state store ${db} is corrupt \\(SQLITE_CORRUPT: quick_check: .*\\); moved it to ${db}\\.corrupt-\\d{8}T\\d{6}Z for inspection and started a new one`));
      assert.equal(readdirSync(path.dirname(db)).filter((f) => /^launcher\.db\.corrupt-\d{8}T\d{6}Z$/.test(f)).length, 1);
      assert.deepEqual(launcherContainers(HOSTS), ["n1:launcher-practice-2x-r0:running", "n2:launcher-practice-2x-r1:running"]);
      // The new store has this boot, and nothing more is said.
      const history = ok(await launcher(["history", "--json"], 60_000, env), "history");
      assert.equal((JSON.parse(history.stdout) as { boots: unknown[] }).boots.length, 1, history.stdout);
      assert.equal(history.stderr, "");
      const down = ok(await launcher(["down", "practice-2x"], 120_000, env), "down");
      assert.match(down.stdout, /stopped practice-2x/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await launcher(["down", "--all", "--grace", "1"], 120_000, env);
    }
  });
});
