import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import { SESSION_ROUTES, SignInSchema, type SessionAnswer, type SessionRole, type SignInCode } from "../contract/read-api.js";
import { presentedKey } from "../gateway/auth.js";
import { actionRefusal, Attempts, cookieValues, csrfRefusal, CSRF_HEADER, SESSION_COOKIE, SESSION_LIMITS, SessionBook, sessionCookie, type Session, type SessionLimits } from "./web-session.js";

/**
 * The sessions' HTTP side (./web-session.ts is its pure core): sign in with a key or a one-time
 * code, see the session, sign out, ask for a code with a key; and what the read and control APIs
 * ask of a request's cookie.
 */

export interface WebSessionOptions {
  /** The admin keys' check; undefined: serve has none. */
  readonly checkAdmin?: (presented: string | undefined) => boolean;
  /** The inference keys' check (the admin keys are asked apart); undefined: none. */
  readonly checkInference?: (presented: string | undefined) => boolean;
  readonly limits?: SessionLimits;
  readonly now?: () => number;
}

const SESSION_PATHS: ReadonlySet<string> = new Set(Object.values(SESSION_ROUTES));

/** A sign-in's body is a key or a code: never more than this. */
const MAX_SIGN_IN_BYTES = 8192;

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? "" : JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store", ...headers });
  res.end(text);
}

const refuse = (res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void =>
  send(res, status, { error: { message, type: "session_error", code } }, headers);

/** The body as JSON, at most `limit` bytes; undefined: too large, not JSON, or the client left. */
async function bodyJson(req: IncomingMessage, limit: number): Promise<unknown> {
  if (Number(req.headers["content-length"] ?? 0) > limit) return (req.resume(), undefined);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) return (req.resume(), undefined);
      chunks.push(chunk);
    }
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

/** The page's sessions over HTTP. */
export class WebSessions {
  readonly book: SessionBook;
  private readonly attempts: Attempts;
  private readonly now: () => number;

  constructor(private readonly options: WebSessionOptions) {
    const limits = options.limits ?? SESSION_LIMITS;
    this.book = new SessionBook(limits);
    this.attempts = new Attempts(limits);
    this.now = options.now ?? Date.now;
  }

  /** Whether `path` is a session route: each is answered here. */
  owns(path: string): boolean {
    return SESSION_PATHS.has(path);
  }

  /** Answers a session route (owns(path) is true); `owner`: the request came through the owner socket, whose peer is the admin. */
  async handle(req: IncomingMessage, res: ServerResponse, path: string, owner: boolean): Promise<void> {
    const method = req.method ?? "GET";
    const route = (Object.entries(SESSION_ROUTES) as [keyof typeof SESSION_ROUTES, string][]).find(([, p]) => p === path)?.[0];
    const wanted = route === "session" ? "GET" : "POST";
    if (route === undefined || method !== wanted) {
      req.resume();
      return refuse(res, 405, "method_not_allowed", `${path} takes ${wanted}, not ${method}`, { allow: wanted });
    }
    const handlers = { signIn: () => this.signIn(req, res), signOut: () => this.signOut(req, res), session: () => this.describe(req, res), codes: () => this.code(req, res, owner) };
    // Never a rejection: the control socket's server does not wait on this promise.
    await Promise.resolve()
      .then(handlers[route])
      .catch((e: unknown) => {
        if (res.headersSent) res.destroy();
        else refuse(res, 500, "daemon_bug", `launcher serve failed on this request: ${(e as Error).message}`);
      });
  }

  /** The live session a request's cookie names; undefined: no cookie, or no such session. */
  sessionOf(req: IncomingMessage): Session | undefined {
    return this.liveOf(req)?.session;
  }

  /** The first of the request's session cookies that names a live session, with its id. */
  private liveOf(req: IncomingMessage): { id: string; session: Session } | undefined {
    for (const id of cookieValues(req.headers.cookie, SESSION_COOKIE)) {
      const session = this.book.find(id, this.now());
      if (session !== undefined) return { id, session };
    }
    return undefined;
  }

  /**
   * What the control API asks of a request: true when its session may act, a reason when it may
   * not, undefined when it shows no live session (then its key is asked).
   */
  readonly admitAction = (req: IncomingMessage): true | string | undefined => {
    const s = this.sessionOf(req);
    return s === undefined ? undefined : (actionRefusal(s, req.method ?? "GET", req.headers[CSRF_HEADER]) ?? true);
  };

