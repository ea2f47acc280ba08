import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { bootAgain } from "../../src/daemon/reboot.js";
import type { UpEvent } from "../../src/boot/up-events.js";
import { DEFAULTS } from "../../src/contract/defaults.js";
import { Store } from "../../src/store/store.js";
import { FakeCluster, RECIPE } from "../support/fake-cluster.js";

// The daemon's restart of a kept plan (src/daemon/reboot.ts bootAgain), run for real over a
// FakeCluster (test/support) and a real store: what it hands the one `up` use case (the claims'
// command, the push, the timeout, the daemon's detach, the old group's removal under way) and how
// its words come back as the boot's events.

const dir = mkdtempSync(path.join(tmpdir(), "launcher-reboot-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let stores = 0;

async function withCluster(run: (fc: FakeCluster, store: Store) => Promise<void>, nodes = 2): Promise<void> {
  const fc = await FakeCluster.start({ nodes });
  const store = new Store(path.join(dir, `${stores++}.db`));
  try {
    await run(fc, store);
  } finally {
    store.close();
    await fc.close();
  }
}

const texts = (events: readonly UpEvent[], type: "say" | "note"): string[] => events.flatMap((e) => (e.type === type ? [e.text] : []));

test("a restart boots the kept plan as up does: its claims name the restart, its words and progress are the boot's events, the boot is recorded ready and the claims given back", () =>
  withCluster(async (fc, store) => {
    const plan = fc.plan(RECIPE);
    const claimed: string[] = [];
    fc.script = (c, n) => {
      claimed.push(`${n.node} ${n.claim?.record ?? "no claim"}`);
      return fc.serve(c, n);
    };
    const events: UpEvent[] = [];
    const outcome = await bootAgain(plan, fc.session, new AbortController().signal, store, (e) => void events.push(e));
    assert.equal(outcome.status, "ready");
    assert.equal(outcome.deployment, "r");
    assert.equal(claimed.length, 2);
    for (const c of claimed) assert.match(c, /^n\d .*launcher serve \(restart of r\)/);
    assert.ok(texts(events, "say").includes("launcher: starting r (r) on n1, n2"), JSON.stringify(events));
    assert.ok(texts(events, "note").some((t) => t.startsWith("preflight of r on n1, n2")));
    const nodes = new Set(events.flatMap((e) => (e.type === "node" ? [e.node] : [])));
    assert.deepEqual([...nodes].sort(), ["n1", "n2"]);
    assert.equal(events.at(-1)?.type, "done");
    assert.deepEqual(store.history(undefined, 10).map((b) => b.outcome), ["ready"]);
    assert.equal(fc.node("n1").claim, undefined);
    assert.equal(fc.node("n2").claim, undefined);
  }));

test("a restart under the daemon's detach is kept for the next daemon, with up's default time for a boot", () =>
  withCluster(async (fc, store) => {
    const kept: { boot: string; ms: number }[] = [];
    fc.script = (c, n) => {
      for (const b of store.bootsInProgress()) kept.push({ boot: b.boot, ms: Date.parse(b.deadline_at) - Date.parse(b.started_at) });
      return fc.serve(c, n);
    };
    const outcome = await bootAgain(fc.plan(RECIPE), fc.session, new AbortController().signal, store, () => undefined, undefined, new AbortController().signal);
    assert.equal(outcome.status, "ready");
    assert.equal(kept.length, 2, "kept while its containers start");
    for (const k of kept) {
      assert.equal(k.boot, outcome.status === "ready" ? outcome.boot : "?");
      // The deadline counts from the first container's start, after the claims and checks (ms
      // over fakes; a minute of slack for a loaded machine, far below any other timeout's gap).
      assert.ok(k.ms >= DEFAULTS.upTimeout.ms && k.ms < DEFAULTS.upTimeout.ms + 60_000, `deadline ${k.ms} ms after the start`);
    }
    assert.deepEqual(store.bootsInProgress(), []);
  }));

test("a restart sends the image to a node that lacks it, where a boot with --no-push would refuse", () =>
  withCluster(async (fc, store) => {
    fc.node("n2").images.clear();
    const events: UpEvent[] = [];
    // The fake node runs no transfer: the push is tried, and fails there (on the source's hop).
    const e = await bootAgain(fc.plan(RECIPE), fc.session, new AbortController().signal, store, (x) => void events.push(x)).then(
      () => assert.fail("the push succeeded"),
      (x: unknown) => x,
    );
    // The push got as far as starting the source's hop, which the fake node cannot run (not a refusal, not a bug of ours).
    assert.match(String(e), /^Error: fake node n1: spawn is not scripted \(bash -c hop=/);
    assert.ok(texts(events, "note").some((t) => /^image img:local: sending it from n1 to n2/.test(t)), JSON.stringify(texts(events, "note")));
    assert.deepEqual(fc.started, []);
  }));

test("a restart waits for the old group's removal under way: the old group does not refuse it, and is gone before the new one starts", () =>
  withCluster(async (fc, store) => {
    const plan = fc.plan(RECIPE);
    const old = fc.place(plan, "0123456789ab");
    // The supervisor's removal of the old group runs beside the restart's checks: here it ends
    // only once the restart's preflight began (its reads saw the old group still there).
    let preflightBegan: () => void = () => undefined;
    const began = new Promise<void>((resolve) => (preflightBegan = resolve));
    const emit = (e: UpEvent): void => {
      if (e.type === "note" && e.text.startsWith("preflight of r")) preflightBegan();
    };
    let removed = false;
    const recreating = began.then(async () => {
      await Promise.all(old.nodes.map((s) => fc.node(s.node).remove([s.container])));
      removed = true;
    });
    const removedAtRun: boolean[] = [];
    fc.script = (c, n) => {
      removedAtRun.push(removed);
      return fc.serve(c, n);
    };
    const outcome = await bootAgain(plan, fc.session, new AbortController().signal, store, emit, undefined, undefined, recreating);
    assert.equal(outcome.status, "ready");
    assert.deepEqual(removedAtRun, [true, true]);
    assert.deepEqual(fc.containers(), ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"]);
  }));
