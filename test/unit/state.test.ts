import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BOOT_PHASES,
  containerName,
  decodeLabels,
  decodeStatusLine,
  DEPLOYMENT_STATUSES,
  encodeLabels,
  encodeStatusLine,
  LABEL_NAMES,
  RANK_STATES,
  STATUS_PHASES,
  type DeploymentLabels,
  type StatusLine,
} from "../../src/contract/deployment.js";
import { formatRemoval, fullyStopped, type NodeOutcome } from "../../src/nodes/down.js";
import { parseTarget, resolveTarget, type Labelled } from "../../src/nodes/labels.js";
import { judge, needsHeadProbe, rankView } from "../../src/nodes/status.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import type { ContainerInfo } from "../../src/remote/docker.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const LONG_AGO = "2026-01-01T00:00:00.000Z";

function labels(deployment: string, rank: number, over: Partial<DeploymentLabels> = {}): DeploymentLabels {
  return {
    deployment,
    recipe: deployment,
    recipe_hash: "h",
    served_model: "m",
    rank,
    role: rank === 0 ? "head" : "worker",
    node: `n${rank + 1}`,
    nnodes: 2,
    nodes: ["n1", "n2"],
    cluster: "c",
    endpoint: "http://n1:8000",
    ...over,
  };
}

function member(l: DeploymentLabels, state = "running", startedAt = LONG_AGO): Labelled {
  const c: ContainerInfo = { id: "x", name: containerName(l.deployment, l.rank), labels: encodeLabels(l), state, running: state === "running", exitCode: state === "running" ? 0 : 137, startedAt, finishedAt: "", image: "i" };
  return { node: l.node, c, labels: l };
}

test("contract: labels round-trip through the encoder and decoder; every label is in the exported list", () => {
  const l = labels("d", 1, { lane: "chat" });
  const encoded = encodeLabels(l);
  assert.deepEqual(Object.keys(encoded).filter((k) => !LABEL_NAMES.includes(k)), []);
  assert.deepEqual(decodeLabels(encoded), { ok: true, labels: l });
  const { nodes: _nodes, lane: _lane, ...old } = l;
  const oldEncoded = encodeLabels(old);
  assert.deepEqual(decodeLabels(oldEncoded), { ok: true, labels: old }, "containers from before the nodes label still decode");
  // Made by hand (the gateway test's ghost) or by an older launcher: descriptive labels read as "?".
  const { "launcher.role": _role, "launcher.cluster": _cluster, "launcher.recipe": _recipe, ...sparse } = encoded;
  const decoded = decodeLabels(sparse);
  assert.deepEqual(decoded.ok && [decoded.labels.role, decoded.labels.cluster, decoded.labels.recipe], ["worker", "?", "?"]);
  const bad = decodeLabels({ ...encoded, "launcher.rank": "one" });
  assert.equal(bad.ok, false);
  assert.match(bad.ok ? "" : bad.problem, /launcher\.rank/);
});

test("contract: the engine's boot phases are the contract's; status phases add only unknown and -", () => {
  for (const p of vllm.bootPhases) assert.ok(BOOT_PHASES.includes(p.phase), p.phase);
  assert.deepEqual(STATUS_PHASES.filter((p) => !(BOOT_PHASES as readonly string[]).includes(p)), ["unknown", "-"]);
  assert.ok(RANK_STATES.includes("unreachable"));
  assert.ok(DEPLOYMENT_STATUSES.includes("unreachable"));
});

