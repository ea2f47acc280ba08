import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Agent } from "undici";
import { presentedKey } from "./auth.js";
import type { GatewayMetrics } from "./metrics.js";
import { forward } from "./proxy.js";
import type { Resolution, RouteTable, Target } from "./routes.js";

export interface GatewayOptions {
  readonly routes: () => RouteTable;
  /** undefined: no keys configured (loopback only). */
  readonly checkKey?: (presented: string | undefined) => boolean;
  readonly metrics: GatewayMetrics;
  readonly health: () => Record<string, unknown>;
  /** An upstream did not answer: look at the cluster again now. */
  readonly upstreamFailed: () => void;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly maxBodyBytes: number;
}

export interface Gateway {
  readonly server: Server;
  inFlight(): number;
  close(): Promise<void>;
}

function sendError(res: ServerResponse, status: number, type: string, code: string, message: string, extra: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { message, type, code, param: null } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer | "too-large"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        resolve("too-large");
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

const HAS_BODY = new Set(["POST", "PUT", "PATCH"]);

/** The OpenAI-compatible gateway: routing by model, streaming passthrough, errors in OpenAI's shape. */
export function createGateway(options: GatewayOptions): Gateway {
  // pipelining 1: one request at a time per connection, kept alive (0 would close each one).
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 1024, pipelining: 1 });
  const { metrics } = options;
  let inFlight = 0;

  const unavailable = (res: ServerResponse, r: Extract<Resolution, { kind: "unavailable" }>, model: string): void => {
    metrics.errors.inc({ model: model || "(unknown)", lane: "", kind: "unavailable" });
    sendError(res, 503, "service_unavailable", r.code, r.message, { "retry-after": String(r.retryAfter) });
  };

  type Answered = { readonly status: number; readonly model: string; readonly lane: string };
  const none = (status: number, model = "(unknown)"): Answered => ({ status, model, lane: "" });

  async function proxy(req: IncomingMessage, res: ServerResponse, started: number): Promise<Answered> {
    let raw: Buffer | undefined;
    let parsed: Record<string, unknown> | undefined;
    if (HAS_BODY.has(req.method ?? "")) {
      const read = await readBody(req, options.maxBodyBytes);
      if (read === "too-large") {
        sendError(res, 413, "invalid_request_error", "request_too_large", `request body larger than ${options.maxBodyBytes} bytes`);
        return none(413);
      }
      raw = read;
      if (String(req.headers["content-type"] ?? "").includes("json") && raw.length > 0) {
        try {
          const value = JSON.parse(raw.toString("utf8")) as unknown;
          if (value !== null && typeof value === "object" && !Array.isArray(value)) parsed = value as Record<string, unknown>;
        } catch (e) {
          sendError(res, 400, "invalid_request_error", "invalid_json", `the request body is not valid JSON: ${(e as Error).message}`);
          return none(400);
        }
      }
    }
    const model = typeof parsed?.model === "string" ? parsed.model : undefined;
    const r = options.routes().resolve(model);
    if (r.kind === "unknown") {
      metrics.errors.inc({ model: "(unknown)", lane: "", kind: "unknown_model" });
      const known = r.known.length === 0 ? "none is running" : `known models: ${r.known.join(", ")}`;
      sendError(res, 404, "invalid_request_error", "model_not_found", model === undefined ? `say which model (the request has no "model"); ${known}` : `the model \`${model}\` does not exist; ${known}`);
      return none(404);
    }
    if (r.kind === "unavailable") {
      unavailable(res, r, model ?? "");
      return none(503, model);
    }
    const name = model ?? r.target.served_model;
    return { status: await proxyTo(req, res, r.target, name, raw, parsed, started), model: name, lane: r.target.lane ?? "" };
  }

  async function proxyTo(req: IncomingMessage, res: ServerResponse, target: Target, model: string, raw: Buffer | undefined, parsed: Record<string, unknown> | undefined, started: number): Promise<number> {
    // A lane alias means nothing to the engine: it is told its own served name.
    const body = parsed !== undefined && parsed.model !== undefined && parsed.model !== target.served_model ? Buffer.from(JSON.stringify({ ...parsed, model: target.served_model })) : raw;
    const labels = { model, lane: target.lane ?? "" };
    metrics.inFlight.inc(labels);
    try {
      const result = await forward(req, res, {
        dispatcher,
        endpoint: target.endpoint,
        body,
        headersTimeoutMs: options.headersTimeoutMs,
        bodyTimeoutMs: options.bodyTimeoutMs,
        now: Date.now,
      });
      if (result.outcome === "upstream_unreachable") {
        options.upstreamFailed();
        metrics.errors.inc({ ...labels, kind: "upstream" });
        sendError(res, 502, "upstream_error", "upstream_failed", `deployment ${target.deployment} (${target.endpoint}) did not answer: ${result.error ?? "?"}`);
        return 502;
      }
      if (result.outcome === "client_abort") metrics.errors.inc({ ...labels, kind: "client_abort" });
      if (result.outcome === "upstream_broke") {
        options.upstreamFailed();
        metrics.errors.inc({ ...labels, kind: "upstream" });
      }
      if (result.firstChunkAt !== undefined && result.streamedChunks > 0) metrics.ttft.observe(labels, (result.firstChunkAt - started) / 1000);
      const tokens = result.completionTokens ?? result.streamedChunks;
      if (tokens > 0) metrics.tokens.inc(labels, tokens);
      if (result.outcome === "done" && result.endedAt !== undefined && result.firstChunkAt !== undefined) {
        // Streamed: the rate after the first token; whole answers: over the whole request.
        const from = result.completionTokens === undefined ? result.firstChunkAt : started;
        const perToken = result.completionTokens === undefined ? tokens - 1 : tokens;
        const secs = (result.endedAt - from) / 1000;
        if (perToken > 0 && secs > 0) metrics.tokensPerSecond.observe(labels, perToken / secs);
      }
      return result.status;
    } finally {
      metrics.inFlight.dec(labels);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/health") {
      sendJson(res, { status: "ok", in_flight: inFlight, ...options.health() });
      return;
    }
    if (options.checkKey !== undefined && !options.checkKey(presentedKey(req.headers.authorization, req.headers["x-api-key"]))) {
      metrics.errors.inc({ model: "", lane: "", kind: "auth" });
      sendError(res, 401, "invalid_request_error", "invalid_api_key", "missing or wrong API key: send Authorization: Bearer KEY", { "www-authenticate": "Bearer" });
      return;
    }
    if (req.method === "GET" && path === "/metrics") {
      const text = await metrics.text();
      res.writeHead(200, { "content-type": metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (req.method === "GET" && (path === "/v1/models" || path.startsWith("/v1/models/"))) {
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
      if (entry === undefined) sendError(res, 404, "invalid_request_error", "model_not_found", `the model \`${id}\` does not exist; known models: ${entries.map((e) => e.id).join(", ") || "none"}`);
      else sendJson(res, entry);
      return;
    }
    if (!path.startsWith("/v1/")) {
      sendError(res, 404, "invalid_request_error", "not_found", `no route for ${req.method ?? "?"} ${path}: the API is under /v1/`);
      return;
    }
    inFlight++;
    try {
      const { status, model, lane } = await proxy(req, res, started);
      metrics.requests.inc({ model, lane, code: String(status) });
    } finally {
      inFlight--;
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (res.headersSent) res.destroy();
      else sendError(res, 500, "internal_error", "gateway_bug", `launcher serve failed on this request: ${(e as Error).message}`);
    });
  });
  // Long generations: the server itself never times a request out.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 30_000;
  return {
    server,
    inFlight: () => inFlight,
    close: async () => {
      await dispatcher.close();
    },
  };
}
