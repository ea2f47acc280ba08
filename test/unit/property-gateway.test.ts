/**
 * The gateway's readers of untrusted input at volume (issue 25): the body reader, the path
 * normaliser, the route table with the engines' allow-list, and the SSE decoder of streamed
 * answers. The property: every input gets a typed answer (a value, or a refusal with its code),
 * never an exception. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ChatStreamClock, SseMessages } from "../../src/measure/bench/stream.js";
import { DEPLOYMENT_STATUSES, type DeploymentState } from "../../src/contract/deployment.js";
import { engineApiMethods, engineRefusedRoutes } from "../../src/engine/registry.js";
import { MAX_JSON_DEPTH, readRequestBody, rewriteModel } from "../../src/gateway/body.js";
import { GATEWAY_METHODS, methodMatcher, routeParams } from "../../src/gateway/methods.js";
import { canonicalPath, MAX_PATH_CHARS } from "../../src/gateway/paths.js";
import { routeTable, type KnownDeployment, type RestartingDeployment } from "../../src/gateway/routes.js";
import type { LaneRecord, LaneState } from "../../src/store/store.js";
import { holds, reportInputsTried } from "./property.js";

// ---- body reader ----

const CONTENT_TYPES = [undefined, "", "application/json", "application/json; charset=utf-8", "text/plain", "multipart/form-data; boundary=x", "APPLICATION/X-WWW-FORM-URLENCODED", ";", "a/b;c=d"];

/** The bytes in a larger buffer at an offset, as Node hands a body over (a slice of a pooled buffer). */
const atOffset = (bytes: Uint8Array, pad: number): Uint8Array => {
  const whole = new Uint8Array(pad + bytes.length + 3);
  whole.set(bytes, pad);
  return whole.subarray(pad, pad + bytes.length);
};

const depthOf = (v: unknown): number =>
  v !== null && typeof v === "object" ? 1 + Math.max(0, ...Object.values(v as Record<string, unknown>).map(depthOf)) : 0;

/** What JSON.parse makes of the bytes, the reader's oracle: the engines' readers agree with it. */
function oracle(bytes: Uint8Array): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown };
  } catch {
    return { ok: false };
  }
}

/** A reading checked against JSON.parse: JSON exactly when it parses within the depth, and the model found where it is. */
function checkReading(bytes: Uint8Array, type: string | undefined, pad: number): void {
  const r = readRequestBody(atOffset(bytes, pad), type);
  const form = /^\s*(multipart\/form-data|application\/x-www-form-urlencoded)\s*(;|$)/i.test(type ?? "");
  if (bytes.length === 0 || form) {
    assert.deepEqual(r, { kind: "raw" });
    return;
  }
  const parsed = oracle(bytes);
  if (!parsed.ok) {
    assert.equal(r.kind, "invalid", `the reader took ${JSON.stringify(Buffer.from(bytes).toString())} for JSON`);
    return;
  }
  if (depthOf(parsed.value) > MAX_JSON_DEPTH) {
    assert.equal(r.kind === "invalid" && r.code, "json_too_deep");
    return;
  }
  assert.equal(r.kind, "json", `the reader refused JSON ${JSON.stringify(Buffer.from(bytes).toString()).slice(0, 200)}: ${r.kind === "invalid" ? r.message : ""}`);
  if (r.kind !== "json") return;
  const v = parsed.value;
  const has = v !== null && typeof v === "object" && !Array.isArray(v) && Object.hasOwn(v, "model");
  assert.equal(r.model !== undefined, has, "model found where JSON.parse has none, or missed");
  if (r.model === undefined || !has) return;
  const model = (v as { model: unknown }).model;
  assert.deepEqual(JSON.parse(Buffer.from(bytes.subarray(r.model.start, r.model.end)).toString("utf8")), model);
  if (typeof model === "string" && !r.model.tooLong) assert.equal(r.model.name, model);
  if (typeof model !== "string") assert.equal(r.model.name, undefined);
  // The lane rewrite changes the model and nothing else.
  const rewritten = JSON.parse(Buffer.concat(rewriteModel(Buffer.from(bytes), r.model, "served")).toString("utf8")) as unknown;
  assert.deepEqual(rewritten, { ...(v as object), model: "served" });
}

const JSON_BYTES = fc.string({ unit: fc.constantFrom("[", "]", "{", "}", '"', "\\", ":", ",", "1", "0", "-", "e", ".", "a", "u", "t", "n", " ", "\n", '"model"', '"mod\\u0065l"', "true", "null", "\u00e9", "\u0001", "\ufeff"), maxLength: 60 });

