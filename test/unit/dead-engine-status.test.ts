import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import { containerName, decodeStatusLine, encodeStatusLine, encodeLabels, type DeploymentLabels, type DeploymentStatus } from "../../src/contract/deployment.js";
import { readBoot } from "../../src/engine/boot-log.js";
import { sglang } from "../../src/engine/sglang/adapter.js";
import { statusLines } from "../../src/cli/status.js";
import { routeTable } from "../../src/gateway/routes.js";
import type { Labelled } from "../../src/nodes/labels.js";
import { clusterStatus, judge, rankView } from "../../src/nodes/status.js";
import { LABELS } from "../../src/contract/deployment.js";
import { API_UP, FakeCluster, HEAD_WAITING, RECIPE, WORKER_CONNECTED } from "../support/fake-cluster.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { failureOf, INITIAL, supervise, type SuperviseTiming } from "../../src/supervise/supervise.js";

// An engine whose own log says it ended while its containers run (a scheduler's exception, read
// before its process tree exits) is degraded with that fault, not a boot in progress, so that the
// daemon's supervisor restarts it with the reason (issue 31); so is one whose log says it served
// and whose /health no longer answers (a hung scheduler: test/unit/sglang-hung.test.ts).

const NOW = new Date("2026-01-01T01:00:00.000Z");
const FAULT = "RuntimeError: CUDA error: device-side assert triggered";
const labels = (rank: number): DeploymentLabels => ({
  deployment: "sg",
  recipe: "sg",
  recipe_hash: "h",
  served_model: "m",
  rank,
  role: rank === 0 ? "head" : "worker",
  node: `n${rank + 1}`,
  nnodes: 2,
  nodes: ["n1", "n2"],
  cluster: "c",
  endpoint: "http://n1:8000",
  engine: "sglang",
});
const member = (rank: number): Labelled => {
  const l = labels(rank);
  const c: ContainerInfo = { id: "x", name: containerName("sg", rank), labels: encodeLabels(l), state: "running", running: true, exitCode: 0, startedAt: "2026-01-01T00:00:00.000Z", finishedAt: "", image: "i" };
  return { node: l.node, c, labels: l };
};
const RUNNING = rankView([member(0), member(1)], new Set(), NOW);

const status = (over: Partial<DeploymentStatus>): DeploymentStatus => ({
  deployment: "sg",
  recipe: "sg",
  recipe_hash: "h",
  engine: "sglang",
  restart: "on-failure",
  served_model: "m",
  endpoint: "http://n1:8000",
  status: "serving",
  phase: "serving",
  missing: [],
  unreachable: [],
  ranks: RUNNING.ranks,
  ...over,
});

test("the head's log after it served: the scheduler's exception is the fault a status probe reads", () => {
  const T = "[2026-12-05 10:00:0";
  const s = readBoot(sglang, [
    `${T}1 TP0] Load weight begin. avail mem=119.20 GB`,
    `${T}9] The server is fired up and ready to roll!`,
    `${T}9 TP0] Scheduler hit an exception: Traceback (most recent call last):`,
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2990, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    FAULT,
    `${T}9] Received sigquit from a child process. It usually means the child failed.`,
  ]);
  assert.equal(s.phase, "serving");
  assert.ok(s.fatal !== undefined, "a line that ends the engine");
  assert.equal(s.cause, FAULT);
});

test("every rank running, /health failing and the head's log ending the engine: degraded with its fault, not booting", () => {
  assert.deepEqual(judge(RUNNING, { healthy: false, phase: "serving", fault: FAULT }), { status: "degraded", phase: "-", fault: FAULT });
  // Without such a line it is still a boot in progress, as before.
  assert.deepEqual(judge(RUNNING, { healthy: false, phase: "kv-cache" }), { status: "booting", phase: "kv-cache" });
  // The fault travels in status --json and the read API, and status says it.
  const d = status({ status: "degraded", phase: "-", fault: FAULT });
  const line = { deployments: [d], unreachable: [], at: NOW.toISOString() };
  assert.equal(decodeStatusLine(encodeStatusLine(line)).deployments[0]?.fault, FAULT);
  const text = statusLines([d]).join("\n");
  assert.match(text, /^sg {2}degraded {2}recipe sg/m);
  assert.match(text, /^ {2}fault: RuntimeError: CUDA error: device-side assert triggered \(its head's log; the engine no longer answers \/health\)$/m);
  // The gateway refuses it as degraded with the same cause, not as a boot.
  const r = routeTable([{ ...d, cluster: "c" }], []).resolve("m");
  assert.ok(r.kind === "unavailable", JSON.stringify(r));
  assert.equal(r.code, "deployment_degraded");
  assert.equal(r.message, `model m (deployment sg) is not serving: its engine ended: ${FAULT}`);
});

test("the supervisor restarts such a deployment with its fault as the reason, also when it first sees it after the death", () => {
  const timing: SuperviseTiming = { confirmMs: 1000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 60_000 };
  const policy = { mode: "on-failure" } as const;
  const dead = status({ status: "degraded", phase: "-", fault: FAULT });
  const failure = failureOf(dead);
  assert.equal(failure?.kind, "unhealthy");
  assert.equal(failure?.message, `the engine does not answer /health (degraded): its log says ${FAULT}`);
  // A daemon started after the scheduler died (the store says it served): watched, then confirmed, then restarted.
  const seen = supervise(INITIAL, { kind: "observed", at: 0, status: dead, recordedReady: true }, policy, timing);
  assert.equal(seen.state?.phase, "ready");
  const confirmed = supervise(seen.state ?? INITIAL, { kind: "observed", at: 2000, status: dead, recordedReady: true }, policy, timing);
  assert.deepEqual(confirmed.actions, [{ kind: "restart", attempt: 1, failure }]);
  // The same deployment read as a boot (what status said before): never restarted by a daemon that did not see it serve.
  const asBoot = status({ status: "booting", phase: "serving" });
  const never = supervise(INITIAL, { kind: "observed", at: 0, status: asBoot, recordedReady: true }, policy, timing);
  assert.deepEqual([never.state?.phase, never.actions], ["watching", []]);
});

test("a head whose log reached its API line between a failed /health and the log's read is serving, not degraded: /health is asked once more", async () => {
  const fc = await FakeCluster.start();
  const plan = fc.plan(RECIPE, { deployment: "late" });
  const head = plan.nodes[0];
  assert.ok(head);
  const url = new URL(head.labels[LABELS.endpoint] ?? "");
  // The engine's API answers from its second /health on: the first came a moment before it listened.
  let asked = 0;
  const server = createServer((req, res) => void res.writeHead(req.url === "/health" && ++asked > 1 ? 200 : 503).end());
  await new Promise<void>((r) => server.listen(Number(url.port), url.hostname, r));
  try {
    fc.place(plan, "0123456789ab", (rank) => (rank === 0 ? [...HEAD_WAITING, API_UP(Number(url.port))] : WORKER_CONNECTED));
    const d = (await clusterStatus(fc.session, new Date())).deployments.find((x) => x.deployment === "late");
    assert.equal(d?.status, "serving", JSON.stringify(d));
    assert.equal(asked, 2);
  } finally {
    server.close();
    await fc.close();
  }
});
