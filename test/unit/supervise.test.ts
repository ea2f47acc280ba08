import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeLabels, decodeRestartPolicy, encodeLabels, encodeRestartPolicy, type DeploymentStatus, type RestartPolicy } from "../../src/contract/deployment.js";
import { backoffMs, failureOf, INITIAL, isRestarting, retryAfterSeconds, supervise, type SuperviseEvent, type Supervised, type SuperviseTiming } from "../../src/supervise/supervise.js";

const timing: SuperviseTiming = { confirmMs: 2000, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 60_000 };
const onFailure = (max?: number): RestartPolicy => (max === undefined ? { mode: "on-failure" } : { mode: "on-failure", max });

function dep(over: Partial<DeploymentStatus> = {}): DeploymentStatus {
  return {
    deployment: "d",
    recipe: "r",
    recipe_hash: "h",
    served_model: "m",
    endpoint: "http://n1:8000",
    restart: "on-failure:2",
    status: "serving",
    phase: "serving",
    missing: [],
    unreachable: [],
    ranks: [
      { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
      { rank: 1, node: "n2", container: "launcher-d-r1", state: "running", started_at: "t" },
    ],
    ...over,
  };
}
const serving = dep();
const workerDead = dep({
  status: "degraded",
  phase: "-",
  missing: ["rank 1 on n2 (exited, exit 137)"],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 137, started_at: "t" },
  ],
});
const unhealthy = dep({ status: "booting", phase: "unknown" });
const nodeLost = dep({
  status: "unreachable",
  phase: "unknown",
  unreachable: ["n2"],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-d-r1", state: "unreachable" },
  ],
});

const seen = (at: number, status: DeploymentStatus | undefined, recordedReady = false): SuperviseEvent => ({ kind: "observed", at, status, recordedReady });

/** Runs events through the decision function, collecting every action. */
function run(events: readonly SuperviseEvent[], policy: RestartPolicy, start: Supervised = INITIAL): { state: Supervised | undefined; actions: string[] } {
  let state: Supervised | undefined = start;
  const actions: string[] = [];
  for (const e of events) {
    if (state === undefined) state = INITIAL;
    const d = supervise(state, e, policy, timing);
    state = d.state;
    for (const a of d.actions) actions.push(a.kind === "restart" ? `restart#${a.attempt} ${a.failure.kind}` : a.kind === "give-up" ? `give-up after ${a.attempts}` : a.kind);
  }
  return { state, actions };
}

