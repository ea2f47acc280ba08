import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { noteGeneration, probeDue, probeSucceeded, startGeneration, wedgedMessage, wedgedOf, type GenerationState, type GenerationTiming } from "../../src/supervise/generation.js";
import { PROGRESS_EVERY_MS } from "../../src/contract/generation.js";
import { FORGET_AFTER_POLLS, GenerationWatch, generatedToken, httpProbe, probeWithin, type ProbeOnce, type Watched } from "../../src/supervise/generation-watch.js";
import { generatedBy } from "../../src/gateway/activity.js";
import { routeTable, type KnownDeployment } from "../../src/gateway/routes.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import type { WedgedDeployment } from "../../src/contract/generation.js";
import { within } from "../integration/practice-cluster.js";
import { createGateway } from "../../src/gateway/server.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";

// The generation probe and the wedged rule: the pure core (time only from its inputs), the
// gateway's hook and 503, and the daemon's watch over a fake engine that answers /health and
// hangs on completions.

const T: GenerationTiming = { probeEveryMs: 60_000, boundMs: 30_000 };
const at0 = Date.parse("2026-01-01T00:00:00Z");

test("rule: a quiet deployment is probed every probeEveryMs from its last generation, never twice at once", () => {
  let s = startGeneration(at0);
  assert.equal(probeDue(s, at0 + 59_999, T), false);
  assert.equal(probeDue(s, at0 + 60_000, T), true, "never generated: judged from when it was first seen serving");
  s = noteGeneration(s, { kind: "generated", at: at0 + 50_000 });
  assert.equal(probeDue(s, at0 + 60_000, T), false, "a real completion puts the probe off");
  assert.equal(probeDue(s, at0 + 110_000, T), true);
  s = noteGeneration(s, { kind: "probe-started", at: at0 + 110_000 });
  assert.equal(probeDue(s, at0 + 500_000, T), false, "one probe in flight at most");
  s = probeSucceeded(s, at0 + 110_200);
  assert.equal(s.lastOk, at0 + 110_200);
  assert.equal(probeDue(s, at0 + 170_199, T), false);
  assert.equal(probeDue(s, at0 + 170_200, T), true);
});

test("rule: wedged once a probe sent after the last generation failed; a probe in flight is judged only by its own end; since its last generation", () => {
  let s: GenerationState = noteGeneration(startGeneration(at0), { kind: "generated", at: at0 + 1000 });
  s = noteGeneration(s, { kind: "probe-started", at: at0 + 61_000 });
  assert.equal(wedgedOf(s), undefined, "in flight, however long: its own bound ends it, never a tick's clock");
  s = noteGeneration(s, { kind: "probe-failed", at: at0 + 91_000, why: "its probe of one token got no answer within 30 s" });
  const first = wedgedOf(s);
  assert.deepEqual(first, { since: at0 + 1000, generated: true, at: at0 + 91_000, why: "its probe of one token got no answer within 30 s", confirmed: false });
  assert.equal(
    wedgedMessage("d", first as NonNullable<typeof first>),
    "deployment d is wedged since 2026-01-01T00:00:01.000Z: /health answers but no generation completed since then (its probe of one token got no answer within 30 s)",
  );
  // Evidence of generation ends the wedge.
  s = noteGeneration(s, { kind: "generated", at: at0 + 120_000 });
  assert.equal(wedgedOf(s), undefined, "it generated again");
  assert.equal(s.failed, undefined);
});

