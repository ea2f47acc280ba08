import assert from "node:assert/strict";
import { test } from "node:test";
import { engineKeys } from "../../src/gateway/engine-keys.js";

// The gateway asks for an engine's key on every request it proxies: the store is read once per
// deployment and route table, not per request.

/** A store stand-in that counts its reads. */
function store(keys: Record<string, string>): { read: (cluster: string, deployment: string) => string | undefined; reads: () => number } {
  let reads = 0;
  return {
    read: (cluster, deployment) => {
      reads++;
      return keys[`${cluster}/${deployment}`];
    },
    reads: () => reads,
  };
}

test("a key found is read from the store once until the route table is rebuilt", () => {
  const s = store({ "c/d1": "k1", "c/d2": "k2" });
  const keys = engineKeys(s.read);
  for (let i = 0; i < 100; i++) assert.equal(keys.get({ cluster: "c", deployment: "d1" }), "k1");
  assert.equal(s.reads(), 1);
  assert.equal(keys.get({ cluster: "c", deployment: "d2" }), "k2");
  assert.equal(s.reads(), 2);
  keys.clear();
  assert.equal(keys.get({ cluster: "c", deployment: "d1" }), "k1");
  assert.equal(s.reads(), 3);
});

test("a key not recorded yet is asked again on the next request: up records it once its engine is ready", () => {
  const recorded: Record<string, string> = {};
  const s = store(recorded);
  const keys = engineKeys(s.read);
  assert.equal(keys.get({ cluster: "c", deployment: "d" }), undefined);
  recorded["c/d"] = "k";
  assert.equal(keys.get({ cluster: "c", deployment: "d" }), "k");
  assert.equal(s.reads(), 2);
});

test("deployments of the same name on two clusters keep their own keys", () => {
  const s = store({ "a/d": "ka", "b/d": "kb" });
  const keys = engineKeys(s.read);
  assert.equal(keys.get({ cluster: "a", deployment: "d" }), "ka");
  assert.equal(keys.get({ cluster: "b", deployment: "d" }), "kb");
  assert.equal(keys.get({ cluster: "a", deployment: "d" }), "ka");
});

test("a key changed in the store is seen once the table is rebuilt", () => {
  const recorded: Record<string, string> = { "c/d": "old" };
  const keys = engineKeys(store(recorded).read);
  assert.equal(keys.get({ cluster: "c", deployment: "d" }), "old");
  recorded["c/d"] = "new";
  keys.clear();
  assert.equal(keys.get({ cluster: "c", deployment: "d" }), "new");
});