test("restart policy: on-failure[:N] round-trips through the label; anything else is refused, saying why", () => {
  assert.deepEqual(decodeRestartPolicy("on-failure"), { ok: true, policy: { mode: "on-failure" } });
  assert.deepEqual(decodeRestartPolicy("on-failure:3"), { ok: true, policy: { mode: "on-failure", max: 3 } });
  for (const bad of ["always", "on-failure:0", "on-failure:-1", "on-failure:x", "on-failure:", ""]) assert.equal(decodeRestartPolicy(bad).ok, false, bad);
  assert.equal(encodeRestartPolicy({ mode: "on-failure", max: 3 }), "on-failure:3");
  const labels = { deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", rank: 0, role: "head" as const, node: "n1", nnodes: 1, cluster: "c", endpoint: "e", restart: onFailure(3) };
  const encoded = encodeLabels(labels);
  assert.equal(encoded["launcher.restart"], "on-failure:3");
  const back = decodeLabels(encoded);
  assert.ok(back.ok);
  assert.deepEqual(back.labels.restart, { mode: "on-failure", max: 3 });
  // A policy a newer launcher wrote and this one cannot read is no policy: the container still decodes.
  const newer = decodeLabels({ ...encoded, "launcher.restart": "always" });
  assert.ok(newer.ok);
  assert.equal(newer.labels.restart, undefined);
});

test("failureOf: an exited rank, a lost node, a head that stops answering; nothing for a serving group", () => {
  assert.equal(failureOf(serving), undefined);
  assert.deepEqual(failureOf(workerDead), { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-d-r1", message: "rank 1 on n2 exited (exit 137)" });
  assert.equal(failureOf(nodeLost)?.kind, "node-unreachable");
  assert.equal(failureOf(nodeLost)?.node, "n2");
  // The head answers but a worker's node does not: it serves, and no boot could pass preflight there now.
  assert.equal(failureOf(dep({ unreachable: ["n2"], ranks: nodeLost.ranks })), undefined);
  assert.equal(failureOf(unhealthy)?.kind, "unhealthy");
  assert.equal(failureOf(dep({ status: "degraded", phase: "-", missing: ["rank 1 (no container)"], ranks: [serving.ranks[0]!] }))?.kind, "rank-exited");
});

test("a worker that dies after ready: the whole group is restarted at once, once confirmed by the next poll", () => {
  const r = run([seen(0, serving), seen(1000, workerDead), seen(1500, workerDead)], onFailure(2));
  assert.deepEqual(r.actions, ["restart#1 rank-exited"]);
  assert.equal(r.state?.phase, "restarting");
  assert.ok(isRestarting(r.state));
});

test("one poll showing a failure is not enough (a down in progress, one lost answer)", () => {
  assert.deepEqual(run([seen(0, serving), seen(1000, workerDead)], onFailure()).actions, []);
  // down removed everything by the next poll: forgotten, never restarted
  assert.deepEqual(run([seen(0, serving), seen(1000, workerDead), seen(1500, undefined)], onFailure()).actions, ["forget"]);
  // a node that misses one poll and answers again
  assert.deepEqual(run([seen(0, serving), seen(1000, nodeLost), seen(1500, serving), seen(2000, nodeLost), seen(2500, serving)], onFailure()).actions, []);
});

test("a lost node or an unhealthy engine must last confirmMs before the group is recreated", () => {
  assert.deepEqual(run([seen(0, serving), seen(1000, nodeLost), seen(2000, nodeLost)], onFailure()).actions, []);
  assert.deepEqual(run([seen(0, serving), seen(1000, nodeLost), seen(2000, nodeLost), seen(3000, nodeLost)], onFailure()).actions, ["restart#1 node-unreachable"]);
  assert.deepEqual(run([seen(0, serving), seen(1000, unhealthy), seen(3500, unhealthy)], onFailure()).actions, ["restart#1 unhealthy"]);
});

test("a deployment never seen serving is not touched (its boot is its `up`'s), unless the store says it served", () => {
  const booting = dep({ status: "booting", phase: "loading" });
  assert.deepEqual(run([seen(0, booting), seen(1000, workerDead), seen(2000, workerDead)], onFailure()).actions, []);
  // A daemon started after the deployment served and died (killed meanwhile): the store remembers it served.
  assert.deepEqual(run([seen(0, workerDead, true), seen(500, workerDead, true)], onFailure()).actions, ["restart#1 rank-exited"]);
  // Adopted while serving (a daemon restarted after SIGKILL): supervised from then on.
  assert.deepEqual(run([seen(0, serving), seen(100, workerDead), seen(200, workerDead)], onFailure()).actions, ["restart#1 rank-exited"]);
});

test("while restarting, polls are the boot's doing; a boot that works makes it ready again", () => {
  const r = run([seen(0, serving), seen(1, workerDead), seen(2, workerDead), seen(3, undefined), seen(4, dep({ status: "booting", phase: "loading" })), { kind: "restart-ended", at: 5, ok: true }, seen(6, serving)], onFailure());
  assert.deepEqual(r.actions, ["restart#1 rank-exited"]);
  assert.equal(r.state?.phase, "ready");
});

test("at most N restarts over the deployment's life, then it gives up once and is left degraded", () => {
  const die = (t: number): SuperviseEvent[] => [seen(t, workerDead), seen(t + 1, workerDead)];
  // The second death in a row waits its backoff (1 s), then restarts; the third gives up.
  const r2 = run(
    [seen(0, serving), ...die(10), { kind: "restart-ended", at: 20, ok: true }, seen(21, serving), ...die(30), { kind: "tick", at: 1031 }, { kind: "restart-ended", at: 1040, ok: true }, seen(1041, serving), ...die(1050), seen(1060, workerDead)],
    onFailure(2),
  );
  assert.deepEqual(r2.actions, ["restart#1 rank-exited", "restart#2 rank-exited", "give-up after 2"]);
  assert.equal(r2.state?.phase, "gave-up");
  assert.equal(isRestarting(r2.state), false);
});

test("a restart whose boot fails is tried again after a growing backoff; without N it never stops", () => {
  let state: Supervised | undefined = INITIAL;
  const restarts: number[] = [];
  const step = (e: SuperviseEvent): void => {
    const d = supervise(state ?? INITIAL, e, onFailure(), timing);
    state = d.state;
    for (const a of d.actions) if (a.kind === "restart") restarts.push(e.at);
  };
  step(seen(0, serving));
  step(seen(100, workerDead));
  step(seen(200, workerDead));
  let t = 200;
  for (let i = 0; i < 6; i++) {
    t += 50;
    step({ kind: "restart-ended", at: t, ok: false, error: "boot failed" });
    assert.equal(state?.phase, "backoff");
    // Polls and ticks before the backoff ends do nothing; the one after it restarts.
    for (let s = 0; s < 100 && state?.phase === "backoff"; s++) {
      t += 250;
      step({ kind: "tick", at: t });
    }
  }
  const gaps = restarts.slice(1).map((at, i) => at - (restarts[i] ?? 0) - 50);
  // 1 s, 2 s, 4 s, then capped at 8 s (to the poll's 250 ms)
  assert.deepEqual(gaps.map((g) => Math.round(g / 250) * 250), [1000, 2000, 4000, 8000, 8000, 8000]);
  assert.equal(restarts.length, 7);
});

test("backoff: the first restart at once, then doubling up to the cap; a long healthy run starts anew", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((n) => backoffMs(n, timing)), [0, 1000, 2000, 4000, 8000, 8000]);
  const die = (t: number): SuperviseEvent[] => [seen(t, workerDead), seen(t + 1, workerDead)];
  // served 60 s (resetAfterMs) after the first restart: the second death restarts at once again
  const r = run([seen(0, serving), ...die(10), { kind: "restart-ended", at: 20, ok: true }, seen(21, serving), seen(70_000, serving), ...die(70_010)], onFailure());
  assert.deepEqual(r.actions, ["restart#1 rank-exited", "restart#2 rank-exited"]);
});

test("a deployment served again by hand while in backoff is ready again; one removed while given up is forgotten", () => {
  const waiting: Supervised = { phase: "backoff", attempts: 1, streak: 2, until: 10_000, failure: { kind: "rank-exited", message: "x" } };
  assert.equal(supervise(waiting, seen(500, serving), onFailure(), timing).state?.phase, "ready");
  const gaveUp: Supervised = { phase: "gave-up", attempts: 2, since: 0, failure: { kind: "rank-exited", message: "x" } };
  assert.deepEqual(supervise(gaveUp, seen(0, undefined), onFailure(2), timing).actions, [{ kind: "forget" }]);
});

test("Retry-After: the backoff left plus the last boot's length; at least 1 s", () => {
  const failure = { kind: "rank-exited", message: "x" } as const;
  assert.equal(retryAfterSeconds({ phase: "backoff", attempts: 1, streak: 2, until: 5000, failure }, 1000, 12.2), 4 + 13);
  assert.equal(retryAfterSeconds({ phase: "restarting", attempts: 1, streak: 1, since: 0, failure }, 3000, 12), 9);
  assert.equal(retryAfterSeconds({ phase: "restarting", attempts: 1, streak: 1, since: 0, failure }, 60_000, 12), 1);
  assert.equal(retryAfterSeconds({ phase: "restarting", attempts: 1, streak: 1, since: 0, failure }, 0, undefined), 10);
});

test("gateway: a deployment being restarted answers 503 deployment_restarting with Retry-After, by lane and by served name, until it serves", async () => {
  const { routeTable } = await import("../../src/gateway/routes.js");
  const restarting = [{ cluster: "c", deployment: "d", served_model: "m", lane: "chat", attempt: 1, max: 2, retryAfter: 17, reason: "rank 1 on n2 exited (exit 137)" }];
  const lanes = [{ name: "chat", cluster: "c", deployment: "d", state: "serving" as const, since: "t" }];
  // The group removed for the restart: no container shows it, yet its names are known.
  for (const name of ["chat", "m"]) {
    const r = routeTable([], lanes, undefined, [], restarting).resolve(name);
    assert.equal(r.kind, "unavailable", name);
    assert.ok(r.kind === "unavailable");
    assert.equal(r.code, "deployment_restarting");
    assert.equal(r.retryAfter, 17);
    assert.match(r.message, /restart 1 of at most 2\) after rank 1 on n2 exited/);
  }
  // Booting again: still restarting (not model_booting); serving: routed.
  const booting = { ...dep({ status: "booting", phase: "loading", lane: "chat" }), cluster: "c" };
  const r = routeTable([booting], lanes, undefined, [], restarting).resolve("chat");
  assert.equal(r.kind === "unavailable" && r.code, "deployment_restarting");
  assert.equal(routeTable([{ ...dep({ lane: "chat" }), cluster: "c" }], lanes, undefined, [], restarting).resolve("chat").kind, "route");
  const models = routeTable([], lanes, undefined, [], restarting).models();
  assert.deepEqual(models.map((m) => [m.id, m.status]), [["chat", "restarting"], ["m", "restarting"]]);
  // Without a restart under way the same view is today's: the lane is empty.
  const empty = routeTable([], lanes).resolve("chat");
  assert.equal(empty.kind === "unavailable" && empty.code, "lane_empty");
});

