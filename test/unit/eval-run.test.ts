import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { chatBody, evalServing, evalTarget as evalNamed, httpAsk, type Ask, type EvalSettings, type LoadedSet } from "../../src/measure/eval/eval.js";
import { bootFigures, pickHead, subjectOf, type ServingTarget } from "../../src/measure/serving-target.js";
import type { DeploymentLabels } from "../../src/contract/deployment.js";
import { parseEvalSet } from "../../src/measure/eval/set.js";
import type { EvalRun } from "../../src/contract/evidence.js";
import type { BootRecord } from "../../src/store/store.js";
import { UserError } from "../../src/config/errors.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const target: ServingTarget = { url: "http://127.0.0.1:1", model: "m", subject: { target: "lane-a", deployment: "d1" } };
const settings: EvalSettings = { temperature: 0, concurrency: 3, requestOptions: { chat_template_kwargs: { thinking: false } }, requestTimeoutMs: 5000 };

function setOf(n: number): LoadedSet {
  const text = Array.from({ length: n }, (_, i) => JSON.stringify({ id: `q${i}`, prompt: `What is ${i} + 1?`, expected: String(i + 1) })).join("\n");
  return { path: "s.jsonl", sha256: "x", items: parseEvalSet("s.jsonl", text).items };
}

function memoryStore(): { saved: EvalRun[]; saveEvalRun(r: EvalRun): void } {
  const saved: EvalRun[] = [];
  return { saved, saveEvalRun: (r) => saved.push(r) };
}

const promptOf = (body: Readonly<Record<string, unknown>>): string => ((body.messages as { content: string }[])[0]?.content ?? "");
const sumOf = (prompt: string): number => {
  const m = /What is (\d+) \+ (\d+)\?/.exec(prompt);
  return Number(m?.[1]) + Number(m?.[2]);
};

test("eval: at most --concurrency requests in flight, results in the set's order, X/N and each item stored", async () => {
  let inFlight = 0;
  let most = 0;
  const bodies: Readonly<Record<string, unknown>>[] = [];
  const ask: Ask = async (body) => {
    bodies.push(body);
    inFlight++;
    most = Math.max(most, inFlight);
    // Later items answer sooner: the order of results must still be the set's.
    await new Promise((r) => setTimeout(r, 20 - bodies.length));
    inFlight--;
    const sum = sumOf(promptOf(body));
    return String(sum % 4 === 0 ? sum + 1 : sum);
  };
  const store = memoryStore();
  const progress: number[] = [];
  const run = await evalServing(target, setOf(12), settings, { ask, store, now: () => new Date("2026-12-03T12:00:00Z"), newId: () => "run-1", progress: (p) => progress.push(p.done) });
  assert.ok(most <= 3 && most >= 2, `in flight at most ${most}`);
  assert.deepEqual(run.items.map((i) => i.id), Array.from({ length: 12 }, (_, i) => `q${i}`));
  // sums 4, 8, 12 (q3, q7, q11) were answered wrongly.
  assert.equal(run.correct, 9);
  assert.equal(run.total, 12);
  assert.deepEqual(run.items.filter((i) => !i.correct).map((i) => [i.id, i.answer]), [["q3", "5"], ["q7", "9"], ["q11", "13"]]);
  assert.deepEqual(progress, Array.from({ length: 12 }, (_, i) => i + 1));
  assert.deepEqual(store.saved, [run]);
  assert.deepEqual(run.request_options, { chat_template_kwargs: { thinking: false } });
  assert.equal(run.subject.deployment, "d1");
  for (const b of bodies) {
    assert.equal(b.temperature, 0);
    assert.deepEqual(b.chat_template_kwargs, { thinking: false });
    assert.equal(b.model, "m");
    assert.equal(b.stream, false);
  }
});

test("eval: a failed request is a wrong item with its error, never hidden; a slow one is cut at the timeout", async () => {
  const ask: Ask = async (body, signal) => {
    const sum = sumOf(promptOf(body));
    if (sum === 2) throw new Error("HTTP 500: boom");
    if (sum === 3) await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error)));
    return String(sum);
  };
  const run = await evalServing(target, setOf(4), { ...settings, requestTimeoutMs: 100 }, { ask, store: memoryStore(), now: () => new Date() });
  assert.equal(run.correct, 2);
  assert.deepEqual(run.items.map((i) => [i.id, i.correct, i.error]), [
    ["q0", true, undefined],
    ["q1", false, "HTTP 500: boom"],
    ["q2", false, "no answer within 0.1 s"],
    ["q3", true, undefined],
  ]);
});

test("eval: interrupted, the run is not stored and the interruption is thrown", async () => {
  const controller = new AbortController();
  const ask: Ask = async (_body, signal) => {
    controller.abort(new Error("interrupted (SIGINT)"));
    return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true }));
  };
  const store = memoryStore();
  await assert.rejects(evalServing(target, setOf(5), settings, { ask, store, now: () => new Date(), signal: controller.signal }), /interrupted \(SIGINT\)/);
  assert.deepEqual(store.saved, []);
});

test("eval: max_tokens, when given, is sent and recorded with the run's request options", async () => {
  const bodies: Readonly<Record<string, unknown>>[] = [];
  const run = await evalServing(target, setOf(1), { ...settings, maxTokens: 32 }, { ask: async (b) => (bodies.push(b), "1"), store: memoryStore(), now: () => new Date() });
  assert.equal(bodies[0]?.max_tokens, 32);
  assert.deepEqual(run.request_options, { chat_template_kwargs: { thinking: false }, max_tokens: 32 });
});

