import assert from "node:assert/strict";
import { test } from "node:test";
import { RemoteError } from "../../src/config/errors.js";
import { nodeAddresses, peerNamed } from "../../src/boot/blame.js";
import { INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { RAY_HEAD_UP, RECIPE } from "../support/fake-cluster.js";
import { refused, withCluster } from "../support/refusals.js";

// A rank whose cause names the peer that died by its address (Ray's ActorDiedError `ip:`): the
// node of the boot with that address is blamed (src/boot/blame.ts peerNamed), in up's failure
// message as in explain (test/unit/explain.test.ts).

const lost = (peerAddress: string): BootState => ({ ...INITIAL_BOOT, cause: "x", causeIsPeerLoss: true, peerAddress });

test("peerNamed: the other node whose addresses include the one the lost peer's cause names", () => {
  const nodes = [{ n: "a", ips: ["10.0.0.1"] }, { n: "b", ips: ["10.0.0.2", "spark-b"] }];
  const of = (x: (typeof nodes)[number]): readonly string[] => x.ips;
  assert.equal(peerNamed(nodes, nodes[0], lost("10.0.0.2"), of)?.n, "b");
  assert.equal(peerNamed(nodes, nodes[0], lost("spark-b"), of)?.n, "b");
  assert.equal(peerNamed(nodes, nodes[0], lost("10.0.0.9"), of), undefined, "an address no node has names none");
  assert.equal(peerNamed(nodes, nodes[1], lost("10.0.0.2"), of), undefined, "never the blamed rank itself");
  assert.equal(peerNamed(nodes, nodes[0], { ...INITIAL_BOOT, cause: "x", peerAddress: "10.0.0.2" }, of), undefined, "only a lost peer's cause");
  assert.equal(peerNamed(nodes, nodes[0], undefined, of), undefined);
  assert.deepEqual(nodeAddresses({ name: "n", rank: 0, host: "h", fabric_ip: "10.0.0.1", address: "n.lan", address_ip: "192.168.1.5", hca: [], gpus: 1 }), ["10.0.0.1", "192.168.1.5", "n.lan", "h"]);
});

const ACTOR_DIED = [
  "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
  "\tclass_name: RayWorkerProc",
  "\tip: 10.9.0.2",
  "The actor is dead because its node has died. Node Id: 7a6b5c",
].map((l) => `(EngineCore_DP0 pid=1) ERROR 01-01 00:00:01 [core.py:1] ${l}`);

test("Ray: the head's log says its worker's node died (ActorDiedError ip:): up blames that node, with the head's cause, hint and lines", () =>
  withCluster({}, async (fc) => {
    fc.script = (c, n) => n.say(c.name, ...(c.labels["launcher.rank"] === "0" ? [...RAY_HEAD_UP, ...ACTOR_DIED] : ["Local node IP: 10.9.0.2", "Ray runtime started."]));
    const ray = RECIPE.replace('distributed_backend = "mp"', 'distributed_backend = "ray"');
    const text = await refused(
      fc.up(fc.plan(ray, { deployment: "ray-lost" }), { timeoutMs: 5_000 }),
      RemoteError,
      /^n2 \(rank 1\): boot of ray-lost failed: n1's log says this node \(10\.9\.0\.2\) died/,
      /cause: RayWorkerProc on 10\.9\.0\.2: The actor is dead because its node has died\. Node Id: 7a6b5c/,
      /hint: Ray lost the node at 10\.9\.0\.2/,
      /last lines of n1's log:\n/,
    );
    assert.doesNotMatch(text, /n1 \(rank 0\): boot of ray-lost failed/);
    assert.deepEqual(fc.containers(), []);
  }));

test("an address of no node in the boot: the rank that heard of the loss is named, as before", () =>
  withCluster({}, async (fc) => {
    fc.script = (c, n) => n.say(c.name, ...(c.labels["launcher.rank"] === "0" ? [...RAY_HEAD_UP, ...ACTOR_DIED.map((l) => l.replace("10.9.0.2", "10.9.0.77"))] : ["Ray runtime started."]));
    const ray = RECIPE.replace('distributed_backend = "mp"', 'distributed_backend = "ray"');
    await refused(fc.up(fc.plan(ray, { deployment: "ray-far" }), { timeoutMs: 5_000 }), RemoteError, /^n1 \(rank 0\): boot of ray-far failed: the engine failed/, /last lines of n1's log:/);
  }));
