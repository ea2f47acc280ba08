import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { RemoteError } from "../../src/config/errors.js";
import { encodeError } from "../../src/boot/up-events.js";
import { CONTROL_PATHS, CONTROL_ROUTES, decodeStop, StopAnswerSchema, type StopAnswer, type StopRequest } from "../../src/contract/control-api.js";
import { CONTROL_PATHS as PROTOCOL_PATHS } from "../../src/daemon/protocol.js";
import { containerName } from "../../src/contract/deployment.js";
import { decodeRead, READ_ANSWERS, READ_PATHS, READ_ROUTES, SESSION_ROUTES } from "../../src/contract/read-api.js";
import type { Docker } from "../../src/remote/docker.js";
import { UnreachableError } from "../../src/remote/transport.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { LaneRecord } from "../../src/store/store.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { controlApi } from "../../src/daemon/control.js";
import { stopDeployment } from "../../src/daemon/client.js";
import { stopper, type StopOutcome, type StopParts } from "../../src/daemon/stop.js";
import { listRecipes, RecipeList } from "../../src/daemon/recipe-list.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { WebSessions } from "../../src/daemon/web-session-api.js";
import { CSRF_HEADER } from "../../src/daemon/web-session.js";
import { catalogueSource } from "../../src/recipe/uploaded-source.js";
import { afterCancelLines, resultOfStop, stopRequestOf, downText, downJson, unfinishedLine } from "../../src/cli/down.js";
import { FakeCluster, rankLabels } from "../support/fake-cluster.js";
import { HOME_ADMIN_KEY, HOME_INFERENCE_KEY, startHomeDaemon } from "../support/home-daemon.js";
import type { Daemon } from "../../src/daemon/daemon.js";
import type { FakeNode } from "../support/fake-node.js";

// The control API's stop of a deployment (POST CONTROL_ROUTES.stop, src/daemon/stop.ts): who may
// ask (the admin key, an admin page session with its CSRF token; never a read session or an
// inference key), what it answers (StopAnswerSchema: a node not reached is never said stopped),
// the CLI's rendering of that answer, and the read API's recipe catalogue. Over fake nodes in
// memory (test/support/fake-cluster.ts) and a fake discovery; the rig's proof is
// test/integration/stop-route.test.ts.

const ADMIN = "admin-key-stop-0123456789";
const INFERENCE = "inference-key-stop-0123456789";

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** The control API with the page's sessions, as daemon.ts mounts it, on a loopback port; its URL. */
async function serve(stop: (name: string, request: StopRequest) => Promise<StopOutcome>): Promise<{ url: string; sessions: WebSessions }> {
  const check = (key: string) => (presented: string | undefined) => presented === key;
  const sessions = new WebSessions({ checkAdmin: check(ADMIN), checkInference: check(INFERENCE) });
  const api = controlApi({ registry: new BootRegistry(Date.now), submit: () => [], stop, maxBodyBytes: 4096, checkAdmin: check(ADMIN), admitSession: sessions.admitAction });
  const server = createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://x").pathname;
    void (sessions.owns(p) ? sessions.handle(req, res, p, false) : api(req, res, p));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sessions };
}

/** A signed-in page session: its cookie and CSRF token. */
async function signIn(url: string, key: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${url}${SESSION_ROUTES.signIn}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ key }) });
  assert.equal(res.status, 204);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const s = (await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie } })).json()) as { csrf_token: string };
  return { cookie, csrf: s.csrf_token };
}

const ANSWER: StopAnswer = { deployment: "d", cluster: "fake", stopped: true, deployments: ["d"], nodes: [{ node: "n1", outcome: "nothing" }] };

