import type { IncomingMessage, ServerResponse } from "node:http";
import type { BootEntry, BootRegistry } from "../supervise/boots.js";
import { encodeEvent, type UpEvent } from "../boot/up-events.js";
import { CONTROL_ROUTES, NDJSON, summarizeBoot } from "./protocol.js";
import { UpSubmissionSchema, type UpSubmission } from "../app/up-submission.js";
import { submissionPathProblem, type Caller } from "../app/admit.js";
import { presentedKey } from "../gateway/auth.js";
import { allowedMethods, routeParams, type MethodTable } from "../gateway/methods.js";
import { encodeStop, StopRequestSchema, type StopRequest } from "../contract/control-api.js";
import type { Stopper } from "./stop.js";

/**
 * The daemon's control API: submit a boot and stream its events, follow one from its start,
 * cancel one, stop a deployment (`launcher down`, ./stop.ts). It launches containers as the
 * daemon's user, so it answers two kinds of caller only: one showing its own key over TCP (an inference key is never one: serve refuses the same key for
 * both), and the daemon's own user through its Unix socket (src/daemon/control-socket.ts: a 0600
 * socket in a 0700 folder, which no other uid may connect to, as Docker's and Podman's are). A TCP
 * peer is never taken for the daemon's user by its address: any local uid can connect to loopback.
 */
export interface ControlOptions {
  /** The admin keys' check for a TCP listener; undefined: no admin key, and a TCP peer is always refused. */
  readonly checkAdmin?: (presented: string | undefined) => boolean;
  /** This handler serves the owner-only Unix socket: every peer is the daemon's own user, no key asked. */
  readonly ownerSocket?: boolean;
  /** A request's page session (./web-session-api.ts): true may act, a string is why not, undefined shows none (its key is asked). */
  readonly admitSession?: (req: IncomingMessage) => true | string | undefined;
  readonly registry: BootRegistry;
  /**
   * Starts a boot, or gives the events of its refusal (a recipe error: its last event is the error).
   * `caller`: "owner" through the owner socket, else "client" (src/app/admit.ts says what each may name).
   */
  readonly submit: (submission: UpSubmission, caller: Caller) => BootEntry | readonly UpEvent[];
  /** Stops a deployment the daemon sees (./stop.ts); absent: the stop route answers 404. */
  readonly stop?: Stopper;
  readonly maxBodyBytes: number;
  /** How often an idle boot's stream sends an empty line (default HEARTBEAT_MS). */
  readonly heartbeatMs?: number;
}

/** How often a boot's stream says it is still there while the boot says nothing. */
export const HEARTBEAT_MS = 15_000;

export const CONTROL_METHODS: MethodTable = {
  [CONTROL_ROUTES.boots]: ["GET", "POST"],
  [CONTROL_ROUTES.events]: ["GET"],
  [CONTROL_ROUTES.boot]: ["DELETE"],
  [CONTROL_ROUTES.stop]: ["POST"],
};

