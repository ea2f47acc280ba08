import assert from "node:assert/strict";
import { test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { containerName, DEPLOYMENT_LABEL, LABELS } from "../../src/contract/deployment.js";
import type { Docker } from "../../src/remote/docker.js";
import { UnreachableError } from "../../src/remote/transport.js";
import { unreachableOf } from "../../src/nodes/down.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { LaneRecord } from "../../src/store/store.js";
import { down as downUseCase, type DownResult } from "../../src/app/down.js";
import { logSources } from "../../src/app/logs.js";
import { downJson, downText, unfinishedLine } from "../../src/cli/down.js";
import { FakeCluster, rankLabels } from "../support/fake-cluster.js";
import type { FakeNode } from "../support/fake-node.js";

// `down`'s decisions over nodes in memory: which deployments a target names (labels only, no
// local state), what is removed on each node, what is said of a node that did not answer and of a
// rank that had exited, what becomes of a lane it names, and that a later down finishes the job.
// Each `down` below is the command's own use case (src/app/down.ts, which src/cli/down.ts calls)
// and its words are the CLI's own renderings; `logs` resolves its target through
// src/app/logs.ts, which src/cli/logs.ts calls.


/** Fake nodes (test/support), each of which may be cut off: ssh to it fails, as a cut link makes it. */
class FakeNodes {
  readonly cut = new Set<string>();
  private constructor(readonly fc: FakeCluster) {}
  static async start(nodes: number): Promise<FakeNodes> {
    return new FakeNodes(await FakeCluster.start({ nodes }));
  }
  /** Rank `r` of `deployment` (its nodes `nodes`) on its node; exited when `running` is false. */
  add(deployment: string, recipe: string, r: number, nodes: readonly string[], extra: { lane?: string; running?: boolean } = {}): void {
    this.fc.node(nodes[r] ?? "?").add(containerName(deployment, r), rankLabels(deployment, recipe, r, nodes, extra.lane), { state: extra.running === false ? "exited" : "running" });
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
type Recorded = { readonly what: "stopping" | "stopped" | "lane"; readonly deployment: string; readonly running: readonly string[] }[];

/** What `launcher down` did: the use case's result and what it wrote to the store. */
interface Down extends DownResult {
  readonly recorded: Recorded;
  /** Said of containers whose labels do not decode. */
  readonly warnings: readonly string[];
}

/** `launcher down TARGET` (undefined: --all) on these nodes, with these lanes in the store. */
async function down(nodes: FakeNodes, target: string | undefined, lanes: Map<string, LaneRecord> = new Map()): Promise<Down> {
  const recorded: Recorded = [];
  const warnings: string[] = [];
  const store = {
    deploymentStopping: (_cluster: string, deployment: string) => void recorded.push({ what: "stopping", deployment, running: nodes.list() }),
    deploymentStopped: (_cluster: string, deployment: string) => void recorded.push({ what: "stopped", deployment, running: nodes.list() }),
    lane: (name: string) => lanes.get(name),
    setLane: (l: LaneRecord) => void (lanes.set(l.name, l), recorded.push({ what: "lane", deployment: l.deployment ?? "", running: nodes.list() })),
  };
  const request = { target, all: target === undefined, graceSeconds: 1, now: () => new Date(), warn: (line: string) => void warnings.push(line) };
  const result = await downUseCase(nodes.session(), request, (fn) => fn(store));
  return { ...result, recorded, warnings };
}

/** Lane `name` serving `deployment`, as the store keeps it. */
const servingLane = (name: string, deployment: string): LaneRecord => ({ name, cluster: "fake", deployment, recipe: "solo", served_model: "solo", state: "serving", since: "2026-01-01T00:00:00.000Z" });

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
  // logs resolves targets the same way, and says so in its own words.
  await assert.rejects(logSources(nodes.session(), "alpha", undefined), (e: unknown) => e instanceof UserError && /^alpha names 2 deployments/.test(e.message) && /launcher logs deployment\/alpha/.test(e.hint ?? ""));
  const logs = await logSources(nodes.session(), "lane/alpha", undefined);
  assert.deepEqual([[...logs.chosen], logs.sources.map((s) => `${s.node}/${s.c.name}`), logs.lost], [["beta"], ["n2/launcher-beta-r0"], []]);

  const lanes = new Map([["alpha", servingLane("alpha", "beta")]]);
  const one = await down(nodes, "deployment/alpha", lanes);
  assert.deepEqual(downText(one, "deployment/alpha"), ["stopped alpha: n1 launcher-alpha-r0"]);
  assert.deepEqual(nodes.list(), ["n2:launcher-beta-r0"]);
  assert.equal(lanes.get("alpha")?.state, "serving", "deployment/alpha names no lane");
  const lane = await down(nodes, "lane/alpha", lanes);
  assert.deepEqual(downText(lane, "lane/alpha"), ["stopped beta: n2 launcher-beta-r0"]);
  assert.deepEqual(downJson(lane), { removed: [{ node: "n2", container: "launcher-beta-r0", deployment: "beta", was_running: true }], unreachable: [], complete: true });
  assert.deepEqual(nodes.list(), []);
  assert.deepEqual([lanes.get("alpha")?.state, lane.lane?.state], ["empty", "empty"], "the lane it named is emptied");
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
  const odd = await down(nodes, "odd");
  assert.deepEqual(downText(odd, "odd"), ["nothing to stop for odd"]);
  assert.match(odd.warnings.join("\n"), /^n1: container launcher-odd-r0 carries launcher labels that do not decode .*only `launcher down --all` removes it$/);
  assert.deepEqual(nodes.list(), ["n1:launcher-odd-r0", "n3:launcher-other-r0"]);
  const all = await down(nodes, undefined);
  assert.deepEqual(downText(all, undefined), ["stopped odd: n1 launcher-odd-r0", "stopped other: n3 launcher-other-r0"]);
  assert.deepEqual(all.warnings, [], "--all removes what it would have warned of");
  assert.deepEqual(nodes.list(), []);
});

test("down needs no local state: every rank is stopped from the labels, an exited one said so; again, there is nothing to stop", async () => {
  const nodes = await FakeNodes.start(3);
  nodes.add("practice-2x", "practice-2x", 0, ["n1", "n2"]);
  nodes.add("practice-2x", "practice-2x", 1, ["n1", "n2"], { running: false });
  nodes.add("bystander", "other", 0, ["n3"]);
  const first = await down(nodes, "practice-2x");
  assert.deepEqual(downText(first, "practice-2x"), [
    "stopped practice-2x: n1 launcher-practice-2x-r0",
    "stopped practice-2x: n2 launcher-practice-2x-r1 (had already exited)",
  ]);
  assert.deepEqual(first.stopped, ["practice-2x"], "recorded stopped: every node answered");
  // Marked stopping before anything was removed (a daemon supervising it must not boot it again), stopped after.
  assert.deepEqual(first.recorded.map((r) => [r.what, r.deployment, r.running.length]), [["stopping", "practice-2x", 3], ["stopped", "practice-2x", 1]]);
  assert.deepEqual(nodes.list(), ["n3:launcher-bystander-r0"], "no other deployment touched");
  const again = await down(nodes, "practice-2x");
  // The command says "nothing to stop" exactly when every node answered and removed nothing.
  assert.deepEqual(downText(again, "practice-2x"), ["nothing to stop for practice-2x"]);
  assert.deepEqual(downJson(again), { removed: [], unreachable: [], complete: true });
});

test("a node that cannot be reached: down says what was not stopped there and how to finish, records nothing stopped; a later down finishes", async () => {
  const nodes = await FakeNodes.start(2);
  nodes.add("practice-2x", "practice-2x", 0, ["n1", "n2"]);
  nodes.add("practice-2x", "practice-2x", 1, ["n1", "n2"]);
  nodes.cut.add("n2");
  // logs shows what the nodes that answered logged, and names the one that did not.
  const logs = await logSources(nodes.session(), "practice-2x", undefined);
  assert.deepEqual([logs.sources.map((s) => `${s.node}/${s.c.name}`), logs.lost], [["n1/launcher-practice-2x-r0"], ["n2 (SSH unreachable: ssh: connect to host timed out)"]]);
  const cut = await down(nodes, "practice-2x");
  assert.deepEqual(cut.outcomes.filter((o) => o.kind === "removed").flatMap((o) => o.removed.map((r) => `${r.node}/${r.container}`)), ["n1/launcher-practice-2x-r0"]);
  assert.deepEqual(unreachableOf(cut.outcomes).map((u) => u.node), ["n2"]);
  assert.deepEqual(cut.stopped, [], "not recorded stopped: n2 may still run it");
  assert.deepEqual(cut.recorded.map((r) => r.what), ["stopping"]);
  const lines = downText(cut, "practice-2x");
  assert.equal(lines.length, 2);
  assert.match(lines[1] ?? "", /^NOT stopped on n2: unreachable \(SSH unreachable: ssh: connect to host timed out\); what runs there stays until `launcher down practice-2x` is run again once it answers$/);
  assert.equal(unfinishedLine(cut), "launcher: n2 could not be reached: what runs there was not stopped; once it answers, `launcher down practice-2x` finishes the job");
  assert.deepEqual(downJson(cut), {
    removed: [{ node: "n1", container: "launcher-practice-2x-r0", deployment: "practice-2x", was_running: true }],
    unreachable: [{ node: "n2", reason: "SSH unreachable: ssh: connect to host timed out" }],
    complete: false,
  });
  assert.deepEqual(nodes.list(), ["n2:launcher-practice-2x-r1"], "what n2 ran is still there");

  nodes.cut.delete("n2");
  const later = await down(nodes, "practice-2x");
  assert.deepEqual(downText(later, "practice-2x"), ["stopped practice-2x: n2 launcher-practice-2x-r1"]);
  assert.deepEqual(later.stopped, ["practice-2x"]);
  assert.deepEqual(later.recorded.map((r) => r.what), ["stopping", "stopped"]);
  assert.deepEqual(nodes.list(), []);
});

test("a lane named while one of its nodes does not answer is left as it is; a deployment whose head carries no node list is recorded stopped when only a node it never ran on is cut", async () => {
  const nodes = await FakeNodes.start(3);
  nodes.add("chat-a", "solo", 0, ["n1", "n2"], { lane: "chat" });
  nodes.add("chat-a", "solo", 1, ["n1", "n2"], { lane: "chat" });
  nodes.cut.add("n2");
  const lanes = new Map([["chat", servingLane("chat", "chat-a")]]);
  const cut = await down(nodes, "lane/chat", lanes);
  assert.deepEqual([cut.stopped, cut.lane, lanes.get("chat")?.state], [[], undefined, "serving"], "n2 may still serve the lane");
  assert.deepEqual(cut.recorded.map((r) => r.what), ["stopping"]);
  nodes.cut.delete("n2");
  const later = await down(nodes, "chat", lanes);
  assert.deepEqual([later.stopped, lanes.get("chat")?.state], [["chat-a"], "empty"]);
  assert.deepEqual(later.recorded.map((r) => r.what), ["stopping", "stopped", "lane"]);

  // Its first rank's labels lack the node list (launcher.nodes), its second's have it: the list is
  // read from the rank that has it, so n3, which never ran it, does not hold back its record.
  const labels = rankLabels("old", "solo", 0, ["n1", "n2"]);
  delete labels[LABELS.nodes];
  nodes.fc.node("n1").add(containerName("old", 0), labels);
  nodes.add("old", "solo", 1, ["n1", "n2"]);
  nodes.cut.add("n3");
  const old = await down(nodes, "old");
  assert.deepEqual(downText(old, "old").slice(0, 2), ["stopped old: n1 launcher-old-r0", "stopped old: n2 launcher-old-r1"]);
  assert.deepEqual(old.stopped, ["old"], "recorded stopped: n3 never ran it");
});

test("logs --node: only that node is read; a node the cluster does not have is refused with the nodes it has", async () => {
  const nodes = await FakeNodes.start(2);
  nodes.add("practice-2x", "practice-2x", 0, ["n1", "n2"]);
  nodes.add("practice-2x", "practice-2x", 1, ["n1", "n2"]);
  const one = await logSources(nodes.session(), "practice-2x", "n2");
  assert.deepEqual(one.sources.map((s) => `${s.node}/${s.c.name}`), ["n2/launcher-practice-2x-r1"]);
  await assert.rejects(logSources(nodes.session(), "practice-2x", "n9"), (e: unknown) => e instanceof UserError && /^no node n9 in /.test(e.message) && e.hint === "nodes: n1, n2");
});