test("a saved plan round-trips; a damaged or foreign one is refused, saying why", async () => {
  const { encodeSavedPlan, decodeSavedPlan } = await import("../../src/plan/saved.js");
  const plan = {
    deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h",
    recipe: { id: "r", engine: "vllm", docker_image: "img" },
    nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run"] }],
    start_order: ["n1"], start: "head first", restart: { mode: "on-failure", max: 2 },
  };
  const back = decodeSavedPlan(encodeSavedPlan(plan as never));
  assert.ok(back.ok);
  assert.deepEqual(back.plan, plan);
  assert.equal(decodeSavedPlan("{").ok, false);
  assert.equal(decodeSavedPlan(JSON.stringify({ version: 2, plan })).ok, false);
  assert.equal(decodeSavedPlan(JSON.stringify({ version: 1, plan: { ...plan, nodes: [] } })).ok, false);
});

test("a poll read before the restarted group served is not news: it neither forgets nor restarts the group", () => {
  const ready: Supervised = { phase: "ready", attempts: 1, streak: 1, since: 10_000 };
  assert.deepEqual(supervise(ready, seen(9_000, undefined), onFailure(), timing), { state: ready, actions: [] });
  assert.deepEqual(supervise(ready, seen(9_500, workerDead), onFailure(), timing), { state: ready, actions: [] });
  assert.deepEqual(supervise(ready, seen(10_500, undefined), onFailure(), timing).actions, [{ kind: "forget" }]);
});

