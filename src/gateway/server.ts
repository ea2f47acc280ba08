import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { Agent } from "undici";
import { presentedKey } from "./auth.js";
import { CONTROL_PREFIX } from "../contract/control-api.js";
import { BodyTooLargeError, capped, isFormBody, MAX_MODEL_NAME_BYTES, readRequestBody, rewriteModel, type ModelField } from "./body.js";
import { BODY_BUDGET_BYTES, ByteBudget, readBudgeted } from "./budget.js";
import { GATEWAY_METHODS, methodMatcher, routeParams, type MethodTable } from "./methods.js";
import { canonicalPath } from "./paths.js";
import type { GatewayMetrics } from "./metrics.js";
import { ANSWERS_BUDGET_BYTES, forward, type ForwardResult, type UpstreamBody } from "./proxy.js";
import { activityRecord, generatedBy, progressOf, type RequestTrail } from "./activity.js";
import { capturedBody, captureWindow } from "./capture.js";
import type { ActivityRecord } from "../contract/read-api.js";
import type { Resolution, RouteTable, Target } from "./routes.js";

/** How stale the gateway's view of the clusters is, when some cluster has not been heard from in time. */
export interface Staleness {
  /** Since the oldest of the clusters' last polls arrived (or discovery started). */
  readonly ageSeconds: number;
  readonly clusters: readonly string[];
}