test("rule: a first failure is confirmed by a second probe at once; only two failures in a row are a confirmed wedge", () => {
  let s = noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 });
  s = noteGeneration(s, { kind: "probe-failed", at: at0 + 90_000, why: "x" });
  assert.equal(wedgedOf(s)?.confirmed, false, "one failure: not routed to, not yet restarted");
  assert.equal(probeDue(s, at0 + 90_000, T), true, "the confirmation is probed at once");
  s = noteGeneration(s, { kind: "probe-started", at: at0 + 90_000 });
  s = noteGeneration(s, { kind: "probe-failed", at: at0 + 120_000, why: "y" });
  assert.deepEqual(wedgedOf(s), { since: at0, generated: false, at: at0 + 120_000, why: "y", confirmed: true });
  assert.equal(probeDue(s, at0 + 179_999, T), false, "confirmed: probed a period apart, to see it recover");
  assert.equal(probeDue(s, at0 + 180_000, T), true);
  // A refused confirmation learns nothing and is not sent again at once.
  let r = noteGeneration(noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 }), { kind: "probe-failed", at: at0 + 90_000, why: "x" });
  r = noteGeneration(noteGeneration(r, { kind: "probe-started", at: at0 + 90_000 }), { kind: "probe-refused", at: at0 + 90_100 });
  assert.equal(wedgedOf(r)?.confirmed, false);
  assert.equal(probeDue(r, at0 + 90_200, T), false);
  // Generating in between starts the count anew.
  let g = noteGeneration(noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 }), { kind: "probe-failed", at: at0 + 90_000, why: "x" });
  g = noteGeneration(g, { kind: "generated", at: at0 + 95_000 });
  g = noteGeneration(noteGeneration(g, { kind: "probe-started", at: at0 + 155_000 }), { kind: "probe-failed", at: at0 + 185_000, why: "z" });
  assert.equal(wedgedOf(g)?.confirmed, false);
});

test("rule: a stream's chunk while a probe ran, even stamped up to PROGRESS_EVERY_MS before it began, outweighs the probe's failure; the previous probe's own token does not", () => {
  let s = noteGeneration(startGeneration(at0), { kind: "generated", at: at0 + 59_500 });
  s = noteGeneration(s, { kind: "probe-started", at: at0 + 60_000 });
  s = noteGeneration(s, { kind: "probe-failed", at: at0 + 90_000, why: "x" });
  assert.equal(wedgedOf(s), undefined, `a chunk ${PROGRESS_EVERY_MS - 500} ms before the probe began: the next one may have gone untold`);
  let p = probeSucceeded(noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 1000 }), at0 + 1200);
  p = noteGeneration(p, { kind: "probe-started", at: at0 + 1400 });
  p = noteGeneration(p, { kind: "probe-failed", at: at0 + 1900, why: "x" });
  assert.equal(wedgedOf(p)?.why, "x", "the last probe's own token is no evidence for the next one");
});

test("rule: a generation that completed after a probe began outweighs the probe's failure; a refused probe is neither", () => {
  let s = noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 });
  s = noteGeneration(s, { kind: "generated", at: at0 + 70_000 });
  s = noteGeneration(s, { kind: "probe-failed", at: at0 + 90_000, why: "x" });
  assert.equal(wedgedOf(s), undefined);
  assert.equal(probeDue(s, at0 + 149_999, T), false, "the next probe waits a period from the last one's end");
  let r = noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 });
  r = noteGeneration(r, { kind: "probe-refused", at: at0 + 60_100 });
  assert.equal(wedgedOf(r), undefined);
  assert.equal(r.probing, undefined);
  assert.equal(probeDue(r, at0 + 120_099, T), false);
  assert.equal(probeDue(r, at0 + 120_100, T), true);
  // Never generated: since when it was first seen serving, said so.
  const never = noteGeneration(noteGeneration(startGeneration(at0), { kind: "probe-started", at: at0 + 60_000 }), { kind: "probe-failed", at: at0 + 61_000, why: "its probe of one token was answered HTTP 500" });
  assert.match(wedgedMessage("d", wedgedOf(never) as NonNullable<ReturnType<typeof wedgedOf>>), /^deployment d is wedged since 2026-01-01T00:00:00.000Z: \/health answers but it completed no generation since it was first seen serving then \(its probe of one token was answered HTTP 500\)$/);
});