test("the stop route's path is the contract's, re-exported where the other control routes are", () => {
  assert.equal(CONTROL_PATHS.stop("a b/c"), "/launcher/v1/deployments/a%20b%2Fc/stop");
  assert.equal(CONTROL_ROUTES.stop, "/launcher/v1/deployments/{name}/stop");
  assert.equal(PROTOCOL_PATHS.stop("x"), CONTROL_PATHS.stop("x"));
  assert.equal(READ_PATHS.recipes, "/launcher/v1/recipes");
  assert.equal(READ_ROUTES.recipes, READ_PATHS.recipes);
});

test("stop admits the admin key and an admin session with its CSRF token; a read session, an inference key, no key and a missing token are refused, and nothing is stopped", async () => {
  const asked: string[] = [];
  const { url } = await serve(async (name) => (asked.push(name), { kind: "answer", answer: { ...ANSWER, deployment: name } }));
  const post = (headers: Record<string, string>, body?: string): Promise<Response> => fetch(`${url}${CONTROL_PATHS.stop("d")}`, { method: "POST", headers, ...(body === undefined ? {} : { body }) });

  assert.equal((await post({})).status, 401);
  const inference = await post({ authorization: `Bearer ${INFERENCE}` });
  assert.equal(inference.status, 401, "an inference key is no admin key (the control API's admission)");
  assert.equal(((await inference.json()) as { error: { code: string } }).error.code, "invalid_admin_key");
  const reader = await signIn(url, INFERENCE);
  const read = await post({ cookie: reader.cookie, [CSRF_HEADER]: reader.csrf });
  assert.equal(read.status, 403, "a read session may not act, even with its token");
  const admin = await signIn(url, ADMIN);
  assert.equal((await post({ cookie: admin.cookie })).status, 403, "an admin session without its CSRF token");
  assert.equal((await post({ cookie: admin.cookie, [CSRF_HEADER]: "not-the-token" })).status, 403);
  assert.deepEqual(asked, [], "nothing refused reached the stop");
  assert.equal((await fetch(`${url}${CONTROL_PATHS.stop("d")}`, { headers: { authorization: `Bearer ${ADMIN}` } })).status, 405, "GET is no stop");

  // The page sends no body; the CLI sends its grace.
  const bySession = await post({ cookie: admin.cookie, [CSRF_HEADER]: admin.csrf });
  assert.equal(bySession.status, 200);
  assert.deepEqual(decodeStop(await bySession.json()), { ok: true, answer: ANSWER });
  const byKey = await post({ authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, JSON.stringify({ grace_seconds: 1, bare: true }));
  assert.equal(byKey.status, 200);
  assert.deepEqual(asked, ["d", "d"]);
  for (const bad of ['{"grace_seconds": -1}', '{"other": 1}', "{", '{"grace_seconds": 99999}']) assert.equal((await post({ authorization: `Bearer ${ADMIN}` }, bad)).status, 400, bad);
  assert.equal((await fetch(`${url}/launcher/v1/deployments/%E0%A4%A/stop`, { method: "POST", headers: { authorization: `Bearer ${ADMIN}` } })).status, 400);
  assert.equal(asked.length, 2);
});

test("a refusal keeps its status, code and hint; the client tells unseen and down's own refusal apart", async () => {
  const { url } = await serve(async (name): Promise<StopOutcome> =>
    name === "twice" ? { kind: "refused", status: 409, code: "target_refused", message: "twice names 2 deployments", hint: "launcher down deployment/twice" } : { kind: "refused", status: 404, code: "no_deployment", message: `the daemon sees no deployment "${name}"` },
  );
  const res = await fetch(`${url}${CONTROL_PATHS.stop("gone")}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 404);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, "no_deployment");
  const target = { url, key: ADMIN };
  assert.deepEqual(await stopDeployment(target, "gone", {}), { kind: "unseen" });
  const refused = await stopDeployment(target, "twice", { bare: true });
  assert.equal(refused.kind, "refused");
  if (refused.kind === "refused") assert.deepEqual([refused.error.message, refused.error.hint], ["twice names 2 deployments", "launcher down deployment/twice"]);
});

// ---- the stopper over fake nodes ----


/** Fake nodes that may be cut off, a store in memory, a discovery that sees `seen`, and the stopper over them. */
async function world(seen: readonly string[], registry = new BootRegistry(Date.now)) {
  const fc = await FakeCluster.start({ nodes: 2 });
  const cut = new Set<string>();
  const lanes = new Map<string, LaneRecord>();
  const marks: string[] = [];
  const docker = new Map(
    fc.nodes.map((n): [string, Docker] => {
      const d = Object.create(n) as FakeNode;
      const reach = (): void => {
        if (cut.has(n.node)) throw new UnreachableError(n.node, "ssh: connect to host timed out");
      };
      d.containers = async (label) => (reach(), n.containers(label));
      d.stopAndRemove = async (names, grace) => (reach(), n.stopAndRemove(names, grace));
      return [n.node, d];
    }),
  );
  const session: ClusterSession = { cluster: fc.cluster, docker };
  const store: StopParts["store"] = {
    deploymentStopping: (_c, d) => void marks.push(`stopping ${d}`),
    // As the store does: a deployment recorded stopped empties the lane that served it.
    deploymentStopped: (c, d, at) => {
      marks.push(`stopped ${d}`);
      for (const l of lanes.values()) if (l.cluster === c && l.deployment === d && l.state === "serving") lanes.set(l.name, { name: l.name, cluster: c, state: "empty", since: at });
    },
    lane: (name) => lanes.get(name),
    setLane: (l) => void lanes.set(l.name, l),
    lanes: () => [...lanes.values()],
  };
  const snapshot = { deployments: seen.map((deployment) => ({ cluster: "fake", deployment })), strangers: [], unreachable: [], at: new Date() } as unknown as Snapshot;
  const stop = stopper({ discovery: { snapshot: () => snapshot }, registry, session: async (c) => (c === "fake" ? session : undefined), store, now: () => new Date(), log: () => undefined });
  const add = (deployment: string, nodes: readonly string[], lane?: string): void => {
    for (const [r, node] of nodes.entries()) fc.node(node).add(containerName(deployment, r), rankLabels(deployment, "solo", r, nodes, lane, deployment));
  };
  return { fc, cut, lanes, marks, stop, add };
}

const answerOf = (o: StopOutcome): StopAnswer => {
  assert.equal(o.kind, "answer", JSON.stringify(o));
  return StopAnswerSchema.parse((o as { answer: StopAnswer }).answer);
};

test("stop runs down on the deployment's nodes: every container removed, recorded stopped, its lane emptied; the CLI renders the answer as its own stop", async () => {
  const w = await world(["chat-a", "other"]);
  w.add("chat-a", ["n1", "n2"], "chat");
  w.add("other", ["n1"]);
  w.lanes.set("chat", { name: "chat", cluster: "fake", deployment: "chat-a", recipe: "solo", served_model: "chat-a", state: "serving", since: "2026-01-01T00:00:00.000Z" });
  const answer = answerOf(await w.stop("chat-a", { grace_seconds: 1 }));
  assert.deepEqual(answer, {
    deployment: "chat-a",
    cluster: "fake",
    stopped: true,
    deployments: ["chat-a"],
    nodes: [
      { node: "n1", outcome: "removed", containers: [{ container: "launcher-chat-a-r0", deployment: "chat-a", was_running: true }] },
      { node: "n2", outcome: "removed", containers: [{ container: "launcher-chat-a-r1", deployment: "chat-a", was_running: true }] },
    ],
    lane: "chat",
  });
  assert.deepEqual(w.fc.containers().map((c) => c.split(":").slice(0, 2).join(":")), ["n1:launcher-other-r0"], "only chat-a's containers went");
  assert.deepEqual(w.marks, ["stopping chat-a", "stopped chat-a"]);
  assert.equal(w.lanes.get("chat")?.state, "empty");
  const shown = resultOfStop(answer, "chat-a");
  assert.deepEqual(downText(shown, "chat-a"), ["stopped chat-a: n1 launcher-chat-a-r0", "stopped chat-a: n2 launcher-chat-a-r1"]);
  assert.equal(downJson(shown).complete, true);

  // Again: nothing there, said so, and still no node claimed reached that was not.
  const again = answerOf(await w.stop("chat-a", {}));
  assert.deepEqual([again.stopped, again.nodes, again.lane, again.again], [true, [{ node: "n1", outcome: "nothing" }, { node: "n2", outcome: "nothing" }], undefined, undefined]);
  assert.deepEqual(downText(resultOfStop(again, "chat-a"), "chat-a"), ["nothing to stop for chat-a"]);
});

test("a node not reached is never said stopped: not recorded stopped, the lane kept, and the command that finishes the job", async () => {
  const w = await world(["d"]);
  w.add("d", ["n1", "n2"], "chat");
  w.lanes.set("chat", { name: "chat", cluster: "fake", deployment: "d", recipe: "solo", served_model: "d", state: "serving", since: "2026-01-01T00:00:00.000Z" });
  w.cut.add("n2");
  const answer = answerOf(await w.stop("d", { grace_seconds: 1 }));
  assert.equal(answer.stopped, false);
  assert.deepEqual(answer.nodes, [
    { node: "n1", outcome: "removed", containers: [{ container: "launcher-d-r0", deployment: "d", was_running: true }] },
    { node: "n2", outcome: "unreachable", reason: "SSH unreachable: ssh: connect to host timed out" },
  ]);
  assert.equal(answer.again, "launcher down deployment/d");
  assert.equal(answer.lane, undefined);
  assert.equal(w.lanes.get("chat")?.state, "serving", "a node that may run it did not answer");
  assert.deepEqual(w.marks, ["stopping d"]);
  // The CLI's bare name asks the daemon for a bare target: its `again` is the command as typed.
  const bare = answerOf(await w.stop("d", { bare: true }));
  const shown = resultOfStop(bare, "d");
  assert.equal(unfinishedLine(shown), "launcher: n2 could not be reached: what runs there was not stopped; once it answers, `launcher down d` finishes the job");
  assert.deepEqual(downJson(shown), { removed: [], unreachable: [{ node: "n2", reason: "SSH unreachable: ssh: connect to host timed out" }], complete: false });
});

test("a stop that cancelled a boot still says a node it did not reach (never covered by 'cancelled'), and says nothing more when nothing was left", () => {
  const cancelled: StopAnswer["cancelled"] = { outcome: "rolled_back", message: "interrupted by launcher down", rollback: [], event: { type: "error", error: encodeError(new RemoteError("n1", "interrupted by launcher down")), t: 1 } };
  const base = { deployment: "d", cluster: "fake", stopped: false, deployments: ["d"], ...(cancelled === undefined ? {} : { cancelled }) };
  const cut = resultOfStop({ ...base, nodes: [{ node: "n1", outcome: "nothing" }, { node: "n2", outcome: "unreachable", reason: "SSH unreachable" }], again: "launcher down d" }, "d");
  assert.ok(afterCancelLines(cut).some((l) => l.includes("n2")), afterCancelLines(cut).join("\n"));
  assert.equal(unfinishedLine(cut), "launcher: n2 could not be reached: what runs there was not stopped; once it answers, `launcher down d` finishes the job");
  const clean = resultOfStop({ ...base, stopped: true, nodes: [{ node: "n1", outcome: "nothing" }, { node: "n2", outcome: "nothing" }] }, "d");
  assert.deepEqual(afterCancelLines(clean), []);
});

test("a deployment the daemon does not see is 404 and nothing is touched; a bare name that fits two deployments is down's refusal, 409 with its hint", async () => {
  const w = await world(["alpha", "beta"]);
  w.add("alpha", ["n1"]);
  w.add("beta", ["n2"], "alpha");
  w.add("hidden", ["n2"]);
  const unseen = await w.stop("hidden", {});
  assert.deepEqual([unseen.kind, unseen.kind === "refused" && unseen.status], ["refused", 404]);
  assert.deepEqual((await w.stop("alpha", { cluster: "elsewhere" })).kind === "refused", true);
  const twice = await w.stop("alpha", { bare: true });
  assert.equal(twice.kind, "refused");
  if (twice.kind === "refused") {
    assert.equal(twice.status, 409);
    assert.match(twice.message, /^alpha names 2 deployments/);
    assert.match(twice.hint ?? "", /launcher down deployment\/alpha/);
  }
  assert.equal(w.fc.containers().length, 3, "nothing stopped");
  // deployment/alpha (the page's meaning) is exactly that one.
  assert.deepEqual(answerOf(await w.stop("alpha", {})).deployments, ["alpha"]);
  assert.equal(w.fc.containers().length, 2);
});

test("a boot of it the daemon runs is cancelled first (its rollback), then its nodes are looked at", async () => {
  const registry = new BootRegistry(Date.now);
  const w = await world([], registry);
  w.add("booting", ["n1"]);
  let rolledBack = false;
  registry.start({ deployment: "booting", cluster: "fake" }, (_emit, signal) =>
    new Promise((_resolve, reject) =>
      signal.addEventListener("abort", () => {
        rolledBack = true;
        w.fc.node("n1").stopAndRemove(["launcher-booting-r0"], 0).then(
          () => reject(new RemoteError("n1", "interrupted by launcher down", "rolled back: removed 1 container (n1/launcher-booting-r0)")),
          reject,
        );
      }),
    ),
  );
  const answer = answerOf(await w.stop("booting", {}));
  assert.ok(rolledBack);
  assert.deepEqual(answer.cancelled && [answer.cancelled.outcome, answer.cancelled.message, answer.cancelled.rollback], ["rolled_back", "interrupted by launcher down", ["rolled back: removed 1 container (n1/launcher-booting-r0)"]]);
  assert.deepEqual(answer.cancelled?.event, { type: "error", error: encodeError(new RemoteError("n1", "interrupted by launcher down", "rolled back: removed 1 container (n1/launcher-booting-r0)")), t: answer.cancelled?.event.t });
  assert.equal(answer.stopped, true, "every node answered and none holds it");
  assert.deepEqual(answer.nodes, [{ node: "n1", outcome: "nothing" }, { node: "n2", outcome: "nothing" }]);
  assert.deepEqual(w.fc.containers(), []);
});

test("the CLI asks the daemon's stop for a deployment's name only (bare or deployment/), never a lane's or recipe's", () => {
  assert.deepEqual(stopRequestOf("chat", 10, undefined), { name: "chat", request: { grace_seconds: 10, bare: true } });
  assert.deepEqual(stopRequestOf("deployment/chat", 3, "fake"), { name: "chat", request: { grace_seconds: 3, cluster: "fake" } });
  assert.equal(stopRequestOf("lane/chat", 10, undefined), undefined);
  assert.equal(stopRequestOf("recipe/solo", 10, undefined), undefined);
});

test("recipes: the daemon's own folders by bare name, first folder first, sorted, bounded, descriptions cut; a folder without recipe.toml is none", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-recipes-"));
  try {
    const a = path.join(dir, "a");
    const b = path.join(dir, "b");
    const write = (root: string, name: string, text: string): void => {
      mkdirSync(path.join(root, name), { recursive: true });
      writeFileSync(path.join(root, name, "recipe.toml"), text);
    };
    write(a, "zeta", `name = "${"x".repeat(500)}"\nmodel = "org/zeta"\ndocker_image = "i"\n`);
    write(a, "alpha", `name = "Alpha"\nengine = "vllm"\nmodel = "org/alpha"\ndocker_image = "i"\n`);
    write(b, "alpha", `name = "Shadowed"\nmodel = "org/other"\ndocker_image = "i"\n`);
    write(b, "broken", `this is not toml = = =\n`);
    mkdirSync(path.join(b, "empty"));
    const listed = listRecipes([a, b, path.join(dir, "missing")], catalogueSource([a, b]));
    assert.deepEqual(listed.recipes.map((r) => r.name), ["alpha", "broken", "zeta"]);
    assert.deepEqual(listed.recipes[0], { name: "alpha", description: "Alpha", engine: "vllm", model: "org/alpha" });
    assert.deepEqual(listed.recipes[1], { name: "broken" });
    assert.equal(listed.recipes[2]?.description?.length, 200);
    assert.equal(listed.truncated, undefined);
    const bounded = listRecipes([a, b], catalogueSource([a, b]), 2);
    assert.deepEqual([bounded.recipes.map((r) => r.name), bounded.truncated], [["alpha", "broken"], true]);
    assert.equal(decodeRead("recipes", JSON.parse(JSON.stringify(READ_ANSWERS.recipes.parse(listed)))).ok, true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("recipes: a recipe is resolved again once a file of its chain changes, and a removed one leaves the list", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-recipes-"));
  try {
    const write = (name: string, text: string, at: number): void => {
      mkdirSync(path.join(dir, name), { recursive: true });
      const file = path.join(dir, name, "recipe.toml");
      writeFileSync(file, text);
      utimesSync(file, at, at);
    };
    write("base", `name = "Base"\nmodel = "org/one"\ndocker_image = "i"\n`, 1000);
    write("child", `extends = "base"\nname = "Child"\n`, 1000);
    const list = new RecipeList([dir], catalogueSource([dir]));
    assert.deepEqual(list.list().recipes.map((r) => [r.name, r.model]), [["base", "org/one"], ["child", "org/one"]]);
    write("base", `name = "Base"\nmodel = "org/two"\ndocker_image = "i"\n`, 2000);
    assert.deepEqual(list.list().recipes.map((r) => [r.name, r.model]), [["base", "org/two"], ["child", "org/two"]], "the parent's change reaches the child");
    rmSync(path.join(dir, "child"), { recursive: true });
    assert.deepEqual(list.list().recipes.map((r) => r.name), ["base"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("as the daemon mounts them: recipes answers the admin key with its own folder's recipes (an inference key 403); stop answers 404 for a deployment it does not see, and 401 to an inference key", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-stop-home-"));
  let daemon: Daemon | undefined;
  try {
    mkdirSync(path.join(dir, "recipes", "mine"), { recursive: true });
    writeFileSync(path.join(dir, "recipes", "mine", "recipe.toml"), `name = "Mine"\nmodel = "org/mine"\ndocker_image = "i"\n`);
    daemon = await startHomeDaemon(dir, []);
    const url = `http://127.0.0.1:${daemon.port}`;
    const res = await fetch(`${url}${READ_PATHS.recipes}`, { headers: { authorization: `Bearer ${HOME_ADMIN_KEY}` } });
    assert.equal(res.status, 200);
    const decoded = decodeRead("recipes", await res.json());
    assert.ok(decoded.ok);
    assert.deepEqual(decoded.answer.recipes.find((r) => r.name === "mine"), { name: "mine", description: "Mine", engine: "vllm", model: "org/mine" });
    const reader = await fetch(`${url}${READ_PATHS.recipes}`, { headers: { authorization: `Bearer ${HOME_INFERENCE_KEY}` } });
    assert.equal(reader.status, 403);
    assert.equal((await fetch(`${url}${READ_PATHS.recipes}`)).status, 401);
    const stop = (key: string): Promise<Response> => fetch(`${url}${CONTROL_PATHS.stop("nowhere")}`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    assert.equal((await stop(HOME_INFERENCE_KEY)).status, 401);
    const unseen = await stop(HOME_ADMIN_KEY);
    assert.equal(unseen.status, 404);
    assert.equal(((await unseen.json()) as { error: { code: string } }).error.code, "no_deployment");
  } finally {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