test("failureOf names the rank that exited first (the others lost it as a peer), whatever its rank", () => {
  const both = dep({
    status: "degraded",
    phase: "-",
    missing: ["rank 0 on n1 (exited, exit 1)", "rank 1 on n2 (exited, exit 137)"],
    ranks: [
      { rank: 0, node: "n1", container: "launcher-d-r0", state: "exited", exit_code: 1, started_at: "t", finished_at: "2026-01-01T00:00:05.500Z" },
      { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 137, started_at: "t", finished_at: "2026-01-01T00:00:05.100Z" },
    ],
  });
  assert.equal(failureOf(both)?.rank, 1);
  assert.equal(failureOf(both)?.node, "n2");
});

test("the gateway says restarting from the failure until a poll read after the new group served shows it", async () => {
  const { answersRestarting } = await import("../../src/supervise/supervise.js");
  const failure = { kind: "rank-exited", message: "x" } as const;
  assert.equal(answersRestarting({ phase: "restarting", attempts: 1, streak: 1, since: 0, failure }, 100), true);
  assert.equal(answersRestarting({ phase: "backoff", attempts: 1, streak: 2, until: 5, failure }, 100), true);
  const servedAgain: Supervised = { phase: "ready", attempts: 1, streak: 1, since: 1000 };
  assert.equal(answersRestarting(servedAgain, 900), true);
  assert.equal(answersRestarting(servedAgain, 1000), false);
  assert.equal(retryAfterSeconds(servedAgain, 1200, 30), 1);
  assert.equal(answersRestarting({ phase: "ready", attempts: 0, streak: 0, since: 1000 }, 900), false, "never restarted: nothing to say");
  assert.equal(answersRestarting({ phase: "gave-up", attempts: 2, since: 1000, failure }, 900), false);
});