test("contract: the status line decodes what status writes and refuses a status it does not know", () => {
  const line: StatusLine = {
    deployments: [
      {
        deployment: "d",
        recipe: "r",
        recipe_hash: "h",
        served_model: "m",
        endpoint: "http://n1:8000",
        status: "serving",
        phase: "serving",
        missing: [],
        unreachable: ["n2"],
        ranks: [
          { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: LONG_AGO },
          { rank: 1, node: "n2", container: "launcher-d-r1", state: "unreachable" },
        ],
      },
    ],
    unreachable: ["n2"],
    at: NOW.toISOString(),
  };
  assert.deepEqual(decodeStatusLine(encodeStatusLine({ ...line, extra: 1 } as StatusLine)), line, "only the contract's fields travel");
  const wrong = encodeStatusLine(line).replace('"status":"serving"', '"status":"sleeping"');
  assert.throws(() => decodeStatusLine(wrong), /deployments\.0\.status/);
  assert.throws(() => decodeStatusLine('{"deployments":[]}'), /unreachable/);
});

test("status: a rank on a node that could not be read is unreachable, not missing; the head decides", () => {
  const members = [member(labels("d", 0))];
  const v = rankView(members, new Set(["n2"]), NOW);
  assert.deepEqual(v.missing, []);
  assert.deepEqual(v.unreachable, ["n2"]);
  assert.deepEqual(v.ranks.map((r) => [r.rank, r.node, r.state, r.container]), [[0, "n1", "running", "launcher-d-r0"], [1, "n2", "unreachable", "launcher-d-r1"]]);
  assert.equal(needsHeadProbe(v), true);
  assert.deepEqual(judge(v, { healthy: true }), { status: "serving", phase: "serving" }, "the head answers: it serves");
  assert.deepEqual(judge(v, { healthy: false, phase: "loading" }), { status: "unreachable", phase: "unknown" }, "cannot be judged");

  // The head's node is the one that cannot be read: the worker alone cannot tell.
  const headLost = rankView([member(labels("d", 1))], new Set(["n1"]), NOW);
  assert.deepEqual(headLost.ranks.map((r) => r.state), ["unreachable", "running"]);
  assert.equal(judge(headLost, { healthy: false }).status, "unreachable");

  // A node that answered and has no container: that rank is gone.
  const gone = rankView(members, new Set(), NOW);
  assert.deepEqual(gone.missing, ["rank 1 (no container)"]);
  assert.equal(needsHeadProbe(gone), false);
  assert.deepEqual(judge(gone, undefined), { status: "degraded", phase: "-" });
  // Another node unreachable does not excuse a rank missing from one that answered.
  const elsewhere = rankView(members, new Set(["n3"]), NOW);
  assert.deepEqual([elsewhere.missing, elsewhere.unreachable], [["rank 1 (no container)"], []]);

  // Every node read: running and healthy serves, running and not healthy boots.
  const all = rankView([member(labels("d", 0)), member(labels("d", 1))], new Set(), NOW);
  assert.deepEqual(judge(all, { healthy: true }), { status: "serving", phase: "serving" });
  assert.deepEqual(judge(all, { healthy: false, phase: "kv-cache" }), { status: "booting", phase: "kv-cache" });
  const exited = rankView([member(labels("d", 0)), member(labels("d", 1), "exited")], new Set(), NOW);
  assert.deepEqual(exited.missing, ["rank 1 on n2 (exited, exit 137)"]);

  // A start in progress: fresh ranks, the rest not created yet.
  const fresh = rankView([member(labels("d", 1), "running", "2026-01-01T00:59:50.000Z")], new Set(), NOW);
  assert.deepEqual(judge(fresh, undefined), { status: "booting", phase: "starting" });

  // Containers without the nodes label: a missing rank may be on any node that could not be read.
  const { nodes: _n, ...old } = labels("d", 0);
  const legacy = rankView([member(old)], new Set(["n2"]), NOW);
  assert.deepEqual([legacy.missing, legacy.unreachable, legacy.ranks[1]?.state], [[], ["n2"], "unreachable"]);
});

const containers = (...ls: DeploymentLabels[]) => ls.map((l) => ({ labels: l }));

