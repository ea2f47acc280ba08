import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { advanceBoot, INITIAL_BOOT, timeMs, type BootState } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { abortable, Interrupted } from "../../src/config/abort.js";
import { culprit, rankBehind } from "../../src/boot/blame.js";
import { createdBy, newBootId, stampBoot } from "../../src/boot/boot.js";
import { judgeExisting } from "../../src/nodes/existing.js";
import { LABELS } from "../../src/contract/deployment.js";

const BOOT_LABEL = LABELS.boot;
import type { DeploymentStatus } from "../../src/nodes/status.js";

const clusterFile = "examples/clusters/spark-4x.toml";
const cluster = parseCluster(clusterFile, readFileSync(clusterFile, "utf8")).cluster;
assert.ok(cluster);
const recipe = resolveRecipe("practice-2x", fileRecipeSource(["recipes"])).recipe;
assert.ok(recipe);
const planOn = (options: Parameters<typeof planDeployment>[2] = {}): Plan => {
  assert.ok(cluster && recipe);
  const p = planDeployment(recipe, cluster, options);
  assert.ok(p.ok, JSON.stringify(p));
  return p.plan;
};

const container = (labels: Record<string, string>): ContainerInfo => ({
  id: "x",
  name: "launcher-practice-2x-r0",
  labels,
  state: "running",
  running: true,
  exitCode: 0,
  startedAt: "",
  finishedAt: "",
  image: "sha256:1",
});

test("a boot's id labels every container it runs, and only its rollback matches them", () => {
  const plan = planOn();
  const id = newBootId();
  assert.match(id, /^[0-9a-f]{12}$/);
  assert.notEqual(newBootId(), id, "each boot its own id");
  const stamped = stampBoot(plan, id);
  for (const [i, spec] of stamped.nodes.entries()) {
    const at = spec.argv.indexOf(`${BOOT_LABEL}=${id}`);
    assert.ok(at > 0 && spec.argv[at - 1] === "--label", spec.argv.join(" "));
    assert.ok(at < spec.argv.indexOf(plan.recipe.docker_image), "an option, before the image");
    assert.equal(spec.labels[BOOT_LABEL], id);
    // Everything else exactly as planned: `plan` output does not carry the boot.
    assert.deepEqual(spec.argv.filter((a, j) => j !== at && j !== at - 1), plan.nodes[i]?.argv);
  }
  assert.ok(!JSON.stringify(plan).includes(BOOT_LABEL), "the plan itself is not stamped");
  const mine = createdBy(id);
  assert.equal(mine({ c: container({ [BOOT_LABEL]: id, "launcher.deployment": "practice-2x" }) }), true);
  // The same deployment name started by another boot, or by a launcher before boot ids: not ours.
  assert.equal(mine({ c: container({ [BOOT_LABEL]: newBootId(), "launcher.deployment": "practice-2x" }) }), false);
  assert.equal(mine({ c: container({ "launcher.deployment": "practice-2x" }) }), false);
});

const status = (plan: Plan, over: Partial<DeploymentStatus> = {}): DeploymentStatus => ({
  deployment: plan.deployment,
  recipe: plan.recipe.id,
  recipe_hash: plan.recipe_hash,
  served_model: plan.served_model,
  endpoint: plan.endpoint,
  status: "serving",
  phase: "serving",
  missing: [],
  unreachable: [],
  ranks: plan.nodes.map((n) => ({ rank: n.rank, node: n.node, container: n.container, state: "running", started_at: "" })),
  ...(plan.lane === undefined ? {} : { lane: plan.lane }),
  ...over,
});

