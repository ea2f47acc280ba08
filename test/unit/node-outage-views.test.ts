import assert from "node:assert/strict";
import { test } from "node:test";
import { applyEvent, pictureOf, type TopAnswers } from "../../src/app/top.js";
import { renderTop } from "../../src/cli/top-view.js";
import { READ_EVENTS, withNodeEvent, type ClusterNodeView } from "../../src/contract/read-api.js";
import { clusterView, deploymentViews, diffPictures, EMPTY_PICTURE, nodeStates } from "../../src/daemon/read-views.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import type { KnownDeployment } from "../../src/gateway/routes.js";

// A node out after running launcher's ranks, as the read API says it (the `node` event's kind and
// since, a cluster's node's outage) and as `launcher top` draws it. The rule is node-outage.test.ts's.

const SINCE = "2026-12-05T02:58:30.000Z";
const cluster = { name: "home", nodes: [{ name: "s1", rank: 0, host: "s1", hca: [], gpus: 1 }, { name: "s2", rank: 1, host: "s2", hca: [], gpus: 1 }] } as unknown as Cluster;
const known: KnownDeployment = {
  cluster: "home", deployment: "chat", recipe: "chat", recipe_hash: "h", served_model: "chat", endpoint: "http://s1:8000", status: "unreachable", phase: "unknown", missing: [], unreachable: ["s1"],
  ranks: [{ rank: 0, node: "s1", container: "launcher-chat-r0", state: "unreachable" }],
  outages: [{ node: "s1", kind: "vanished", since: SINCE }],
};
const snapshot: Snapshot = {
  deployments: [known], strangers: [], unreachable: ["home/s1"], at: new Date(SINCE),
  outages: [{ cluster: "home", node: "s1", kind: "vanished", since: SINCE, deployments: [{ deployment: "chat", ranks: [0] }] }],
};
const reads = { facts: { facts: new Map() }, memory: new Map(), watched: new Map() } as unknown as Parameters<typeof clusterView>[1];

test("read API: the node event and the cluster's node say which kind and since when, only while it is out", () => {
  const nodes = nodeStates([cluster], snapshot);
  assert.deepEqual(nodes.get("home/s1"), { cluster: "home", node: "s1", reachable: false, kind: "vanished", since: SINCE });
  assert.deepEqual(nodes.get("home/s2"), { cluster: "home", node: "s2", reachable: true });
  assert.ok(READ_EVENTS.node.safeParse(nodes.get("home/s1")).success);
  const events = diffPictures(EMPTY_PICTURE, { deployments: [], nodes, lanes: [] });
  assert.deepEqual(events.filter((e) => e.event === "node").map((e) => e.data), [...nodes.values()]);
  assert.deepEqual(clusterView(cluster, reads, snapshot).nodes.map((n) => [n.name, n.reachable, n.outage]), [["s1", false, { kind: "vanished", since: SINCE }], ["s2", true, undefined]]);
  assert.equal("outages" in (deploymentViews(snapshot, {})[0] ?? {}), false, "the deployments answer keeps its shape: the outage is said on the node");
});

test("a node view follows its events: out with kind and since, then back without them", () => {
  const n: ClusterNodeView = { name: "s1", rank: 0, reachable: true };
  const out = withNodeEvent(n, { cluster: "home", node: "s1", reachable: false, kind: "frozen", since: SINCE });
  assert.deepEqual(out, { name: "s1", rank: 0, reachable: false, outage: { kind: "frozen", since: SINCE } });
  assert.deepEqual(withNodeEvent(out, { cluster: "home", node: "s1", reachable: true }), n);
});

test("top: a node out says which kind and since when (UTC); an unreachable node without an outage says unreachable", () => {
  const answers = {
    clusters: { clusters: [{ name: "home", nodes: [{ name: "s1", rank: 0, reachable: true }, { name: "s2", rank: 1, reachable: true }] }] },
    deployments: { deployments: [], strangers: [], unreachable: [] },
    lanes: { lanes: [] },
    boots: { boots: [] },
    metrics: { windows: [] },
  } as unknown as TopAnswers;
  let p = pictureOf(answers);
  p = applyEvent(p, { event: "node", data: { cluster: "home", node: "s1", reachable: false, kind: "vanished", since: SINCE } });
  p = applyEvent(p, { event: "node", data: { cluster: "home", node: "s2", reachable: false } });
  const lines = renderTop(p, { daemon: "http://d", now: Date.parse("2026-12-05T03:00:00Z") });
  assert.ok(lines.some((l) => /^ {2}s1 {2}vanished since 02:58:30 {2}memory not read yet/.test(l)), lines.join("\n"));
  assert.ok(lines.some((l) => /^ {2}s2 {2}unreachable {2}memory not read yet/.test(l)), lines.join("\n"));
});