test("chatBody: launcher's fields win over a request option of the same name", () => {
  const body = chatBody("m", [{ role: "user", content: "x" }], { ...settings, maxTokens: 64, requestOptions: { model: "other", temperature: 1, reasoning_effort: "low" } });
  assert.deepEqual(body, { model: "m", messages: [{ role: "user", content: "x" }], temperature: 0, max_tokens: 64, stream: false, reasoning_effort: "low" });
});

/**
 * A loopback chat completions server for the test's duration: `answer` gives the status and body
 * for each request's JSON body; `seen` keeps each request's bearer header and body.
 */
async function chatServer(t: TestContext, answer: (body: { model?: unknown; messages: { content: string }[] }) => [number, unknown]): Promise<{ url: string; seen: { auth?: string; body: unknown }[] }> {
  const seen: { auth?: string; body: unknown }[] = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      const body = JSON.parse(raw) as { model?: unknown; messages: { content: string }[] };
      seen.push({ ...(req.headers.authorization === undefined ? {} : { auth: req.headers.authorization }), body });
      const [status, reply] = answer(body);
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

test("httpAsk: the message content, the engine's key as a bearer token, an error body's message", async (t) => {
  const { url, seen } = await chatServer(t, (body) => {
    const q = body.messages[0]?.content;
    if (q === "bad") return [400, { error: { message: "reasoning_effort: Input should be 'low', 'medium' or 'high'", type: "BadRequestError", code: 400 } }];
    return [200, { choices: [{ index: 0, message: { role: "assistant", content: q === "null" ? null : "Answer: B" } }] }];
  });
  const ask = httpAsk({ url: `${url}/`, apiKey: "k1" });
  const signal = AbortSignal.timeout(5000);
  assert.equal(await ask({ messages: [{ role: "user", content: "q" }] }, signal), "Answer: B");
  assert.equal(await ask({ messages: [{ role: "user", content: "null" }] }, signal), "");
  await assert.rejects(ask({ messages: [{ role: "user", content: "bad" }] }, signal), /^Error: HTTP 400: reasoning_effort: Input should be/);
  assert.equal(seen[0]?.auth, "Bearer k1");
});

const labels = (over: Partial<DeploymentLabels>): DeploymentLabels => ({
  deployment: "d",
  recipe: "r",
  recipe_hash: "h1",
  served_model: "m",
  rank: 0,
  role: "head",
  node: "n1",
  nnodes: 1,
  cluster: "c",
  endpoint: "http://10.0.0.1:8000",
  ...over,
});

test("pickHead: a deployment, lane or recipe name, else a served model; none or several is a user error", () => {
  const heads = [labels({ deployment: "a", lane: "chat", served_model: "qwen" }), labels({ deployment: "b", recipe: "r2", served_model: "llama" })];
  assert.equal(pickHead("a", heads, "eval").deployment, "a");
  assert.equal(pickHead("chat", heads, "eval").deployment, "a");
  assert.equal(pickHead("r2", heads, "eval").deployment, "b");
  assert.equal(pickHead("llama", heads, "eval").deployment, "b");
  assert.throws(() => pickHead("nope", heads, "eval"), (e) => e instanceof UserError && /nothing serves nope/.test(e.message) && /a \(lane chat\), b/.test(e.hint ?? ""));
  assert.throws(() => pickHead("recipe/r", [...heads, labels({ deployment: "c" })], "eval"), (e) => e instanceof UserError && /names 2 deployments/.test(e.message));
});

test("subjectOf: labels, and the engine version and figures of the deployment's last ready boot of that recipe hash", () => {
  const boot = (over: Partial<BootRecord>): BootRecord => ({
    id: 1, deployment: "d", recipe: "r", recipe_hash: "h1", cluster: "c", served_model: "m", endpoint: "e", nodes: ["n1"], started_at: "t", outcome: "ready", phases: [], ...over,
  });
  const boots = [
    boot({ id: 3, outcome: "failed" }),
    boot({ id: 2, recipe_hash: "h0", engine_version: "0.10.0" }),
    boot({ id: 1, engine_version: "0.12.0", nodes: ["n1", "n2"], phases: [{ node: "n2", phase: "loading", started_at: "t", figures: { load_seconds: "99" } }, { node: "n1", phase: "loading", started_at: "t", figures: { load_seconds: "12.5" } }, { node: "n1", phase: "kv-cache", started_at: "t", figures: { kv_tokens: "1,250,000", max_concurrency: "9.5" } }] }),
  ];
  assert.deepEqual(subjectOf("chat", labels({ lane: "chat" }), boots), {
    target: "chat", deployment: "d", lane: "chat", recipe: "r", recipe_hash: "h1", engine_version: "0.12.0", boot: { load_seconds: 12.5, kv_tokens: 1250000, max_concurrency: 9.5 },
  });
  assert.deepEqual(subjectOf("d", labels({}), []), { target: "d", deployment: "d", recipe: "r", recipe_hash: "h1" });
  assert.deepEqual(bootFigures(boot({})), {});
});

test("evalTarget through a gateway without a cluster: model TARGET to the gateway's URL with its key, subject the name alone", async (t) => {
  const { url, seen } = await chatServer(t, () => [200, { choices: [{ message: { content: "1" } }] }]);
  const store = { ...memoryStore(), engineKey: () => undefined, history: () => [] };
  const run = await evalNamed("chat", setOf(1), settings, { route: { kind: "gateway", url, apiKey: "gw" }, store, now: () => new Date() });
  assert.deepEqual(run.subject, { target: "chat" });
  assert.equal(run.correct, 1);
  assert.deepEqual(seen.map((r) => [r.auth, (r.body as { model: unknown }).model]), [["Bearer gw", "chat"]]);
});