test("gateway: a real generation is a 200 that ended whole with at least one token, named by its cluster and deployment", () => {
  const trail = { cluster: "c", deployment: "d", tokensOut: 1 };
  assert.deepEqual(generatedBy(200, trail), { cluster: "c", deployment: "d" });
  assert.equal(generatedBy(200, { ...trail, tokensOut: 0 }), undefined);
  assert.equal(generatedBy(200, { cluster: "c", deployment: "d" }), undefined, "no token counted");
  assert.equal(generatedBy(500, trail), undefined);
  assert.equal(generatedBy(200, { ...trail, error: "upstream_broke" }), undefined, "a stream cut short");
  assert.equal(generatedBy(200, { deployment: "d", tokensOut: 3 }), undefined, "never routed");
});

const known = (deployment: string, over: Partial<KnownDeployment> = {}): KnownDeployment => ({
  cluster: "c", deployment, recipe: "r", recipe_hash: "h", served_model: "m", endpoint: `http://${deployment}:8000`, status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [{ rank: 0, node: "n1", container: `launcher-${deployment}-r0`, state: "running", started_at: "t" }], ...over,
});
const wedge = (deployment: string, lane?: string): WedgedDeployment => ({
  cluster: "c", deployment, served_model: "m", ...(lane === undefined ? {} : { lane }), since: "2026-01-01T00:00:01.000Z", reason: "its probe of one token got no answer within 30 s",
  message: `deployment ${deployment} is wedged since 2026-01-01T00:00:01.000Z: /health answers but no generation completed since then (its probe of one token got no answer within 30 s)`,
});

test("routes: a wedged deployment is not routed to: a 503 with its own code that says since when; a working one of the name is routed instead", () => {
  const alone = routeTable([known("d1", { lane: "chat" })], [], undefined, [], [], [wedge("d1", "chat")]);
  for (const name of ["m", "chat"]) {
    const r = alone.resolve(name);
    assert.equal(r.kind, "unavailable");
    assert.equal(r.kind === "unavailable" ? r.code : "", "deployment_wedged");
    assert.match(r.kind === "unavailable" ? r.message : "", new RegExp(`^model ${name}: deployment d1 is wedged since 2026-01-01T00:00:01.000Z: /health answers`));
  }
  assert.equal(alone.resolve(undefined).kind, "unknown", "no model named: nothing routable");
  assert.deepEqual(alone.models().map((m) => [m.id, m.status]), [["chat", "wedged"], ["m", "wedged"]]);
  const two = routeTable([known("d1"), known("d2")], [], undefined, [], [], [wedge("d1")]);
  const r = two.resolve("m");
  assert.equal(r.kind === "route" ? r.target.deployment : r.kind, "d2");
  // Its restart under way says so first.
  const restarting = routeTable([known("d1")], [], undefined, [], [{ cluster: "c", deployment: "d1", served_model: "m", attempt: 1, retryAfter: 5, reason: "deployment d1 is wedged since ..." }], [wedge("d1")]);
  const rr = restarting.resolve("m");
  assert.equal(rr.kind === "unavailable" ? rr.code : rr.kind, "deployment_restarting");
  // Not wedged: as before.
  assert.equal(routeTable([known("d1")], []).resolve("m").kind, "route");
});

test("metrics: each watched deployment's wedged gauge and last generation; its series go with it", async () => {
  const m = new GatewayMetrics();
  m.generation("c", "d", { lastOk: at0, wedged: true });
  let text = await m.text();
  assert.match(text, /^launcher_gateway_deployment_wedged\{cluster="c",deployment="d"\} 1$/m);
  assert.match(text, /^launcher_gateway_deployment_last_generation_timestamp_seconds\{cluster="c",deployment="d"\} 1767225600$/m);
  m.generation("c", "d", undefined);
  text = await m.text();
  assert.doesNotMatch(text, /deployment="d"/);
});