test("given up: the gateway says degraded until a poll read after the give-up, not the model_booting of the last poll's restart", async () => {
  const { answersGaveUp } = await import("../../src/supervise/supervise.js");
  const { routeTable } = await import("../../src/gateway/routes.js");
  const failure = { kind: "rank-exited", message: "rank 1 on n2 exited (exit 1)" } as const;
  const gaveUp: Supervised = { phase: "gave-up", attempts: 1, since: 1000, failure };
  assert.equal(answersGaveUp(gaveUp, 900), true);
  assert.equal(answersGaveUp(gaveUp, undefined), true);
  assert.equal(answersGaveUp(gaveUp, 1000), false, "a poll read since shows it as it is");
  assert.equal(answersGaveUp({ phase: "ready", attempts: 1, streak: 1, since: 1000 }, 900), false);
  const lanes = [{ name: "chat", cluster: "c", deployment: "d", state: "serving" as const, since: "t" }];
  const held = [{ cluster: "c", deployment: "d", served_model: "m", lane: "chat", attempt: 1, max: 1, retryAfter: 10, reason: failure.message, gaveUp: true as const }];
  // The last poll read the restart's boot: nobody boots it any more.
  const booting = { ...dep({ status: "booting", phase: "loading", lane: "chat" }), cluster: "c" };
  for (const name of ["chat", "m"]) {
    const r = routeTable([booting], lanes, undefined, [], held).resolve(name);
    assert.ok(r.kind === "unavailable", name);
    assert.equal(r.code, "deployment_degraded");
    assert.equal(r.retryAfter, 30);
    assert.match(r.message, /given up after 1 restart; the last failure: rank 1 on n2 exited \(exit 1\)/);
  }
  assert.deepEqual(routeTable([booting], lanes, undefined, [], held).models().map((m) => [m.id, m.status]), [["chat", "degraded"], ["m", "degraded"]]);
  // The last poll showed it serving: asked (a dead head answers 502, and that asks for a poll).
  assert.equal(routeTable([{ ...dep({ lane: "chat" }), cluster: "c" }], lanes, undefined, [], held).resolve("chat").kind, "route");
});

test("a restart cancelled (the deployment was stopped meanwhile) forgets the deployment: no further try", () => {
  const restarting: Supervised = { phase: "restarting", attempts: 1, streak: 1, since: 0, failure: { kind: "rank-exited", message: "x" } };
  assert.deepEqual(supervise(restarting, { kind: "restart-ended", at: 10, ok: false, cancelled: true }, onFailure(), timing), { state: undefined, actions: [{ kind: "forget" }] });
});

