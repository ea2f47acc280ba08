import assert from "node:assert/strict";
import { test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { containerName, DEPLOYMENT_LABEL, encodeLabels } from "../../src/contract/deployment.js";
import type { Docker } from "../../src/remote/docker.js";
import { UnreachableError } from "../../src/remote/transport.js";
import { listNodes, targetDeployments, type Labelled } from "../../src/nodes/labels.js";
import { formatRemoval, stopDeployments, unreachableOf, type NodeOutcome } from "../../src/nodes/down.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { FakeCluster } from "../support/fake-cluster.js";
import type { FakeNode } from "../support/fake-node.js";

// `down`'s decisions over nodes in memory: which deployments a target names (labels only, no
// local state), what is removed on each node, what is said of a node that did not answer and of a
// rank that had exited, and that a later down finishes the job. Each `down` below is the command's
// own sequence (src/cli/down.ts): list the nodes, resolve the target, stop and record what it chose.

/** The labels of one deployment's rank, as up sets them. */
function labelsOf(deployment: string, recipe: string, r: number, nodes: readonly string[], lane?: string): Record<string, string> {
  return encodeLabels({
    deployment,
    recipe,
    recipe_hash: "h",
    engine: "vllm",
    served_model: recipe,
    rank: r,
    role: r === 0 ? "head" : "worker",
    node: nodes[r] ?? "?",
    nnodes: nodes.length,
    nodes: [...nodes],
    cluster: "fake",
    endpoint: `http://${nodes[0] ?? "?"}:8000`,
    ...(lane === undefined ? {} : { lane }),
  });
}

/** Fake nodes (test/support), each of which may be cut off: ssh to it fails, as a cut link makes it. */
class FakeNodes {
  readonly cut = new Set<string>();
  private constructor(readonly fc: FakeCluster) {}
  static async start(nodes: number): Promise<FakeNodes> {
    return new FakeNodes(await FakeCluster.start({ nodes }));
  }
  /** Rank `r` of `deployment` (its nodes `nodes`) on its node; exited when `running` is false. */
  add(deployment: string, recipe: string, r: number, nodes: readonly string[], extra: { lane?: string; running?: boolean } = {}): void {
    this.fc.node(nodes[r] ?? "?").add(containerName(deployment, r), labelsOf(deployment, recipe, r, nodes, extra.lane), { state: extra.running === false ? "exited" : "running" });
  }
  /** What runs on the nodes, as `node:container`. */
  list(): string[] {
    return this.fc.containers().map((c) => c.split(":").slice(0, 2).join(":"));
  }
  session(): ClusterSession {
    const reach = (node: string): void => {
      if (this.cut.has(node)) throw new UnreachableError(node, "ssh: connect to host timed out");
    };
    const docker = new Map(
      this.fc.nodes.map((n): [string, Docker] => {
        const d = Object.create(n) as FakeNode;
        d.containers = async (label) => (reach(n.node), n.containers(label));
        d.stopAndRemove = async (names, grace) => (reach(n.node), n.stopAndRemove(names, grace));
        return [n.node, d];
      }),
    );
    return { cluster: this.fc.cluster, docker };
  }
}

/** What `down` wrote to the store, in order, each with the containers the nodes still ran at that moment. */
type Recorded = { readonly what: "stopping" | "stopped"; readonly deployment: string; readonly running: readonly string[] }[];

/** `launcher down TARGET` (undefined: --all) on these nodes: what it chose, what happened on each node, what it recorded. */
async function down(nodes: FakeNodes, target: string | undefined, command = "down"): Promise<{ chosen: ReadonlySet<string>; outcomes: NodeOutcome[]; stopped: readonly string[]; recorded: Recorded }> {
  const listing = await listNodes(nodes.session());
  const found = listing.flatMap((l) => (l.reachable ? l.containers : []));
  const chosen = targetDeployments(target, found, command);
  const recorded: Recorded = [];
  const store = {
    deploymentStopping: (_cluster: string, deployment: string) => void recorded.push({ what: "stopping", deployment, running: nodes.list() }),
    deploymentStopped: (_cluster: string, deployment: string) => void recorded.push({ what: "stopped", deployment, running: nodes.list() }),
  };
  const nodesOf = (name: string): readonly string[] | undefined => found.find((c) => c.labels.deployment === name)?.labels.nodes;
  const how = { graceSeconds: 1, match: (c: Labelled) => chosen.has(c.labels.deployment), strays: target === undefined, nodesOf };
  const { outcomes, stopped } = await stopDeployments(listing, [...chosen], { store, cluster: "c", now: () => new Date() }, how);
  return { chosen, outcomes, stopped, recorded };
}

test("a name that fits several deployments is refused with them listed and nothing stopped; a qualified name stops exactly one", async () => {
  const nodes = await FakeNodes.start(2);
  nodes.add("alpha", "solo", 0, ["n1"]);
  // beta's lane is called alpha: one word, two deployments.
  nodes.add("beta", "solo", 0, ["n2"], { lane: "alpha" });
  for (const name of ["alpha", "solo"]) {
    await assert.rejects(down(nodes, name), (e: unknown) => {
      assert.ok(e instanceof UserError, String(e));
      assert.equal(e.message, `${name} names 2 deployments: deployment/alpha (recipe solo), deployment/beta (recipe solo, lane alpha)`);
      assert.match(e.hint ?? "", /launcher down deployment\/alpha/);
      return true;
    });
  }
  assert.deepEqual(nodes.list(), ["n1:launcher-alpha-r0", "n2:launcher-beta-r0"], "nothing was stopped");
  // logs resolves targets the same way.
  await assert.rejects(down(nodes, "alpha", "logs"), (e: unknown) => e instanceof UserError && /^alpha names 2 deployments/.test(e.message) && /launcher logs deployment\/alpha/.test(e.hint ?? ""));

  const one = await down(nodes, "deployment/alpha");
  assert.deepEqual(formatRemoval(one.outcomes, "launcher down deployment/alpha", "per-container"), ["stopped alpha: n1 launcher-alpha-r0"]);
  assert.deepEqual(nodes.list(), ["n2:launcher-beta-r0"]);
  const lane = await down(nodes, "lane/alpha");
  assert.deepEqual(formatRemoval(lane.outcomes, "launcher down lane/alpha", "per-container"), ["stopped beta: n2 launcher-beta-r0"]);
  assert.deepEqual(nodes.list(), []);
});

test("a qualified recipe name stops every deployment of it; --all stops everything, strays too", async () => {
  const nodes = await FakeNodes.start(3);
  nodes.add("alpha", "solo", 0, ["n1"]);
  nodes.add("beta", "solo", 0, ["n2"], { lane: "alpha" });
  nodes.add("other", "big", 0, ["n3"]);
  assert.deepEqual([...(await down(nodes, "recipe/solo")).chosen], ["alpha", "beta"]);
  assert.deepEqual(nodes.list(), ["n3:launcher-other-r0"]);
  // A container that says it is launcher's but whose labels do not decode: only --all removes it.
  nodes.fc.node("n1").add("launcher-odd-r0", { [DEPLOYMENT_LABEL]: "odd" });
  await down(nodes, "odd");
  assert.deepEqual(nodes.list(), ["n1:launcher-odd-r0", "n3:launcher-other-r0"]);
  await down(nodes, undefined);
  assert.deepEqual(nodes.list(), []);
});

test("down needs no local state: every rank is stopped from the labels, an exited one said so; again, there is nothing to stop", async () => {
  const nodes = await FakeNodes.start(3);
  nodes.add("practice-2x", "practice-2x", 0, ["n1", "n2"]);
  nodes.add("practice-2x", "practice-2x", 1, ["n1", "n2"], { running: false });
  nodes.add("bystander", "other", 0, ["n3"]);
  const first = await down(nodes, "practice-2x");
  assert.deepEqual(formatRemoval(first.outcomes, "launcher down practice-2x", "per-container"), [
    "stopped practice-2x: n1 launcher-practice-2x-r0",
    "stopped practice-2x: n2 launcher-practice-2x-r1 (had already exited)",
  ]);
  assert.deepEqual(first.stopped, ["practice-2x"], "recorded stopped: every node answered");
  // Marked stopping before anything was removed (a daemon supervising it must not boot it again), stopped after.
  assert.deepEqual(first.recorded.map((r) => [r.what, r.deployment, r.running.length]), [["stopping", "practice-2x", 3], ["stopped", "practice-2x", 1]]);
  assert.deepEqual(nodes.list(), ["n3:launcher-bystander-r0"], "no other deployment touched");
  const again = await down(nodes, "practice-2x");
  // The command says "nothing to stop" exactly when every node answered and removed nothing.
  assert.ok(again.outcomes.every((o) => o.kind === "removed" && o.removed.length === 0));
});

test("a node that cannot be reached: down says what was not stopped there and how to finish, records nothing stopped; a later down finishes", async () => {
  const nodes = await FakeNodes.start(2);
  nodes.add("practice-2x", "practice-2x", 0, ["n1", "n2"]);
  nodes.add("practice-2x", "practice-2x", 1, ["n1", "n2"]);
  nodes.cut.add("n2");
  const cut = await down(nodes, "practice-2x");
  assert.deepEqual(cut.outcomes.filter((o) => o.kind === "removed").flatMap((o) => o.removed.map((r) => `${r.node}/${r.container}`)), ["n1/launcher-practice-2x-r0"]);
  assert.deepEqual(unreachableOf(cut.outcomes).map((u) => u.node), ["n2"]);
  assert.deepEqual(cut.stopped, [], "not recorded stopped: n2 may still run it");
  assert.deepEqual(cut.recorded.map((r) => r.what), ["stopping"]);
  const lines = formatRemoval(cut.outcomes, "launcher down practice-2x", "per-container");
  assert.equal(lines.length, 2);
  assert.match(lines[1] ?? "", /^NOT stopped on n2: unreachable \(SSH unreachable: ssh: connect to host timed out\); what runs there stays until `launcher down practice-2x` is run again once it answers$/);
  assert.deepEqual(nodes.list(), ["n2:launcher-practice-2x-r1"], "what n2 ran is still there");

  nodes.cut.delete("n2");
  const later = await down(nodes, "practice-2x");
  assert.deepEqual(formatRemoval(later.outcomes, "launcher down practice-2x", "per-container"), ["stopped practice-2x: n2 launcher-practice-2x-r1"]);
  assert.deepEqual(later.stopped, ["practice-2x"]);
  assert.deepEqual(later.recorded.map((r) => r.what), ["stopping", "stopped"]);
  assert.deepEqual(nodes.list(), []);
});