test("probe: a one-token answer's token is read from usage, else from its text", () => {
  assert.equal(generatedToken(JSON.stringify({ choices: [{ text: "" }], usage: { completion_tokens: 1 } })), true);
  assert.equal(generatedToken(JSON.stringify({ choices: [{ text: "x" }], usage: { completion_tokens: 0 } })), false);
  assert.equal(generatedToken(JSON.stringify({ choices: [{ text: "x" }] })), true);
  assert.equal(generatedToken(JSON.stringify({ choices: [] })), false);
  assert.equal(generatedToken("not json"), false);
});

/** A fake engine: /health answers 200; a completion answers one token, or hangs while `wedged` (ended only by its client). */
async function fakeEngine(key?: string): Promise<{ url: string; server: Server; asked: { path: string; body: string; auth: string | undefined }[]; set(wedged: boolean): void }> {
  let wedged = false;
  const asked: { path: string; body: string; auth: string | undefined }[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.url === "/health") return res.end();
      asked.push({ path: req.url ?? "", body, auth: req.headers.authorization });
      if (key !== undefined && req.headers.authorization !== `Bearer ${key}`) {
        res.writeHead(401, { "content-type": "application/json" });
        return res.end('{"error":"Unauthorized"}');
      }
      if (wedged) return;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ choices: [{ index: 0, text: " hi", finish_reason: "length" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, asked, set: (w) => (wedged = w) };
}

const watched = (endpoint: string, boot = "b1"): Watched => ({
  cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "m", endpoint, status: "serving", phase: "serving", missing: [], unreachable: [], boot,
  ranks: [{ rank: 0, node: "n1", container: "launcher-d-r0", state: "running", started_at: "t" }],
});

test("probe: a one-token completion of the served name with the engine's key, to the engine's own endpoint; a hang is a failure at the bound, a 401 a refusal", async () => {
  const engine = await fakeEngine("ek");
  try {
    assert.deepEqual(await httpProbe({ endpoint: engine.url, served_model: "m", apiKey: "ek" }, AbortSignal.timeout(5000)), { kind: "generated" });
    assert.deepEqual(engine.asked[0], { path: "/v1/completions", body: '{"model":"m","prompt":"Hello","max_tokens":1,"temperature":0,"stream":false}', auth: "Bearer ek" });
    assert.equal((await httpProbe({ endpoint: engine.url, served_model: "m", apiKey: undefined }, AbortSignal.timeout(5000))).kind, "refused");
    engine.set(true);
    const started = Date.now();
    const hung = await probeWithin(httpProbe, { endpoint: engine.url, served_model: "m", apiKey: "ek" }, 300, new AbortController().signal);
    assert.deepEqual(hung, { kind: "failed", why: "its probe of one token got no answer within 300 ms" });
    assert.ok(Date.now() - started < 5000, "ended at its bound");
  } finally {
    engine.server.closeAllConnections();
    engine.server.close();
  }
});

test("probe: quick failures are tried again within the bound; the first success ends it", async () => {
  let calls = 0;
  const flaky: ProbeOnce = async () => (++calls < 2 ? { kind: "failed", why: "its probe of one token was answered HTTP 503" } : { kind: "generated" });
  assert.deepEqual(await probeWithin(flaky, { endpoint: "x", served_model: "m", apiKey: undefined }, 10_000, new AbortController().signal), { kind: "generated" });
  assert.equal(calls, 2);
  const failing: ProbeOnce = async () => {
    throw new Error("connect ECONNREFUSED");
  };
  const out = await probeWithin(failing, { endpoint: "x", served_model: "m", apiKey: undefined }, 1500, new AbortController().signal);
  assert.deepEqual(out, { kind: "failed", why: "its probe of one token failed: connect ECONNREFUSED (tried again for 2 s)" });
});

test("watch: real traffic keeps a deployment from being probed; a quiet one is probed with the store's key; each launch is judged anew", async () => {
  let clock = at0;
  const probed: string[] = [];
  const probe: ProbeOnce = async (t) => {
    probed.push(`${t.endpoint} ${t.served_model} ${t.apiKey ?? "-"}`);
    return { kind: "generated" };
  };
  const states: unknown[] = [];
  const w = new GenerationWatch({ probe, engineKey: () => "ek", timing: T, now: () => clock, wall: () => clock, log: () => undefined, onState: (_c, _d, s) => states.push(s) });
  try {
    w.observe([watched("http://e:8000")]);
    for (let i = 0; i < 5; i++) {
      clock += 30_000;
      w.generated("c", "d");
      w.tick();
    }
    assert.deepEqual(probed, [], "real completions every 30 s: no probe");
    clock += 60_000;
    w.tick();
    await within(2000, "the probe ran", async () => (probed.length === 1 ? true : undefined));
    assert.deepEqual(probed, ["http://e:8000 m ek"]);
    assert.deepEqual(w.wedged(), []);
    // Not serving for FORGET_AFTER_POLLS polls in a row: forgotten (its series go); a new launch of the name starts anew.
    for (let i = 0; i < FORGET_AFTER_POLLS; i++) w.observe([{ ...watched("http://e:8000"), status: "booting" }]);
    assert.equal(states.at(-1), undefined);
    w.observe([watched("http://e:8000", "b2")]);
    clock += 59_000;
    w.tick();
    assert.equal(probed.length, 1, "the new launch's period runs from when it was first seen serving");
  } finally {
    await w.stop();
  }
});

test("watch over a fake engine that answers /health and hangs on completions: wedged within its bound, said once, handed on; generating again ends it", async () => {
  const engine = await fakeEngine();
  const wedges: string[] = [];
  const logs: string[] = [];
  const metrics = new GatewayMetrics();
  const w = new GenerationWatch({
    probe: httpProbe,
    engineKey: () => undefined,
    timing: { probeEveryMs: 200, boundMs: 500 },
    now: () => performance.now(),
    wall: Date.now,
    log: (l) => logs.push(l),
    onWedged: (seen, _w, message) => wedges.push(`${seen.cluster}/${seen.deployment}: ${message}`),
    onCleared: (seen) => wedges.push(`${seen.cluster}/${seen.deployment}: cleared`),
    onState: (c, d, s) => metrics.generation(c, d, s),
  });
  try {
    w.observe([watched(engine.url)]);
    w.start();
    await within(5000, "a probe generated", async () => ((await metrics.text()).includes("launcher_gateway_deployment_last_generation_timestamp_seconds{") ? true : undefined));
    assert.deepEqual(w.wedged(), []);
    const version = w.version;
    // What was said from here on: a first probe slower than its bound on a busy machine (the
    // process's first fetch) may have been a wedge of its own, cleared by the probe after it.
    const since = wedges.length;
    const logsSince = logs.length;
    engine.set(true);
    // The probe period, then its bound, then a tick: about 0.7 s; the wait is bounded generously.
    const { value } = await within(10_000, "wedged", async () => w.wedged()[0]);
    assert.equal(value.deployment, "d");
    assert.equal(value.reason, "its probe of one token got no answer within 500 ms");
    assert.match(value.message, /^deployment d is wedged since \d{4}-\d\d-\d\dT[\d:.]+Z: \/health answers but no generation completed since then \(/);
    await within(5000, "said", async () => (wedges.length > since ? true : undefined));
    assert.ok(w.version > version, "the gateway's routes are made anew");
    assert.match(w.describe()["c/d"] ?? "", /^wedged since /);
    assert.match(await metrics.text(), /^launcher_gateway_deployment_wedged\{cluster="c",deployment="d"\} 1$/m);
    // It stays wedged across further probes, and is said once.
    const asked = engine.asked.length;
    await within(5000, "probed again", async () => (engine.asked.length > asked + 1 ? true : undefined));
    assert.equal(wedges.length, since + 1, wedges.join("\n"));
    assert.equal(wedges[since]?.startsWith("c/d: deployment d is wedged since "), true);
    // Recovered: the next probe generates and the wedge ends.
    engine.set(false);
    await within(5000, "generating again", async () => (w.wedged().length === 0 ? true : undefined));
    assert.ok(logs.slice(logsSince).some((l) => l === "generation: d generates again (no longer wedged)"), logs.join("\n"));
    assert.deepEqual(wedges.slice(since + 1), ["c/d: cleared"]);
    assert.match(await metrics.text(), /^launcher_gateway_deployment_wedged\{cluster="c",deployment="d"\} 0$/m);
  } finally {
    await w.stop();
    engine.server.closeAllConnections();
    engine.server.close();
  }
});

test("gateway: each 200 answer with a token tells the watch which deployment generated; an empty or failed one does not; a wedged one is answered 503 deployment_wedged", async () => {
  let tokens = 1;
  const engine = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (tokens < 0) {
        res.writeHead(500, { "content-type": "application/json" });
        return res.end('{"error":"x"}');
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ choices: [{ index: 0, text: tokens === 0 ? "" : "x" }], usage: { prompt_tokens: 1, completion_tokens: tokens } }));
    });
  });
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const d = deployment(`http://127.0.0.1:${(engine.address() as AddressInfo).port}`);
  let wedged: WedgedDeployment[] = [];
  const heard: string[] = [];
  const gw = createGateway(gatewayOptions({ routes: () => routeTable([d], [], undefined, [], [], wedged), generated: (c, dep) => heard.push(`${c}/${dep}`) }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  const ask = async (): Promise<{ status: number; body: string }> => {
    const res = await fetch(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "main", prompt: "x", max_tokens: 1 }), signal: AbortSignal.timeout(10_000) });
    return { status: res.status, body: await res.text() };
  };
  try {
    assert.equal((await ask()).status, 200);
    assert.deepEqual(heard, ["c/practice-2x"]);
    tokens = 0;
    assert.equal((await ask()).status, 200);
    tokens = -1;
    assert.equal((await ask()).status, 500);
    assert.deepEqual(heard, ["c/practice-2x"], "no token, or an error: no generation");
    wedged = [{ ...wedge("practice-2x", "main") }];
    const refused = await ask();
    assert.equal(refused.status, 503);
    const error = (JSON.parse(refused.body) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, "deployment_wedged");
    assert.match(error.message, /^model main: deployment practice-2x is wedged since 2026-01-01T00:00:01.000Z: /);
  } finally {
    gw.server.closeAllConnections();
    gw.server.close();
    await gw.close();
    engine.close();
  }
});