test("already running: only one that serves the same recipe with the same endpoint, nodes and lane", () => {
  const plan = planOn();
  assert.deepEqual(judgeExisting(plan, status(plan)), { same: true });

  const hung = judgeExisting(plan, status(plan, { status: "booting", phase: "loading" }));
  assert.equal(hung.same, false);
  if (!hung.same) {
    assert.match(hung.message, /exists on spark1, spark2 but does not serve \(status booting, phase loading\)/);
    assert.match(hung.hint, /launcher down practice-2x/);
  }

  const otherPort = judgeExisting(planOn({ apiPort: 9000 }), status(plan));
  assert.equal(otherPort.same, false);
  if (!otherPort.same) assert.match(otherPort.message, /endpoint http:\/\/\S+:8000, asked http:\/\/\S+:9000/);

  const otherNodes = judgeExisting(planOn({ nodes: ["spark3", "spark4"] }), status(plan));
  assert.equal(otherNodes.same, false);
  if (!otherNodes.same) {
    assert.match(otherNodes.message, /already exists on spark1, spark2 .*nodes spark1,spark2, asked spark3,spark4/);
    assert.match(otherNodes.message, /unique across the cluster/);
    assert.match(otherNodes.hint, /--name OTHER.*launcher down practice-2x/);
  }

  const otherLane = judgeExisting(planOn({ lane: "chat" }), status(plan));
  assert.equal(otherLane.same, false);
  if (!otherLane.same) assert.match(otherLane.message, /lane \(none\), asked chat/);

  const otherRecipe = judgeExisting(plan, status(plan, { recipe_hash: "0".repeat(64) }));
  assert.equal(otherRecipe.same, false);
  if (!otherRecipe.same) assert.match(otherRecipe.message, /recipe practice-2x \(hash 000000000000\), asked practice-2x/);
});

const boot = (lines: readonly string[]): BootState => lines.reduce((s, l) => advanceBoot(vllm, s, l), INITIAL_BOOT);
// What the practice engine prints (docker-images/practice-engine/serve, lib/rendezvous.js).
const UP_TO_MAX_LEN = ["(APIServer pid=1) INFO non-default args: {}", "(APIServer pid=1) INFO Resolved architecture: PracticeForCausalLM", "(APIServer pid=1) INFO Using max model len 32768"];
const HEAD_WAITING = [...UP_TO_MAX_LEN, "(EngineCore_DP0 pid=1) INFO waiting for 1 headless worker(s) on 10.232.0.11:29501"];
// A worker is at the rendezvous once it has connected (a worker only connecting may never get there).
const WORKER_CONNECTING = [...UP_TO_MAX_LEN, "(Worker_TP1 pid=1) INFO connecting to master at 10.232.0.11:29501 as rank 1 of 2", "(Worker_TP1 pid=1) INFO connected to master at 10.232.0.11:29501, waiting for all workers"];

test("a timed-out boot blames the rank that holds it up, not the head waiting for it", () => {
  const workerHung = rankBehind(vllm, [
    { node: "n1", rank: 0, state: boot(HEAD_WAITING) },
    { node: "n2", rank: 1, state: boot(UP_TO_MAX_LEN) },
  ]);
  assert.equal(workerHung?.node, "n2");
  const headHung = rankBehind(vllm, [
    { node: "n1", rank: 0, state: boot(UP_TO_MAX_LEN) },
    { node: "n2", rank: 1, state: boot(WORKER_CONNECTING) },
  ]);
  assert.equal(headHung?.node, "n1");
  // Four ranks, the third never reaches the rendezvous.
  const third = rankBehind(vllm, [
    { node: "n1", rank: 0, state: boot(HEAD_WAITING) },
    { node: "n2", rank: 1, state: boot(WORKER_CONNECTING) },
    { node: "n3", rank: 2, state: boot(UP_TO_MAX_LEN.slice(0, 2)) },
    { node: "n4", rank: 3, state: boot(WORKER_CONNECTING) },
  ]);
  assert.equal(third?.node, "n3");
  // A rank in an earlier phase is behind whatever the others print.
  const earlier = rankBehind(vllm, [
    { node: "n1", rank: 0, state: boot([...HEAD_WAITING, "INFO Available KV cache memory: 11.02 GiB"]) },
    { node: "n2", rank: 1, state: INITIAL_BOOT },
  ]);
  assert.equal(earlier?.node, "n2");
  // Nothing tells them apart: the head, as before.
  assert.equal(rankBehind(vllm, [{ node: "n1", rank: 0, state: boot(UP_TO_MAX_LEN) }, { node: "n2", rank: 1, state: boot(UP_TO_MAX_LEN) }])?.node, "n1");
  assert.equal(rankBehind(vllm, []), undefined);
});

