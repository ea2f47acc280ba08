import assert from "node:assert/strict";
import { test } from "node:test";
import { containerName, encodeLabels, type DeploymentLabels, type DeploymentStatus } from "../../src/contract/deployment.js";
import { routeTable } from "../../src/gateway/routes.js";
import { judge, rankView } from "../../src/nodes/status.js";
import type { Labelled } from "../../src/nodes/labels.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { failureOf, INITIAL, supervise, type SuperviseTiming } from "../../src/supervise/supervise.js";

// A hung SGLang scheduler (alive, silent): its process and HTTP live on, /health answers 503 after
// SGLANG_HEALTH_CHECK_TIMEOUT (http_server.py health_generate), and its log has no line that ends
// it. Its head's log says it served: status calls it degraded, not a boot, so that a daemon that
// first meets it restarts it too (issue 31).

const NOW = new Date("2026-01-01T01:00:00.000Z");
const member = (rank: number): Labelled => {
  const l: DeploymentLabels = { deployment: "sg", recipe: "sg", recipe_hash: "h", served_model: "m", rank, role: rank === 0 ? "head" : "worker", node: `n${rank + 1}`, nnodes: 2, nodes: ["n1", "n2"], cluster: "c", endpoint: "http://n1:8000", engine: "sglang" };
  const c: ContainerInfo = { id: "x", name: containerName("sg", rank), labels: encodeLabels(l), state: "running", running: true, exitCode: 0, startedAt: "2026-01-01T00:00:00.000Z", finishedAt: "", image: "i" };
  return { node: l.node, c, labels: l };
};
const RUNNING = rankView([member(0), member(1)], new Set(), NOW);

test("every rank running, the head's log past its ready line, /health failing: degraded (fails before: booting, phase serving)", () => {
  assert.deepEqual(judge(RUNNING, { healthy: false, phase: "serving" }), { status: "degraded", phase: "-" });
  // Before its ready line it is a boot in progress.
  assert.deepEqual(judge(RUNNING, { healthy: false, phase: "warmup" }), { status: "booting", phase: "warmup" });
});

test("a daemon that first meets a hung deployment restarts it (it never does for a boot)", () => {
  const timing: SuperviseTiming = { confirmMs: 1000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 60_000 };
  const { status, phase } = judge(RUNNING, { healthy: false, phase: "serving" });
  const hung: DeploymentStatus = { deployment: "sg", recipe: "sg", recipe_hash: "h", engine: "sglang", restart: "on-failure", served_model: "m", endpoint: "http://n1:8000", status, phase, missing: [], unreachable: [], ranks: RUNNING.ranks };
  const failure = failureOf(hung);
  assert.equal(failure?.kind, "unhealthy");
  assert.equal(failure?.message, "the engine does not answer /health (degraded, phase -)");
  const seen = supervise(INITIAL, { kind: "observed", at: 0, status: hung, recordedReady: true }, { mode: "on-failure" }, timing);
  const confirmed = supervise(seen.state ?? INITIAL, { kind: "observed", at: 2000, status: hung, recordedReady: true }, { mode: "on-failure" }, timing);
  assert.deepEqual(confirmed.actions, [{ kind: "restart", attempt: 1, failure }]);
});

test("the gateway refuses a hung deployment as degraded, saying its engine no longer answers (fails before: \"missing \" with nothing after)", () => {
  const { status, phase } = judge(RUNNING, { healthy: false, phase: "serving" });
  const hung: DeploymentStatus = { deployment: "sg", recipe: "sg", recipe_hash: "h", engine: "sglang", restart: "on-failure", served_model: "m", endpoint: "http://n1:8000", status, phase, missing: [], unreachable: [], ranks: RUNNING.ranks };
  const r = routeTable([{ ...hung, cluster: "c" }], []).resolve("m");
  assert.ok(r.kind === "unavailable", JSON.stringify(r));
  assert.equal(r.code, "deployment_degraded");
  assert.equal(r.message, "model m (deployment sg) is not serving: its engine no longer answers /health");
});