test("watch: stopped, it claims no wedge any more (the store's record is cleared), and a failed probe of a forgotten launch says nothing", async () => {
  let clock = at0;
  const events: string[] = [];
  const w = new GenerationWatch({
    probe: async () => ({ kind: "failed", why: "its probe of one token was answered HTTP 500" }),
    engineKey: () => undefined,
    timing: { probeEveryMs: 1000, boundMs: 50 },
    now: () => clock,
    wall: () => clock,
    log: () => undefined,
    onWedged: (seen) => events.push(`wedged ${seen.boot ?? "-"}`),
    onCleared: (seen) => events.push(`cleared ${seen.boot ?? "-"}`),
  });
  w.observe([watched("http://e:8000")]);
  clock += 1000;
  w.tick();
  await within(5000, "wedged", async () => (events.includes("wedged b1") ? true : undefined));
  // A new launch: the old one's wedge is over, the new one is judged anew.
  w.observe([watched("http://e:8000", "b2")]);
  assert.deepEqual(events, ["wedged b1", "cleared b1"]);
  assert.deepEqual(w.wedged(), []);
  clock += 1000;
  w.tick();
  await within(5000, "the new launch wedged", async () => (events.includes("wedged b2") ? true : undefined));
  await w.stop();
  assert.deepEqual(events, ["wedged b1", "cleared b1", "wedged b2", "cleared b2"]);
});