test("any bytes read as JSON exactly when JSON.parse reads them, else a refusal with its code", () => {
  const arb = fc.record({
    bytes: fc.oneof(fc.uint8Array({ maxLength: 200 }), JSON_BYTES.map((s) => new TextEncoder().encode(s))),
    type: fc.constantFrom(...CONTENT_TYPES),
    pad: fc.nat({ max: 16 }),
  });
  holds("body: any bytes", arb, ({ bytes, type, pad }) => {
    checkReading(bytes, type, pad);
    const r = readRequestBody(bytes, type);
    if (r.kind === "invalid") assert.ok((r.code === "json_too_deep" || r.code === "invalid_json") && r.message.trim() !== "");
  }, 3);
});

test("a JSON value, nested at any depth, with or without a model, reads as JSON.parse reads it", () => {
  const arb = fc.record({
    value: fc.jsonValue({ maxDepth: 4 }),
    model: fc.option(fc.oneof(fc.string({ unit: "binary", maxLength: 12 }), fc.jsonValue({ maxDepth: 2 })), { nil: undefined }),
    wraps: fc.array(fc.constantFrom("array", "object"), { maxLength: MAX_JSON_DEPTH + 20 }),
    spaces: fc.constantFrom(0, 1, "\t"),
    pad: fc.nat({ max: 16 }),
  });
  holds("body: nested JSON", arb, ({ value, model, wraps, spaces, pad }) => {
    const inner = wraps.reduce<unknown>((v, w) => (w === "array" ? [v] : { 'k[{"': v }), value);
    const top = JSON.stringify(model === undefined ? inner : { messages: inner, model_: 1, model }, null, spaces as number);
    // A repeated "model": JSON.parse and the engines' readers keep the last one.
    const text = model === undefined ? top : `{"model":"first",${top.slice(1)}`;
    checkReading(new TextEncoder().encode(text), "application/json", pad);
  });
});

// ---- path normaliser ----

const SEGMENTS = ["v1", "chat", "completions", "models", "launcher", "boots", "events", "health", "", ".", "..", "%2e", "%2E%2e", "%2F", "%2f", "%5C", "%41", "%7e", "%C3", "%C3%A9", "%E2%82", "%E2%82%AC", "%FF", "%C0%AF", "%ED%A0%80", "%00", "%zz", "%", "%2", "~", "a;b", "@", "a:b", "%20", " ", "é", "\\", "?", "#"];

const target = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc
    .tuple(fc.array(fc.oneof(fc.constantFrom(...SEGMENTS), fc.string({ maxLength: 6 })), { maxLength: 6 }), fc.constantFrom("", "?", "?a=b", "?x=%zz&y=/../"), fc.boolean())
    .map(([segs, query, abs]) => `${abs ? "/" : ""}${segs.join("/")}${query}`),
);

test("any request target is canonical or refused with invalid_path", () => {
  holds("path: any target", fc.tuple(target, fc.boolean()), ([t, encodedSlash]) => {
    const v = canonicalPath(t, encodedSlash);
    if (!v.ok) {
      assert.equal(v.code, "invalid_path");
      assert.notEqual(v.message.trim(), "");
      return;
    }
    assert.equal(`${v.path}${v.query}`, t);
    assert.ok(v.path.startsWith("/") && v.path.length <= MAX_PATH_CHARS);
    if (v.path !== "/") for (const seg of v.path.slice(1).split("/")) assert.ok(seg !== "" && seg !== "." && seg !== "..", `segment ${JSON.stringify(seg)} of ${v.path}`);
    // What the engine's framework and the gateway's own handlers do next: decode it, and normalise it.
    assert.doesNotThrow(() => decodeURIComponent(v.path), `accepted ${v.path}, which does not decode`);
    assert.equal(new URL(v.path, "http://gateway").pathname, v.path, `a URL parser changes ${v.path}`);
    assert.deepEqual(canonicalPath(`${v.path}${v.query}`, encodedSlash), v);
  }, 3);
});

test("a path of percent-escapes that are not UTF-8 is refused before a handler decodes it", () => {
  for (const p of ["/launcher/v1/boots/%C3", "/launcher/v1/boots/%C3/events", "/v1/models/%E2%82", "/v1/%FF", "/v1/%C0%AF"]) {
    const v = canonicalPath(p, p.startsWith("/v1/models/"));
    assert.equal(v.ok, false, p);
    assert.equal(!v.ok && v.code, "invalid_path");
  }
  assert.deepEqual(canonicalPath("/launcher/v1/boots/%C3%A9"), { ok: true, path: "/launcher/v1/boots/%C3%A9", query: "" });
});

// ---- route table and the engines' allow-list ----