  private roleOfKey(key: string | undefined): SessionRole | undefined {
    const admin = this.options.checkAdmin?.(key) ?? false;
    const inference = this.options.checkInference?.(key) ?? false;
    return admin ? "admin" : inference ? "read" : undefined;
  }

  private async signIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Only wrong keys count against an address (a code cannot be guessed, and counting every
    // sign-in would let anyone at one address lock its others out).
    const peer = req.socket.remoteAddress ?? "";
    // JSON only: a cross-site page cannot send that type without a CORS preflight, which is never granted (no login CSRF):
    // Fetch standard, "CORS-safelisted request-header", allows only form, multipart and text/plain content types.
    const json = /^application\/json\s*(;|$)/i.test(req.headers["content-type"] ?? "");
    const parsed = SignInSchema.safeParse(json ? await bodyJson(req, MAX_SIGN_IN_BYTES) : (req.resume(), undefined));
    if (!parsed.success) return refuse(res, 400, "bad_request", `the body is JSON (content-type: application/json) {"key": KEY} or {"code": CODE}, at most ${MAX_SIGN_IN_BYTES} bytes`);
    const now = this.now();
    if ("key" in parsed.data && this.attempts.spent(peer, now)) return refuse(res, 429, "too_many_sign_ins", "too many wrong keys from this address: wait a minute", { "retry-after": "60" });
    const role = "key" in parsed.data ? this.roleOfKey(parsed.data.key) : this.book.redeem(parsed.data.code, now);
    if (role === undefined && "key" in parsed.data) this.attempts.failed(peer, now);
    if (role === undefined) return refuse(res, 401, "sign_in_refused", "wrong key, or a code already used or expired: launcher dashboard prints a new link");
    const { id, session } = this.book.open(role, now);
    // serve listens over plain HTTP, so `Secure` is set only should a TLS socket ever carry the request
    // (Node docs, tls.TLSSocket `encrypted`: always true on one; a plain net.Socket has no such field).
    const secure = (req.socket as Partial<TLSSocket>).encrypted === true;
    send(res, 204, undefined, { "set-cookie": sessionCookie(id, this.book.endsAt(session) - now, secure) });
  }

  private signOut(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const live = this.liveOf(req);
    // With its CSRF token, as an action: another service on the host could post a form here.
    const refused = live === undefined ? undefined : csrfRefusal(live.session, req.headers[CSRF_HEADER]);
    if (refused !== undefined) return refuse(res, 403, "csrf_required", refused);
    if (live !== undefined) this.book.close(live.id);
    send(res, 204, undefined, { "set-cookie": sessionCookie("", 0, false) });
  }

  private describe(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const s = this.sessionOf(req);
    if (s === undefined) return refuse(res, 401, "no_session", `no session: POST ${SESSION_ROUTES.signIn} with {"key": KEY} or {"code": CODE}`);
    const answer: SessionAnswer = { role: s.role, csrf_token: s.csrf, expires_at: new Date(this.book.expiresAt(s)).toISOString() };
    send(res, 200, answer);
  }

  private code(req: IncomingMessage, res: ServerResponse, owner: boolean): void {
    req.resume();
    // The owner socket's peer is the admin only where serve has an admin key: without one, no
    // session may act over TCP (as no key may), so the owner's code is for reading.
    const ownerRole: SessionRole = this.options.checkAdmin === undefined ? "read" : "admin";
    const role = owner ? ownerRole : this.roleOfKey(presentedKey(req.headers.authorization, req.headers["x-api-key"]));
    if (role === undefined) return refuse(res, 401, "invalid_key", "a sign-in code is given for the admin key or an inference key (Authorization: Bearer KEY)", { "www-authenticate": "Bearer" });
    const issued = this.book.issueCode(role, this.now());
    if (issued === undefined) return refuse(res, 503, "too_many_codes", "too many sign-in codes are waiting to be used: try again within a minute", { "retry-after": "60" });
    const { code, expiresAt } = issued;
    const answer: SignInCode = { code, expires_at: new Date(expiresAt).toISOString(), url_path: `/?code=${code}` };
    send(res, 200, answer);
  }
}