export interface GatewayOptions {
  readonly routes: () => RouteTable;
  /** undefined: no keys configured (loopback only). */
  readonly checkKey?: (presented: string | undefined) => boolean;
  readonly metrics: GatewayMetrics;
  /** The daemon's detail for /health (nodes, deployments): shown only to a client with a key. */
  readonly health: () => Record<string, unknown>;
  /** undefined while the view of the clusters is fresh. */
  readonly staleness: () => Staleness | undefined;
  /** The key a deployment's engine demands, sent upstream with each request; undefined: none. */
  readonly engineKey: (target: Target) => string | undefined;
  /** The engine's /v1 routes the gateway forwards, and their methods (from its adapter): nothing else is. */
  readonly apiMethods: MethodTable;
  /** Engine routes under /v1 never forwarded, with why (from its adapter): said in their 404. */
  readonly apiRefused?: Readonly<Record<string, string>>;
  /**
   * Present when the gateway has API keys: a deployment whose engine demands no key of its own is
   * not routed (its engine would answer anyone on the network who bypasses the gateway), and its 503
   * says what to add to the recipe, in its adapter's words (`how`).
   */
  readonly requireEngineKey?: { readonly how: (engine: string | undefined) => string };
  /** An upstream did not answer: look at the cluster again now. */
  readonly upstreamFailed: () => void;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** The largest body one request may send. */
  readonly maxBodyBytes: number;
  /** What all buffered request bodies together may hold (default BODY_BUDGET_BYTES). */
  readonly bodyBudgetBytes?: number;
  /** The longest a client may take to send a whole request, headers and body. */
  readonly requestTimeoutMs: number;
  /** The longest a client may take to send a request's headers (default CLIENT_HEADERS_TIMEOUT_MS). */
  readonly clientHeadersTimeoutMs?: number;
  /**
   * Hears each request under /v1 that reached the proxy (past the key check) once it is answered:
   * the activity log (./activity-log.ts). Called on the request path: it must only append.
   */
  readonly activity?: (record: ActivityRecord) => void;
  /**
   * Hears each deployment's evidence of generation: a 200 event stream's first chunk and then one
   * chunk every PROGRESS_EVERY_MS (src/contract/generation.ts) while it streams, and each answer
   * that completed a real generation (./activity.ts generatedBy): the daemon's generation watch,
   * which stamps it on its own clock. Called on the request path: it must only note it.
   */
  readonly generated?: (cluster: string, deployment: string) => void;
  /**
   * With `activity`: keep at most this many bytes of each request's and answer's body in its
   * record, keys removed (./capture.ts). Absent or 0: bodies are not captured.
   */
  readonly captureBodies?: number;
  /** The daemon's API under CONTROL_PREFIX (its reads and its control routes), which checks its own keys; absent: off. */
  readonly control?: (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>;
  /** The daemon's page (src/daemon/web-page.ts), asked before any key: true when it answered. */
  readonly page?: (req: IncomingMessage, res: ServerResponse, path: string) => boolean;
}

export interface Gateway {
  readonly server: Server;
  inFlight(): number;
  close(): Promise<void>;
}

/** The code of the error each answer carried, for its activity record: set where the error is sent, read when the request ends. */
const answeredCodes = new WeakMap<ServerResponse, string>();

function sendError(res: ServerResponse, status: number, type: string, code: string, message: string, extra: Record<string, string> = {}): void {
  answeredCodes.set(res, code);
  const body = JSON.stringify({ error: { message, type, code, param: null } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** The longest a client may take to send a request's headers (408 after). */
export const CLIENT_HEADERS_TIMEOUT_MS = 60_000;

/**
 * How often Node looks for requests past their time. It checks headersTimeout and requestTimeout
 * only then (nodejs/node lib/_http_server.js: setupConnectionsTracking runs checkConnections every
 * connectionsCheckingInterval, 30 s by default, and that calls ConnectionsList.expired), so a
 * timeout of T cuts a client between T and T + this. Node's default interval (30 s) would let a
 * client stated to have 60 s hold its socket, and the body bytes it sent, for up to 90 s.
 */
export const TIMEOUT_CHECK_MS = 1_000;

/** Node's server timeouts for clients: each bound is its timeout plus at most TIMEOUT_CHECK_MS (less for short test timeouts). */
export function clientTimeouts(requestTimeoutMs: number, headersTimeoutMs: number): { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval: number; keepAliveTimeout: number } {
  // Node refuses a headersTimeout above requestTimeout (ERR_OUT_OF_RANGE).
  const headersTimeout = Math.min(headersTimeoutMs, requestTimeoutMs);
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout,
    connectionsCheckingInterval: Math.max(10, Math.min(TIMEOUT_CHECK_MS, Math.floor(headersTimeout / 4))),
    keepAliveTimeout: 30_000,
  };
}

/** How long a client that broke the HTTP rules has to take its answer before its socket is cut anyway. */
export const CLIENT_ERROR_LINGER_MS = 5_000;

/**
 * What a client that broke the HTTP rules is told, in OpenAI's shape, before its socket closes.
 * Closed, not just ended: the server's sockets allow half-open connections, so a client that keeps
 * its half open would keep its request, and the body bytes reserved for it, forever.
 */
function clientError(e: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const [status, code, message] =
    e.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "request_timeout", "the request (headers and body) was not received in time"]
      : e.code === "HPE_HEADER_OVERFLOW"
        ? [431, "headers_too_large", "the request headers are too large"]
        : [400, "bad_request", "the request is not valid HTTP"];
  const body = JSON.stringify({ error: { message, type: "invalid_request_error", code, param: null } });
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, () => socket.destroy());
  // A client that reads nothing never lets the answer flush: it is cut all the same.
  setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
}

/** Where one request goes: the deployment, the path to ask it, the key its engine demands. */
interface Upstream {
  readonly target: Target;
  readonly path: string;
  readonly engineKey: string | undefined;
}

/** A request's body as it goes upstream, with its model field, and how to give back what holding it reserved. */
interface Incoming {
  readonly body: UpstreamBody;
  readonly json: boolean;
  readonly model?: ModelField;
  readonly release: () => void;
}

const declaredLength = (req: IncomingMessage): number | undefined => (req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]));

const MIB = 1024 * 1024;
const mib = (n: number): string => `${(n / MIB).toFixed(n % MIB === 0 ? 0 : 1)} MiB`;