const API = engineApiMethods();
const REFUSED = Object.keys(engineRefusedRoutes());
const allowed = methodMatcher([GATEWAY_METHODS, API]);
const KNOWN_ROUTES = [...Object.keys(GATEWAY_METHODS), ...Object.keys(API), ...REFUSED.map((r) => r.replace("{response_id}", "resp_1"))];

/** A known route changed a little: a segment added, dropped, doubled, re-cased or escaped. */
const nearRoute = fc
  .tuple(fc.constantFrom(...KNOWN_ROUTES), fc.nat({ max: 5 }), fc.constantFrom("add", "drop", "double", "upper", "escape", "same"), fc.constantFrom(...SEGMENTS))
  .map(([route, at, how, seg]) => {
    const parts = route.split("/");
    const i = 1 + (at % Math.max(1, parts.length - 1));
    const p = parts[i] ?? "";
    const changed: Record<string, string[]> = {
      add: [...parts.slice(0, i), seg, ...parts.slice(i)],
      drop: [...parts.slice(0, i), ...parts.slice(i + 1)],
      double: [...parts.slice(0, i), p, ...parts.slice(i)],
      upper: [...parts.slice(0, i), p.toUpperCase(), ...parts.slice(i + 1)],
      escape: [...parts.slice(0, i), p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`), ...parts.slice(i + 1)],
      same: parts,
    };
    return (changed[how] as string[]).join("/");
  });

test("only a listed route is allowed, and no refused route ever is", () => {
  holds("routes: allow-list is exact", fc.oneof(nearRoute, target), (t) => {
    const v = canonicalPath(t, t.startsWith("/v1/models/"));
    if (!v.ok) return;
    const methods = allowed(v.path);
    if (REFUSED.some((pattern) => routeParams(pattern, v.path) !== undefined)) assert.equal(methods, undefined, `${v.path} is refused yet allowed`);
    if (methods === undefined) return;
    const listed = v.path in API || v.path in GATEWAY_METHODS || routeParams("/v1/models/{model}", v.path) !== undefined;
    assert.ok(listed, `${v.path} is allowed (${methods.join(", ")}) but no table lists it`);
    assert.deepEqual(methods, API[v.path] ?? GATEWAY_METHODS[v.path] ?? GATEWAY_METHODS["/v1/models/{model}"]);
  }, 2);
});

const NAMES = ["a", "b", "main", "vision", "__proto__", "constructor", ""];
const deployment: fc.Arbitrary<KnownDeployment> = fc.record({
  deployment: fc.constantFrom("d1", "d2", "d3", "toString"),
  cluster: fc.constantFrom("c1", "c2"),
  recipe: fc.constant("r"),
  recipe_hash: fc.constant("h"),
  served_model: fc.constantFrom(...NAMES),
  lane: fc.option(fc.constantFrom(...NAMES), { nil: undefined }),
  endpoint: fc.constant("http://10.0.0.1:8000"),
  status: fc.constantFrom<DeploymentState>(...DEPLOYMENT_STATUSES),
  phase: fc.constantFrom("starting", "serving", "-" as const),
  uptime_seconds: fc.option(fc.integer({ min: 0, max: 1e6 }), { nil: undefined }),
  missing: fc.array(fc.constantFrom("rank 1 (no container)"), { maxLength: 1 }),
  unreachable: fc.array(fc.constantFrom("n2"), { maxLength: 1 }),
  ranks: fc.constant([]),
}).map((d) => Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined)) as unknown as KnownDeployment);
const lane: fc.Arbitrary<LaneRecord> = fc.record({
  name: fc.constantFrom(...NAMES),
  cluster: fc.constantFrom("c1", "c2"),
  deployment: fc.option(fc.constantFrom("d1", "d2", "d3"), { nil: undefined }),
  state: fc.constantFrom<LaneState>("serving", "switching", "empty"),
  switching_to: fc.option(fc.constantFrom("d1", "d2", "d3"), { nil: undefined }),
  since: fc.constantFrom("2026-01-01T00:00:00Z", "not a time", ""),
}).map((l) => Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined)) as unknown as LaneRecord);
const restarting: fc.Arbitrary<RestartingDeployment> = fc.record({
  cluster: fc.constantFrom("c1", "c2"),
  deployment: fc.constantFrom("d1", "d2"),
  served_model: fc.constantFrom(...NAMES),
  attempt: fc.integer({ min: 1, max: 5 }),
  retryAfter: fc.integer({ min: 1, max: 600 }),
  reason: fc.constant("rank 1 on n2 exited (exit 137)"),
});

test("the route table answers every name with a route, an unknown, or a coded refusal", () => {
  const arb = fc.record({
    // A deployment is one per name and cluster, as the labels make it.
    deployments: fc.uniqueArray(deployment, { maxLength: 5, selector: (d) => `${d.deployment}/${d.cluster}` }),
    lanes: fc.array(lane, { maxLength: 3 }),
    readAt: fc.option(fc.integer({ min: 0, max: 2e12 }), { nil: undefined }),
    unreachable: fc.array(fc.constantFrom("n1", "n2"), { maxLength: 2 }),
    restarting: fc.array(restarting, { maxLength: 2 }),
    model: fc.option(fc.oneof(fc.constantFrom(...NAMES), fc.string({ maxLength: 8 })), { nil: undefined }),
  });
  holds("routes: route table resolve", arb, (a) => {
    const table = routeTable(a.deployments, a.lanes, a.readAt, a.unreachable, a.restarting);
    const r = table.resolve(a.model);
    if (r.kind === "route") {
      const d = a.deployments.find((x) => x.deployment === r.target.deployment && x.cluster === r.target.cluster);
      assert.ok(d !== undefined, "routed to a deployment no label shows");
      assert.ok(a.model === undefined || d.served_model === a.model || d.lane === a.model, `routed ${a.model} to ${d.deployment}, which neither serves nor holds it`);
    } else if (r.kind === "unknown") {
      assert.deepEqual(r.known, [...new Set(r.known)].sort());
    } else {
      assert.match(r.code, /^[a-z_]+$/);
      assert.ok(Number.isInteger(r.retryAfter) && r.retryAfter > 0);
      assert.notEqual(r.message.trim(), "");
    }
    const ids = table.models().map((m) => m.id);
    assert.deepEqual(ids, [...new Set(ids)].sort());
  });
});

// ---- SSE decoder (measure/bench/stream.ts, vLLM's StreamedResponseHandler framing) ----

const sseMessage = fc.oneof(
  fc.constantFrom('data: {"choices":[{"delta":{"content":"hi"}}]}', 'data: {"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":2}}', "data: [DONE]", ": comment", "event: x", "data:", "data: null", "data: 1", 'data: "s"', "data: []", 'data: {"choices":[null]}', 'data: {"choices":"x"}', 'data: {"usage":5}', 'data: {"choices":[{"delta":null}]}', "data: {"),
  fc.string({ maxLength: 40 }).map((s) => `data: ${s}`),
  fc.string({ unit: "binary", maxLength: 20 }),
);
const sseStream = fc.array(fc.tuple(sseMessage, fc.constantFrom("\n\n", "\r\n\r\n", "\n", "\n\n\n")), { maxLength: 12 }).map((ms) => ms.map(([m, end]) => `${m}${end}`).join(""));

test("SSE messages are the same however the stream is cut into chunks", () => {
  holds("sse: chunk borders", fc.tuple(sseStream, fc.array(fc.nat(), { maxLength: 8 })), ([text, cuts]) => {
    const whole = new SseMessages().add(text);
    const borders = [0, ...cuts.map((c) => c % (text.length + 1)).sort((x, y) => x - y), text.length];
    const reader = new SseMessages();
    const chunked = borders.slice(1).flatMap((end, i) => reader.add(text.slice(borders[i], end)));
    assert.deepEqual(chunked, whole);
    for (const m of whole) assert.ok(m.startsWith("data:"));
  });
});

test("a stream of any messages times out as an outcome, never an exception", () => {
  holds("sse: chat stream clock", fc.tuple(sseStream, fc.integer({ min: 0, max: 100 })), ([text, plannedInput]) => {
    const clock = new ChatStreamClock(0);
    new SseMessages().add(text).forEach((m, i) => clock.message(m, i + 1));
    const o = clock.outcome(0, plannedInput);
    if (o.ok) {
      assert.ok(o.ttft_s >= 0 && o.latency_s >= o.ttft_s && Number.isInteger(o.output_tokens) && o.output_tokens >= 0);
    } else assert.notEqual(o.error.trim(), "");
  }, 2);
});

test("a stream message that is JSON but not an object fails the request, as vLLM's bench does", () => {
  for (const payload of ["null", "1", '"s"', "[]", "true"]) {
    const clock = new ChatStreamClock(0);
    clock.message('data: {"choices":[{"delta":{"content":"a"}}]}', 1);
    assert.equal(clock.message(`data: ${payload}`, 2), false);
    const o = clock.outcome(0, 5);
    assert.equal(o.ok, false, payload);
    assert.match(!o.ok ? o.error : "", /not a JSON object/);
  }
});

reportInputsTried();