test("up --restart of a deployment already running without it (or with another policy) is no 'already running': the difference is named", async () => {
  const { judgeExisting } = await import("../../src/nodes/existing.js");
  const plan = {
    deployment: "d", recipe: { id: "r" }, recipe_hash: "h", served_model: "m", endpoint: "http://n1:8000",
    nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0" }], restart: { mode: "on-failure", max: 2 },
  } as unknown as import("../../src/plan/plan.js").Plan;
  const found = dep({ restart: "on-failure:2", ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" }] });
  assert.deepEqual(judgeExisting(plan, found), { same: true });
  const { restart: _, ...withoutRestart } = found;
  const v = judgeExisting(plan, withoutRestart);
  assert.equal(v.same, false);
  assert.ok(!v.same && v.message.includes("restart (none), asked on-failure:2"), JSON.stringify(v));
});

const died = (at: number, rank = 1, node = "n2"): SuperviseEvent => ({ kind: "died", at, failure: { kind: "rank-exited", rank, node, container: `launcher-d-r${rank}`, message: `rank ${rank} on ${node} exited (exit 137)` } });

test("a die event restarts the group at once: docker's record of the container's end needs no second look", () => {
  const r = run([seen(0, serving), died(1000)], onFailure(2));
  assert.deepEqual(r.actions, ["restart#1 rank-exited"]);
  assert.equal(r.state?.phase === "restarting" ? r.state.failure.message : "", "rank 1 on n2 exited (exit 137)");
  // A poll that saw it first is confirmed by the die event as by a poll.
  assert.deepEqual(run([seen(0, serving), seen(900, workerDead), died(1000)], onFailure()).actions, ["restart#1 rank-exited"]);
  // The second death of the same failure (the peer that lost it) is no second restart.
  assert.deepEqual(run([seen(0, serving), died(1000), died(1010, 0, "n1")], onFailure()).actions, ["restart#1 rank-exited"]);
});

test("a die event of the group before it served again (its restart's removal), or while it is down for a restart, is no new failure", () => {
  // Restarted at 2, served again at 5: a death read at 4 belongs to the restart.
  const restarted = run([seen(0, serving), seen(1, workerDead), seen(2, workerDead), { kind: "restart-ended", at: 5, ok: true }, died(4), seen(6, workerDead)], onFailure());
  assert.deepEqual(restarted.actions, ["restart#1 rank-exited"]);
  assert.equal(restarted.state?.phase, "ready");
  // In backoff: the backoff decides, a die event does not start the restart early.
  const backoff: Supervised = { phase: "backoff", attempts: 1, streak: 2, until: 10_000, failure: { kind: "rank-exited", message: "x" } };
  assert.deepEqual(supervise(backoff, died(20_000), onFailure(), timing), { state: backoff, actions: [] });
  // Never seen serving: a boot's death is its `up`'s to roll back.
  assert.deepEqual(run([died(10)], onFailure()).actions, []);
});

test("a failure confirmed by a poll names the rank whose container ended first as that poll reads it, not the first one seen", () => {
  // The first poll saw only the worker gone; by the second the head shows it had ended first.
  const headFirst = dep({
    status: "degraded",
    phase: "-",
    missing: ["rank 0 on n1 (exited, exit 1)", "rank 1 on n2 (exited, exit 1)"],
    ranks: [
      { rank: 0, node: "n1", container: "launcher-d-r0", state: "exited", exit_code: 1, started_at: "t", finished_at: "2026-01-01T00:00:01.5Z" },
      { rank: 1, node: "n2", container: "launcher-d-r1", state: "exited", exit_code: 1, started_at: "t", finished_at: "2026-01-01T00:00:01.523456789Z" },
    ],
  });
  const r = run([seen(0, serving), seen(1000, workerDead), seen(1100, headFirst)], onFailure());
  assert.deepEqual(r.actions, ["restart#1 rank-exited"]);
  // 01.5Z is before 01.523456789Z, though not as text.
  assert.equal(r.state?.phase === "restarting" ? `${r.state.failure.node} ${r.state.failure.rank}` : "", "n1 0");
});

test("supervise: a restart adopted from a daemon that died owns the group until it ends; failed, it waits the backoff and is tried again, within N; from any phase", () => {
  const policy: RestartPolicy = { mode: "on-failure", max: 3 };
  const failure = { kind: "rank-exited" as const, rank: 1, node: "n2", message: "rank 1 on n2 exited (exit 1)" };
  for (const from of [INITIAL, { phase: "ready", attempts: 0, streak: 0, since: 0 }, { phase: "backoff", attempts: 0, streak: 1, until: 99_999, failure }] as Supervised[]) {
    const adopted = supervise(from, { kind: "adopted", at: 100, attempt: 2, failure }, policy, timing);
    assert.equal(adopted.state?.phase, "restarting", from.phase);
    assert.equal(adopted.state?.attempts, 2, "counted on from the attempt it was");
    assert.deepEqual(adopted.actions, [], "nothing issued: its boot runs already");
    // What the polls show meanwhile (its group booting, or gone once it was rolled back) is its doing.
    assert.deepEqual(supervise(adopted.state as Supervised, { kind: "observed", at: 200, status: undefined, recordedReady: true }, policy, timing).state, adopted.state);
    const failed = supervise(adopted.state as Supervised, { kind: "restart-ended", at: 300, ok: false, error: "boot failed" }, policy, timing);
    assert.equal(failed.state?.phase, "backoff");
    assert.equal(failed.state?.phase === "backoff" ? failed.state.until : 0, 300 + timing.backoffMs, "the first backoff, deterministically");
    const again = supervise(failed.state as Supervised, { kind: "tick", at: 300 + timing.backoffMs }, policy, timing);
    assert.deepEqual(again.actions, [{ kind: "restart", attempt: 3, failure }]);
  }
  // The last one the policy allows: failed, it gives up.
  const last = supervise(INITIAL, { kind: "adopted", at: 0, attempt: 3, failure }, policy, timing);
  assert.equal(supervise(last.state as Supervised, { kind: "restart-ended", at: 1, ok: false }, policy, timing).state?.phase, "gave-up");
  // Served: ready; cancelled (launcher down): forgotten.
  assert.equal(supervise(last.state as Supervised, { kind: "restart-ended", at: 1, ok: true }, policy, timing).state?.phase, "ready");
  assert.equal(supervise(last.state as Supervised, { kind: "restart-ended", at: 1, ok: false, cancelled: true }, policy, timing).state, undefined);
});