/**
 * The 413 of a body too large for one request, or for the room left now. No room is answered at
 * once, never waited for: a waiting request would hold its socket and the bytes it has sent, while
 * room comes back only as other requests end (minutes, for a long generation), and the client
 * knows best whether to retry; Retry-After says when that is worth it.
 */
function tooLargeAnswer(read: { readonly kind: "too-large"; readonly limit: number } | { readonly kind: "no-room"; readonly size: number }, limit: number, budget: ByteBudget): [string, Record<string, string>] {
  if (read.kind === "too-large") return [`request body larger than ${read.limit} bytes (${mib(limit)}), the most one request may send`, {}];
  return [`request body of ${read.size} bytes does not fit now: the gateway holds at most ${mib(budget.total)} of request bodies at once, and requests in flight hold ${mib(budget.inUse)}; retry later, or send a smaller body`, { "retry-after": "1" }];
}

function noEngineKeyMessage(target: Target, model: string, addKeyHow: (engine: string | undefined) => string): string {
  const how = addKeyHow(target.engine);
  return `model ${model} (deployment ${target.deployment}) is not routed: its engine demands no API key, and this gateway has API keys, so the engine would answer anyone who reaches it directly; add ${how} in recipe ${target.recipe}, then launcher up again`;
}

/** The OpenAI-compatible gateway: routing by model, streaming passthrough, errors in OpenAI's shape. */
const withKey = (key: string | undefined): { engineKey?: string } => (key === undefined ? {} : { engineKey: key });

