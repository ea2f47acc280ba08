import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { inPool } from "../../src/config/pool.js";

const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("inPool", () => {
  test("at most N at once, results in the items' order", async () => {
    let live = 0;
    let most = 0;
    const out = await inPool([30, 10, 20, 5, 15], 2, undefined, async (ms) => {
      most = Math.max(most, ++live);
      await tick(ms);
      live--;
      return ms * 2;
    });
    assert.deepEqual(out, [60, 20, 40, 10, 30]);
    assert.equal(most, 2);
  });

  test("after a failure no new item starts, and the failure is thrown only once the running items ended", async () => {
    const started: number[] = [];
    const ended: number[] = [];
    await assert.rejects(
      inPool([1, 2, 3, 4], 2, undefined, async (i) => {
        started.push(i);
        if (i === 1) throw new Error("one failed");
        await tick(50);
        ended.push(i);
      }),
      /one failed/,
    );
    assert.deepEqual(started, [1, 2], "nothing after the failure");
    assert.deepEqual(ended, [2], "the running item was waited for");
  });

  test("an aborted signal stops it taking items", async () => {
    const c = new AbortController();
    c.abort(new Error("stopped"));
    let ran = 0;
    await assert.rejects(inPool([1, 2], 2, c.signal, async () => ran++), /stopped/);
    assert.equal(ran, 0);
  });
});
