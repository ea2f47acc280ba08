import assert from "node:assert/strict";
import { test } from "node:test";
import { Store } from "../../src/store/store.js";
import { currentWedges } from "../../src/nodes/status.js";
import { statusLines } from "../../src/cli/status.js";
import type { DeploymentStatus } from "../../src/contract/deployment.js";

// `launcher status` reads the nodes and this machine's store, not the daemon: the daemon's
// generation watch keeps each wedge there, and status shows it while the launch found wedged serves.

const MESSAGE = "deployment d is wedged since 2026-01-01T00:00:01.000Z: /health answers but no generation completed since then (its probe of one token got no answer within 30 s)";
const wedge = { boot: "b1", since: "2026-01-01T00:00:01.000Z", message: MESSAGE, at: "2026-01-01T00:01:31.000Z" };

const d = (over: Partial<DeploymentStatus> = {}): DeploymentStatus => ({
  deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://n1:8000", status: "serving", phase: "serving", missing: [], unreachable: [], boot: "b1",
  ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" }], ...over,
});

test("store: a wedge is kept per deployment until the daemon says it is over", () => {
  const store = new Store(":memory:");
  try {
    store.saveWedge("c", "d", wedge);
    store.saveWedge("other", "d", { ...wedge, boot: "x" });
    assert.deepEqual(store.wedges("c"), new Map([["d", wedge]]));
    store.saveWedge("c", "d", undefined);
    assert.deepEqual(store.wedges("c"), new Map());
    assert.equal(store.wedges("other").get("d")?.boot, "x");
  } finally {
    store.close();
  }
});

test("status: a wedge holds only for the launch it was found in, while it serves", () => {
  const stored = new Map([["d", wedge]]);
  assert.deepEqual([...currentWedges([d()], stored).keys()], ["d"]);
  assert.deepEqual([...currentWedges([d({ boot: "b2" })], stored).keys()], [], "booted again since");
  assert.deepEqual([...currentWedges([d({ status: "degraded" })], stored).keys()], [], "no longer serving: its status says what it is");
  assert.deepEqual([...currentWedges([d({ boot: undefined as unknown as string })], new Map([["d", { ...wedge, boot: "" }]])).keys()], ["d"], "a launch without its label");
});

test("status: the deployment's lines say it is wedged, since when, and when the daemon found it", () => {
  const lines = statusLines([d()], undefined, new Map(), new Date("2026-01-01T00:02:00Z"), new Map([["d", wedge]]));
  assert.equal(lines.at(-1), `  wedged: ${MESSAGE} (found by the daemon at 2026-01-01T00:01:31.000Z)`);
  assert.equal(statusLines([d()]).some((l) => l.includes("wedged")), false);
});
