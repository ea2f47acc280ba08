import assert from "node:assert/strict";
import { test } from "node:test";
import { afterDown, afterFailedAdoptedBoot, afterFailedSwap, asRouted, empty, restored, serving, switching } from "../../src/lanes/lane-state.js";
import type { LaneRecord } from "../../src/store/store.js";

const OLD = { deployment: "old", recipe: "r-old", served_model: "m-old" };
const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T01:00:00.000Z";

test("a lane serves, switches (naming what it served) and empties", () => {
  assert.deepEqual(serving("l", "c", OLD, T0), { name: "l", cluster: "c", deployment: "old", recipe: "r-old", served_model: "m-old", state: "serving", since: T0 });
  assert.deepEqual(switching("l", "c", OLD, "new", T1), { name: "l", cluster: "c", deployment: "old", recipe: "r-old", served_model: "m-old", state: "switching", switching_to: "new", since: T1 });
  assert.deepEqual(switching("l", "c", undefined, "new", T1), { name: "l", cluster: "c", state: "switching", switching_to: "new", since: T1 });
  assert.deepEqual(empty("l", "c", T1), { name: "l", cluster: "c", state: "empty", since: T1 });
});

test("a failed swap: still switching with nothing stopped, the lane serves the old one again since it served it; once the old one went, it is empty; a lane that never switched is left", () => {
  const now = switching("l", "c", OLD, "new", T0);
  assert.deepEqual(afterFailedSwap(now, OLD, false, "c", T1), serving("l", "c", OLD, T0));
  assert.deepEqual(afterFailedSwap(now, OLD, true, "c", T1), empty("l", "c", T1));
  assert.deepEqual(afterFailedSwap(now, undefined, false, "c", T1), empty("l", "c", T1));
  assert.equal(afterFailedSwap(serving("l", "c", OLD, T0), OLD, false, "c", T1), undefined);
  assert.equal(afterFailedSwap(undefined, OLD, false, "c", T1), undefined);
});

test("an undone swap puts the lane back as it was, or empty when it was new", () => {
  const before = serving("l", "c", OLD, T0);
  assert.equal(restored(before, "l", "c", T1), before);
  assert.deepEqual(restored(undefined, "l", "c", T1), empty("l", "c", T1));
});

test("an adopted boot that failed empties only a lane switching to it", () => {
  assert.deepEqual(afterFailedAdoptedBoot(switching("l", "c", OLD, "new", T0), "new", T1), empty("l", "c", T1));
  assert.equal(afterFailedAdoptedBoot(switching("l", "c", OLD, "other", T0), "new", T1), undefined);
  assert.equal(afterFailedAdoptedBoot(serving("l", "c", OLD, T0), "old", T1), undefined);
});

test("down of a lane empties it unless a node did not answer, or it is empty already", () => {
  const lane: LaneRecord = switching("l", "c", OLD, "new", T0);
  assert.deepEqual(afterDown(lane, false, T1), empty("l", "c", T1));
  assert.equal(afterDown(lane, true, T1), undefined);
  assert.equal(afterDown(empty("l", "c", T0), false, T1), undefined);
  assert.equal(afterDown(undefined, false, T1), undefined);
});

test("a lane left switching by an up that died is routed as serving what it names", () => {
  const lane = switching("l", "c", OLD, "new", T0);
  assert.equal(asRouted(lane, () => true), lane);
  assert.deepEqual(asRouted(lane, () => false), { ...lane, state: "serving" });
  const s = serving("l", "c", OLD, T0);
  assert.equal(asRouted(s, () => assert.fail("only a switching lane's swap is looked for")), s);
});