export function createGateway(options: GatewayOptions): Gateway {
  // pipelining 1: one request at a time per connection, kept alive (0 would close each one).
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 1024, pipelining: 1 });
  const { metrics } = options;
  const methodsOf = methodMatcher([GATEWAY_METHODS, options.apiMethods]);
  const refused = Object.entries(options.apiRefused ?? {});
  const refusalOf = (path: string): string | undefined => refused.find(([pattern]) => routeParams(pattern, path) !== undefined)?.[1];
  let inFlight = 0;
  const bodies = new ByteBudget(options.bodyBudgetBytes ?? BODY_BUDGET_BYTES);
  const answers = new ByteBudget(ANSWERS_BUDGET_BYTES);
  const capture = options.activity !== undefined && (options.captureBodies ?? 0) > 0 ? options.captureBodies : undefined;

  /** Appended to 404/503 answers while the gateway's view of the clusters is stale. */
  const staleNote = (): string => {
    const s = options.staleness();
    return s === undefined ? "" : ` (the gateway's view of the clusters is ${s.ageSeconds} s old: discovery of ${s.clusters.join(", ")} is not answering)`;
  };

  const unavailable = (res: ServerResponse, r: Extract<Resolution, { kind: "unavailable" }>, model: string): void => {
    metrics.errors.inc({ model: model || "(unknown)", lane: "", kind: "unavailable" });
    sendError(res, 503, "service_unavailable", r.code, `${r.message}${staleNote()}`, { "retry-after": String(r.retryAfter) });
  };

  type Answered = { readonly status: number; readonly model: string; readonly lane: string };
  const none = (status: number, model = "(unknown)"): Answered => ({ status, model, lane: "" });

  /** The request's body as the engine gets it, or the answer already given (413, 400, a client gone). */
  async function incoming(req: IncomingMessage, res: ServerResponse): Promise<Incoming | Answered> {
    // A body on a GET is not used: drained, so that the request is complete (and its
    // requestTimeout over) while a long answer streams.
    if (req.method !== "POST") {
      req.resume();
      return { body: { kind: "none" }, json: false, release: () => undefined };
    }
    if (isFormBody(req.headers["content-type"])) return formBody(req, res);
    const read = await readBudgeted(req, options.maxBodyBytes, bodies);
    if (read.kind === "gone") {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "client_abort" });
      return none(0);
    }
    if (read.kind === "too-large" || read.kind === "no-room") {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "too_large" });
      const [message, extra] = tooLargeAnswer(read, options.maxBodyBytes, bodies);
      sendError(res, 413, "invalid_request_error", "request_too_large", message, extra);
      return none(413);
    }
    const body = readRequestBody(read.bytes, req.headers["content-type"]);
    if (body.kind === "invalid") {
      read.release();
      sendError(res, 400, "invalid_request_error", body.code, body.message);
      return none(400);
    }
    return { body: { kind: "bytes", parts: [read.bytes] }, json: body.kind === "json", ...(body.kind === "json" && body.model !== undefined ? { model: body.model } : {}), release: read.release };
  }

  /**
   * A form names no model and is never rewritten: it streams to the engine, held nowhere, within
   * maxBodyBytes all the same: one declared past it is 413 unread, one that grows past it (chunked)
   * is cut there, its upstream request with it (proxyTo answers the 413).
   */
  function formBody(req: IncomingMessage, res: ServerResponse): Incoming | Answered {
    const length = declaredLength(req);
    if (length !== undefined && length > options.maxBodyBytes) {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "too_large" });
      req.resume();
      const [message] = tooLargeAnswer({ kind: "too-large", limit: options.maxBodyBytes }, options.maxBodyBytes, bodies);
      sendError(res, 413, "invalid_request_error", "request_too_large", message);
      return none(413);
    }
    return { body: { kind: "stream", from: capped(req, options.maxBodyBytes), length }, json: false, release: () => undefined };
  }

  /**
   * The 413 of a streamed body cut past maxBodyBytes; the connection closes with it, the rest of the
   * upload unread. An engine that answered before the body was whole had its answer cut: the
   * status it sent is the one counted.
   */
  function streamTooLarge(res: ServerResponse, labels: { model: string; lane: string }, sent: number): number {
    metrics.errors.inc({ ...labels, kind: "too_large" });
    if (res.headersSent) {
      res.destroy();
      return sent;
    }
    const [message] = tooLargeAnswer({ kind: "too-large", limit: options.maxBodyBytes }, options.maxBodyBytes, bodies);
    sendError(res, 413, "invalid_request_error", "request_too_large", message, { connection: "close" });
    return 413;
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, target: string, started: number, trail: RequestTrail): Promise<Answered> {
    const got = await incoming(req, res);
    if ("status" in got) return got;
    try {
      return await route(req, res, target, started, got, trail);
    } finally {
      got.release();
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse, target: string, started: number, got: Incoming, trail: RequestTrail): Promise<Answered> {
    // A form streams through unheld: only a body the gateway holds is captured (the client's, as
    // sent; held until the request ends anyway, so a reference, read when its record is made).
    if (capture !== undefined && got.body.kind === "bytes") trail.raw = { request: got.body.parts[0] as Buffer };
    const field = got.model;
    const model = field?.name;
    if (field?.tooLong === true) {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "unknown_model" });
      sendError(res, 404, "invalid_request_error", "model_not_found", `the request's model is ${field.end - field.start - 2} bytes long, longer than any model name (at most ${MAX_MODEL_NAME_BYTES}); known models: ${options.routes().models().map((m) => m.id).join(", ") || "none"}`);
      return none(404);
    }
    const r = options.routes().resolve(model);
    if (r.kind === "unknown") {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "unknown_model" });
      const known = r.known.length === 0 ? "none is running" : `known models: ${r.known.join(", ")}`;
      sendError(res, 404, "invalid_request_error", "model_not_found", `${model === undefined ? `say which model (the request has no "model"); ${known}` : `the model \`${model}\` does not exist; ${known}`}${staleNote()}`);
      return none(404);
    }
    if (r.kind === "unavailable") {
      unavailable(res, r, model ?? "");
      return none(503, model);
    }
    const name = model ?? r.target.served_model;
    trail.deployment = r.target.deployment;
    trail.cluster = r.target.cluster;
    const engineKey = options.engineKey(r.target);
    if (engineKey === undefined && options.requireEngineKey !== undefined) {
      metrics.errors.inc({ model: name, lane: r.target.lane ?? "", kind: "unavailable" });
      sendError(res, 503, "service_unavailable", "engine_key_missing", noEngineKeyMessage(r.target, name, options.requireEngineKey.how));
      return none(503, name);
    }
    // A lane alias means nothing to the engine: it is told its own served name, in place.
    const body = field !== undefined && field.name !== r.target.served_model && got.body.kind === "bytes" ? { kind: "bytes" as const, parts: rewriteModel(got.body.parts[0] as Buffer, field, r.target.served_model) } : got.body;
    return { status: await proxyTo(req, res, { target: r.target, path: target, engineKey }, name, body, got.json, started, trail), model: name, lane: r.target.lane ?? "" };
  }

  async function proxyTo(req: IncomingMessage, res: ServerResponse, to: Upstream, model: string, body: UpstreamBody, json: boolean, started: number, trail: RequestTrail): Promise<number> {
    const { target } = to;
    const labels = { model, lane: target.lane ?? "" };
    metrics.inFlight.inc(labels);
    try {
      const result = await forward(req, res, {
        dispatcher,
        endpoint: target.endpoint,
        path: to.path,
        body,
        answers,
        ...withKey(to.engineKey),
        // The engine takes JSON only when it is labelled so; the gateway read it as JSON anyway.
        ...(json ? { contentType: "application/json" } : {}),
        headersTimeoutMs: options.headersTimeoutMs,
        bodyTimeoutMs: options.bodyTimeoutMs,
        now: Date.now,
        ...(options.activity === undefined ? {} : { readStreamUsage: true }),
        ...(capture === undefined ? {} : { captureBytes: captureWindow(capture, to.engineKey) }),
        ...(options.generated === undefined ? {} : { onStreamData: progressOf(target, options.generated) }),
      });
      if (result.captured !== undefined) trail.raw = { ...trail.raw, response: result.captured, ...withKey(to.engineKey) };
      if (body.kind === "stream" && body.from.errored instanceof BodyTooLargeError) {
        trail.error = "request_too_large";
        return streamTooLarge(res, labels, result.status);
      }
      if (result.outcome === "upstream_unreachable") {
        options.upstreamFailed();
        metrics.errors.inc({ ...labels, kind: "upstream" });
        sendError(res, 502, "upstream_error", "upstream_failed", `deployment ${target.deployment} (${target.endpoint}) did not answer: ${result.error ?? "?"}`);
        return 502;
      }
      if (result.outcome === "client_abort" || result.outcome === "upstream_broke") trail.error = result.outcome;
      if (result.outcome === "client_abort") metrics.errors.inc({ ...labels, kind: "client_abort" });
      if (result.outcome === "upstream_broke") {
        options.upstreamFailed();
        metrics.errors.inc({ ...labels, kind: "upstream" });
      }
      observe(result, labels, started, trail);
      return result.status;
    } finally {
      metrics.inFlight.dec(labels);
    }
  }

  /** The request's record to the activity log, its bodies captured (keys removed) when asked. */
  function recordActivity(activity: (r: ActivityRecord) => void, req: IncomingMessage, res: ServerResponse, a: { t: number; model: string; lane: string; status: number; trail: RequestTrail }): void {
    const { trail } = a;
    const error = trail.error ?? answeredCodes.get(res) ?? (a.status === 0 ? "client_abort" : undefined);
    if (error !== undefined) trail.error = error;
    const key = presentedKey(req.headers.authorization, req.headers["x-api-key"]);
    if (capture !== undefined && trail.raw !== undefined) {
      const secrets = [key, trail.raw.engineKey].filter((s): s is string => s !== undefined);
      if (trail.raw.request !== undefined) trail.requestBody = capturedBody(trail.raw.request, capture, secrets);
      if (trail.raw.response !== undefined) trail.responseBody = capturedBody(trail.raw.response, capture, secrets);
    }
    activity(activityRecord({ ...a, key }));
  }

  /** The answer's time to first token, tokens and rate: into the metrics, and the request's trail. */
  function observe(result: ForwardResult, labels: { model: string; lane: string }, started: number, trail: RequestTrail): void {
    if (result.firstChunkAt !== undefined && result.streamedChunks > 0) {
      metrics.ttft.observe(labels, (result.firstChunkAt - started) / 1000);
      trail.ttftMs = result.firstChunkAt - started;
    }
    // A stream's usage chunk (stream_options.include_usage) counts its tokens; its chunks do not
    // (one may carry several tokens, and the usage chunk itself is one).
    const tokens = result.completionTokens ?? result.usage?.completion ?? result.streamedChunks;
    if (tokens > 0) metrics.tokens.inc(labels, tokens);
    // The activity log takes the engine's own count when it sent one (a stream's usage chunk too).
    const reported = result.usage?.completion ?? (tokens > 0 ? tokens : undefined);
    if (reported !== undefined) trail.tokensOut = reported;
    if (result.usage?.prompt !== undefined) trail.tokensIn = result.usage.prompt;
    if (result.outcome === "done" && result.endedAt !== undefined && result.firstChunkAt !== undefined) {
      // Streamed: the rate after the first token; whole answers: over the whole request.
      const from = result.completionTokens === undefined ? result.firstChunkAt : started;
      const perToken = result.completionTokens === undefined ? tokens - 1 : tokens;
      const secs = (result.endedAt - from) / 1000;
      if (perToken > 0 && secs > 0) {
        metrics.tokensPerSecond.observe(labels, perToken / secs);
        trail.tokensPerSecond = perToken / secs;
      }
    }
  }

  /**
   * The routes' methods: the gateway's own and the engine's allow-list; any other /v1 path never
   * reaches an engine. Checked before the key: which routes there are is no secret. False once
   * the 404 or 405 is sent.
   */
  function methodAllowed(req: IncomingMessage, res: ServerResponse, path: string, method: string): boolean {
    const allowed = methodsOf(path);
    if (allowed === undefined && path.startsWith("/v1/")) {
      req.resume();
      const why = refusalOf(path);
      sendError(res, 404, "invalid_request_error", "not_found", `no route for ${method} ${path}${why === undefined ? ": the gateway forwards only the engines' inference routes" : ` through the gateway: ${why}`}`);
      return false;
    }
    if (allowed !== undefined && !allowed.includes(method)) {
      req.resume();
      sendError(res, 405, "invalid_request_error", "method_not_allowed", `${path} takes ${allowed.join(" or ")}, not ${method}`, { allow: allowed.join(", ") });
      return false;
    }
    return true;
  }

  /**
   * /health. Without a key (when keys are configured): whether the daemon is fine, and nothing
   * about the clusters. Stale discovery is 503: a monitor that reads only the code sees it.
   */
  function answerHealth(res: ServerResponse, keyed: boolean): void {
    const stale = options.staleness();
    const status = stale === undefined ? { status: "ok" } : { status: "stale", discovery_age_seconds: stale.ageSeconds };
    sendJson(res, { ...status, ...(keyed ? { ...(stale === undefined ? {} : { stale_clusters: stale.clusters }), in_flight: inFlight, ...options.health() } : {}) }, stale === undefined ? 200 : 503);
  }

  /** /v1/models, and /v1/models/ID: the models the routes know now. */
  function answerModels(res: ServerResponse, path: string, started: number): void {
    const entries = options.routes().models().map((m) => ({ object: "model", created: Math.floor(started / 1000), owned_by: "launcher", ...m }));
    if (path === "/v1/models") {
      sendJson(res, { object: "list", data: entries });
      return;
    }
    let id: string;
    try {
      id = decodeURIComponent(path.slice("/v1/models/".length));
    } catch {
      sendError(res, 400, "invalid_request_error", "invalid_model_id", `the model id in ${path} is not valid percent-encoding`);
      return;
    }
    const entry = entries.find((e) => e.id === id);
    if (entry === undefined) sendError(res, 404, "invalid_request_error", "model_not_found", `the model \`${id}\` does not exist; known models: ${entries.map((e) => e.id).join(", ") || "none"}${staleNote()}`);
    else sendJson(res, entry);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    const url = req.url ?? "/";
    // Routed and forwarded as received, so it must be the form the engine reads alike (./paths.ts).
    const canonical = canonicalPath(url, url.startsWith("/v1/models/"));
    if (!canonical.ok) {
      req.resume();
      sendError(res, 400, "invalid_request_error", canonical.code, canonical.message);
      return;
    }
    const { path } = canonical;
    const method = req.method ?? "GET";
    // The daemon's own API (src/daemon/read-api.ts launcherApi) checks its keys itself: reads take an
    // admin or an inference key, actions the admin key alone. Routed before the inference routes.
    if (options.control !== undefined && path.startsWith(CONTROL_PREFIX)) {
      await options.control(req, res, path);
      return;
    }
    if (options.page?.(req, res, path) === true) return;
    if (!methodAllowed(req, res, path, method)) return;
    const keyed = options.checkKey === undefined || options.checkKey(presentedKey(req.headers.authorization, req.headers["x-api-key"]));
    if (path === "/health") {
      answerHealth(res, keyed);
      return;
    }
    if (!keyed) {
      metrics.errors.inc({ model: "", lane: "", kind: "auth" });
      sendError(res, 401, "invalid_request_error", "invalid_api_key", "missing or wrong API key: send Authorization: Bearer KEY", { "www-authenticate": "Bearer" });
      return;
    }
    if (path === "/metrics") {
      const text = await metrics.text();
      res.writeHead(200, { "content-type": metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (path === "/v1/models" || path.startsWith("/v1/models/")) {
      answerModels(res, path, started);
      return;
    }
    if (!path.startsWith("/v1/")) {
      sendError(res, 404, "invalid_request_error", "not_found", `no route for ${req.method ?? "?"} ${path}: the API is under /v1/`);
      return;
    }
    inFlight++;
    const trail: RequestTrail = {};
    try {
      const { status, model, lane } = await proxy(req, res, `${path}${canonical.query}`, started, trail);
      // 0: the client went away before its request was whole; nothing was answered.
      if (status !== 0) metrics.requests.inc({ model, lane, code: String(status) });
      if (options.activity !== undefined) recordActivity(options.activity, req, res, { t: started, model, lane, status, trail });
      const by = options.generated === undefined ? undefined : generatedBy(status, trail);
      if (by !== undefined) options.generated?.(by.cluster, by.deployment);
    } finally {
      inFlight--;
    }
  }

  // requestTimeout bounds the time to RECEIVE a request, headers and body, not to answer it:
  // Node drops a request from the checked list once its message is complete (nodejs/node
  // src/node_http_parser.cc: on_message_complete pops the parser from the active connections that
  // ConnectionsList::Expired looks at; doc/api/http.md: "the timeout value in milliseconds for
  // receiving the entire request from the client"). A long streamed answer is never cut by it.
  const server = createServer(clientTimeouts(options.requestTimeoutMs, options.clientHeadersTimeoutMs ?? CLIENT_HEADERS_TIMEOUT_MS), (req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (res.headersSent) res.destroy();
      else sendError(res, 500, "internal_error", "gateway_bug", `launcher serve failed on this request: ${(e as Error).message}`);
    });
  });
  server.on("clientError", clientError);
  return {
    server,
    inFlight: () => inFlight,
    close: async () => {
      await dispatcher.close();
    },
  };
}