test("targets: one name, one deployment; a name that fits several is refused with the candidates; qualifiers pick a kind", () => {
  assert.deepEqual(parseTarget("lane/chat"), { kind: "lane", name: "chat" });
  assert.deepEqual(parseTarget("chat"), { name: "chat" });
  assert.deepEqual(parseTarget("other/chat"), { name: "other/chat" });
  const alpha = labels("alpha", 0, { recipe: "solo" });
  const beta = labels("beta", 0, { recipe: "solo", lane: "alpha" });
  const both = containers(alpha, labels("alpha", 1, { recipe: "solo" }), beta);

  assert.deepEqual(resolveTarget("beta", both, "down"), { ok: true, deployments: ["beta"] });
  assert.deepEqual(resolveTarget("nothing", both, "down"), { ok: true, deployments: [] });
  assert.deepEqual(resolveTarget(undefined, both, "down"), { ok: true, deployments: ["alpha", "beta"] }, "--all");

  const byLane = resolveTarget("alpha", both, "down");
  assert.equal(byLane.ok, false);
  assert.deepEqual(byLane.ok ? [] : byLane.candidates, ["deployment/alpha (recipe solo)", "deployment/beta (recipe solo, lane alpha)"]);
  assert.match(byLane.ok ? "" : byLane.hint, /launcher down deployment\/alpha, launcher down lane\/alpha/);
  const byRecipe = resolveTarget("solo", both, "logs");
  assert.equal(byRecipe.ok, false);
  assert.match(byRecipe.ok ? "" : byRecipe.hint, /launcher logs recipe\/solo/);

  assert.deepEqual(resolveTarget("deployment/alpha", both, "down"), { ok: true, deployments: ["alpha"] });
  assert.deepEqual(resolveTarget("lane/alpha", both, "down"), { ok: true, deployments: ["beta"] });
  assert.deepEqual(resolveTarget("recipe/solo", both, "down"), { ok: true, deployments: ["alpha", "beta"] }, "a qualified name means all of its kind");
  // A deployment in its own lane of the same name is one deployment, not two.
  assert.deepEqual(resolveTarget("chat", containers(labels("chat", 0, { lane: "chat" })), "down"), { ok: true, deployments: ["chat"] });
});

test("down: the outcome says what was removed and which node was not reached; stopped only when it is", () => {
  const outcomes: NodeOutcome[] = [
    { node: "n1", kind: "removed", removed: [{ node: "n1", container: "launcher-d-r0", deployment: "d", wasRunning: true }] },
    { node: "n2", kind: "unreachable", reason: "SSH unreachable: no answer in time", deployments: [] },
    { node: "n3", kind: "removed", removed: [{ node: "n3", container: "launcher-e-r0", deployment: "e", wasRunning: false }] },
  ];
  assert.deepEqual(formatRemoval(outcomes, "launcher down d", "per-container"), [
    "stopped d: n1 launcher-d-r0",
    "stopped e: n3 launcher-e-r0 (had already exited)",
    "NOT stopped on n2: unreachable (SSH unreachable: no answer in time); what runs there stays until `launcher down d` is run again once it answers",
  ]);
  assert.deepEqual(formatRemoval(outcomes, "launcher down d", "summary")[0], "removed 2 containers (n1/launcher-d-r0, n3/launcher-e-r0)");
  assert.deepEqual(formatRemoval([], "x", "summary"), ["removed 0 containers (none)"]);
  const nodes = new Map([["d", ["n1", "n2"]], ["e", ["n3"]]]);
  assert.equal(fullyStopped(outcomes, "d", (n) => nodes.get(n)), false, "d has a rank on n2");
  assert.equal(fullyStopped(outcomes, "e", (n) => nodes.get(n)), true, "e never ran on n2");
  assert.equal(fullyStopped(outcomes, "e", () => undefined), false, "nodes unknown: any unreachable node may hold it");
  const midway: NodeOutcome[] = [{ node: "n3", kind: "unreachable", reason: "r", deployments: ["e"] }];
  assert.equal(fullyStopped(midway, "e", (n) => nodes.get(n)), false, "lost while stopping it");
});