test("abortable: the work's value, or the interruption at once when the signal aborts", async () => {
  assert.equal(await abortable(Promise.resolve(3), new AbortController().signal, "x"), 3);
  const c = new AbortController();
  const never = new Promise<number>(() => undefined);
  const p = abortable(never, c.signal, "during preflight");
  c.abort(new Interrupted("SIGINT"));
  await assert.rejects(p, (e: unknown) => e instanceof Interrupted && e.message === "interrupted (SIGINT): during preflight");
  await assert.rejects(abortable(Promise.resolve(1), c.signal, "later"), Interrupted, "already aborted: no new step");
});

test("blame: a rank whose log names a cause of its own first, however late it failed; the rest (lost a peer, silent, stopped) by time, then order", () => {
  const name = (all: { n: string; ownCause: boolean; atMs?: number; order: number }[]): string | undefined => culprit(all, (x) => x)?.n;
  // The worker lost its head and said so first; the head's own CUDA error came later.
  assert.equal(name([{ n: "worker", ownCause: false, atMs: 1, order: 0 }, { n: "head", ownCause: true, atMs: 2, order: 1 }]), "head");
  // A rank killed without a word (the OOM killer) is what its peers lost: the earliest of the rest.
  assert.equal(name([{ n: "head", ownCause: false, atMs: 2, order: 0 }, { n: "silent", ownCause: false, atMs: 1, order: 1 }]), "silent");
  // Known to have died by itself without a word: before the peer that lost it, whatever the clocks say.
  assert.equal(culprit([{ n: "head", ownCause: false, atMs: 1, order: 0 }, { n: "killed", ownCause: false, silent: true, atMs: 2, order: 1 }], (x) => x)?.n, "killed");
  assert.equal(culprit([{ n: "head", ownCause: true, atMs: 3, order: 0 }, { n: "killed", ownCause: false, silent: true, atMs: 2, order: 1 }], (x) => x)?.n, "head");
  // A rank launcher stopped (no cause, ended last) does not beat one that only lost a peer before it.
  assert.equal(name([{ n: "stopped", ownCause: false, atMs: 9, order: 1 }, { n: "lost", ownCause: false, atMs: 1, order: 0 }]), "lost");
  // Two causes of their own: the earlier; without times on both, the order.
  assert.equal(name([{ n: "b", ownCause: true, atMs: 5, order: 0 }, { n: "a", ownCause: true, atMs: 3, order: 1 }]), "a");
  assert.equal(name([{ n: "b", ownCause: true, atMs: 5, order: 1 }, { n: "a", ownCause: true, order: 0 }]), "a");
  assert.equal(name([]), undefined);
});

test("timeMs: Docker's times with their nanoseconds (inspect cuts trailing zeros), zones, and what is not one", () => {
  assert.ok((timeMs("2026-01-01T00:00:01.5Z") as number) < (timeMs("2026-01-01T00:00:01.523456789Z") as number));
  assert.ok((timeMs("2026-01-01T00:00:01.523456789Z") as number) < (timeMs("2026-01-01T00:00:01.523458Z") as number));
  assert.equal(timeMs("2026-01-01T01:00:00+01:00"), timeMs("2026-01-01T00:00:00Z"));
  assert.equal(timeMs("0001-01-01T00:00:00Z"), Date.parse("0001-01-01T00:00:00Z"));
  assert.equal(timeMs("yesterday"), undefined);
});