/** A refusal (src/contract/control-api.ts ControlErrorSchema): `hint` says what to do, when there is something. */
function sendError(res: ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}, hint?: string): void {
  const body = JSON.stringify({ error: { message, type: "control_error", code, ...(hint === undefined ? {} : { hint }) } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

function sendJson(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** A submission's JSON, or why there is none: each failure kind its own status. */
type JsonRead = { readonly kind: "json"; readonly value: unknown } | { readonly kind: "too-large" } | { readonly kind: "invalid"; readonly why: string } | { readonly kind: "gone" };

/**
 * Reads at most `limit` bytes of JSON: a larger body is refused when its Content-Length says so, or
 * as soon as it passes the limit. An empty body is `empty` when given, else invalid.
 */
async function readJson(req: IncomingMessage, limit: number, empty?: unknown): Promise<JsonRead> {
  if (Number(req.headers["content-length"] ?? 0) > limit) {
    req.resume();
    return { kind: "too-large" };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > limit) {
        req.resume();
        return { kind: "too-large" };
      }
      chunks.push(c);
    }
  } catch {
    return { kind: "gone" };
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (empty !== undefined && text.trim() === "") return { kind: "json", value: empty };
  try {
    return { kind: "json", value: JSON.parse(text) as unknown };
  } catch (e) {
    return { kind: "invalid", why: (e as Error).message };
  }
}

/**
 * The most a boot's stream may have written and its client not yet read. A client that reads
 * nothing (stopped, or on a slow link behind many events) is cut there, and its buffer goes: the
 * boot goes on, and attach replays it from its start.
 */
export const MAX_FOLLOW_BACKLOG_BYTES = 1024 * 1024;

/**
 * Streams `entry`'s events from its start to its end. The client going away only stops the
 * stream: the boot goes on (a closed laptop lid is no reason to roll back an hour's work).
 */
function stream(res: ServerResponse, entry: BootEntry, prefix: readonly UpEvent[] = [], heartbeatMs = HEARTBEAT_MS): void {
  res.writeHead(200, { "content-type": NDJSON, "cache-control": "no-store" });
  for (const e of prefix) res.write(encodeEvent(e));
  // A model can load for many minutes without a phase change: an empty line now and then keeps
  // the client's body timeout (undici's fetch: 300 s between body data by default, undici
  // docs/docs/api/Client.md bodyTimeout) and any proxy from dropping it.
  const write = (text: string): void => {
    if (res.destroyed) return;
    if (res.writableLength > MAX_FOLLOW_BACKLOG_BYTES) res.destroy();
    else res.write(text);
  };
  const heartbeat = setInterval(() => write("\n"), heartbeatMs);
  heartbeat.unref();
  let unfollow = (): void => undefined;
  const end = (): void => {
    clearInterval(heartbeat);
    unfollow();
    res.end();
  };
  res.on("close", () => {
    clearInterval(heartbeat);
    unfollow();
  });
  unfollow = entry.follow((e) => {
    write(encodeEvent(e));
    if (!entry.running) setImmediate(end);
  });
  if (!entry.running) end();
}

/** A path segment %-decoded, or undefined when it is not valid percent-encoded UTF-8 (decodeURIComponent's URIError). */
function decodedName(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** The boot a route's `name` names, or undefined once the answer (400 or 404) is sent. */
function bootNamed(registry: BootRegistry, res: ServerResponse, raw: string | undefined): BootEntry | undefined {
  const name = decodedName(raw ?? "");
  if (name === undefined) {
    sendError(res, 400, "invalid_path", `the boot's name in the path is not valid percent-encoded UTF-8: ${JSON.stringify((raw ?? "").slice(0, 200))}`);
    return undefined;
  }
  const entry = registry.find(name);
  if (entry === undefined) sendError(res, 404, "no_boot", `this daemon has no boot of ${name}`);
  return entry;
}

/** The submission a POST carries, or undefined once its refusal (413, 400) is sent. */
async function readSubmission(req: IncomingMessage, res: ServerResponse, options: ControlOptions, caller: Caller): Promise<UpSubmission | undefined> {
  const body = await readJson(req, options.maxBodyBytes);
  if (body.kind === "gone") return undefined;
  if (body.kind === "too-large") {
    sendError(res, 413, "request_too_large", `the submission is larger than ${options.maxBodyBytes} bytes, the most this daemon reads`);
    return undefined;
  }
  if (body.kind === "invalid") {
    sendError(res, 400, "bad_request", `the body is not a JSON submission of a boot: ${body.why}`);
    return undefined;
  }
  const parsed = UpSubmissionSchema.safeParse(body.value);
  if (!parsed.success) {
    sendError(res, 400, "bad_request", `the submission is not valid: ${parsed.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ")}`);
    return undefined;
  }
  // Refused before anything is read: the answer quotes the reference, never a file.
  const pathProblem = submissionPathProblem(parsed.data, caller);
  if (pathProblem !== undefined) {
    sendError(res, 400, "path_refused", pathProblem);
    return undefined;
  }
  return parsed.data;
}

/** A stop's request (an empty body is `{}`), or undefined once its refusal (413, 400) is sent. */
async function readStopRequest(req: IncomingMessage, res: ServerResponse, limit: number): Promise<StopRequest | undefined> {
  const body = await readJson(req, limit, {});
  if (body.kind === "gone") return undefined;
  if (body.kind === "too-large") return (sendError(res, 413, "request_too_large", `the request is larger than ${limit} bytes, the most this daemon reads`), undefined);
  const parsed = body.kind === "json" ? StopRequestSchema.safeParse(body.value) : undefined;
  if (parsed?.success !== true) {
    const why = body.kind === "invalid" ? body.why : (parsed?.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ") ?? "");
    sendError(res, 400, "bad_request", `the body is not a stop's request (empty, or {"grace_seconds", "cluster", "bare"}): ${why}`);
    return undefined;
  }
  return parsed.data;
}

/** `launcher down` of the deployment the path names: its answer, or the stopper's refusal. */
async function stopRoute(req: IncomingMessage, res: ServerResponse, raw: string | undefined, options: ControlOptions): Promise<void> {
  const request = await readStopRequest(req, res, options.maxBodyBytes);
  if (request === undefined) return;
  const name = decodedName(raw ?? "");
  if (name === undefined) return sendError(res, 400, "invalid_path", `the deployment's name in the path is not valid percent-encoded UTF-8: ${JSON.stringify((raw ?? "").slice(0, 200))}`);
  if (options.stop === undefined) return sendError(res, 404, "no_deployment", "this daemon stops no deployment");
  const outcome = await options.stop(name, request);
  if (outcome.kind === "refused") return sendError(res, outcome.status, outcome.code, outcome.message, {}, outcome.hint);
  const body = encodeStop(outcome.answer);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store" });
  res.end(body);
}

type Handler = (req: IncomingMessage, res: ServerResponse, params: Record<string, string>) => Promise<void>;

/** Method and route -> handler: the one table of what the control API does. */
function controlHandlers(options: ControlOptions): Readonly<Record<string, Handler>> {
  const { registry } = options;
  // Whoever reached this handler: the daemon's own user through its socket, else an admin key's holder.
  const caller: Caller = options.ownerSocket === true ? "owner" : "client";
  return {
    [`GET ${CONTROL_ROUTES.boots}`]: async (req, res) => {
      req.resume();
      sendJson(res, { boots: registry.list().map((b) => summarizeBoot(b.identity, b.events)) });
    },
    [`POST ${CONTROL_ROUTES.boots}`]: async (req, res) => {
      const submission = await readSubmission(req, res, options, caller);
      if (submission === undefined) return;
      const started = options.submit(submission, caller);
      if (Array.isArray(started)) {
        // Refused before it started (a recipe error, busy): its events, the error last.
        res.writeHead(200, { "content-type": NDJSON });
        res.end((started as readonly UpEvent[]).map(encodeEvent).join(""));
        return;
      }
      stream(res, started as BootEntry, [], options.heartbeatMs);
    },
    [`GET ${CONTROL_ROUTES.events}`]: async (req, res, params) => {
      req.resume();
      const entry = bootNamed(registry, res, params.name);
      if (entry !== undefined) stream(res, entry, [], options.heartbeatMs);
    },
    [`DELETE ${CONTROL_ROUTES.boot}`]: async (req, res, params) => {
      req.resume();
      const entry = bootNamed(registry, res, params.name);
      if (entry === undefined) return;
      if (!entry.running) {
        sendError(res, 404, "no_boot", `the boot of ${entry.identity.deployment} is over`);
        return;
      }
      const final = await entry.cancel("launcher down");
      res.writeHead(200, { "content-type": NDJSON });
      res.end(encodeEvent(final));
    },
    [`POST ${CONTROL_ROUTES.stop}`]: (req, res, params) => stopRoute(req, res, params.name, options),
  };
}

/** Whether the route and method exist for `path`; false once the 404 or 405 is sent. */
function routeExists(req: IncomingMessage, res: ServerResponse, path: string, method: string): boolean {
  const allowed = allowedMethods([CONTROL_METHODS], path);
  if (allowed === undefined) {
    req.resume();
    sendError(res, 404, "not_found", `no control route ${path}`);
    return false;
  }
  if (!allowed.includes(method)) {
    req.resume();
    sendError(res, 405, "method_not_allowed", `${path} takes ${allowed.join(" or ")}, not ${method}`, { allow: allowed.join(", ") });
    return false;
  }
  return true;
}

/** Whether the caller may use the control API; false once the 401 is sent. */
function admitted(req: IncomingMessage, res: ServerResponse, options: ControlOptions): boolean {
  if (options.ownerSocket === true || (options.checkAdmin?.(presentedKey(req.headers.authorization, req.headers["x-api-key"])) ?? false)) return true;
  const bySession = options.admitSession?.(req);
  if (bySession === true) return true;
  req.resume();
  if (bySession !== undefined) return (sendError(res, 403, "session_cannot_act", bySession), false);
  const why =
    options.checkAdmin === undefined
      ? "the control API over TCP needs an admin key, and serve has none: the daemon's own user on its machine reaches it through its socket (launcher finds it by itself)"
      : "missing or wrong admin key (an inference key is not one)";
  sendError(res, 401, "invalid_admin_key", why, { "www-authenticate": "Bearer" });
  return false;
}

export function controlApi(options: ControlOptions): (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void> {
  const handlers = controlHandlers(options);
  return async (req, res, path) => {
    const method = req.method ?? "GET";
    if (!routeExists(req, res, path, method) || !admitted(req, res, options)) return;
    for (const [key, handler] of Object.entries(handlers)) {
      const [m, pattern] = key.split(" ") as [string, string];
      const params = m === method ? routeParams(pattern, path) : undefined;
      if (params !== undefined) {
        // Never a rejection: the control socket's server does not wait on this promise.
        await handler(req, res, params).catch((e: unknown) => {
          if (res.headersSent) res.destroy();
          else sendError(res, 500, "daemon_bug", `launcher serve failed on this request: ${(e as Error).message}`);
        });
        return;
      }
    }
  };
}
