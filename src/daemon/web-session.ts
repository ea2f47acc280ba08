import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { CSRF_HEADER, SESSION_ROUTES, type SessionRole } from "../contract/read-api.js";

/**
 * The page's sessions: a key (admin or inference) or a one-time code is exchanged for a random
 * session id kept in an HttpOnly, SameSite=Strict cookie. A session remembers its role, never the
 * key. Reads take its cookie; an action (the control API) takes an admin session's cookie only with
 * its CSRF token in `x-launcher-csrf`. Everything is bounded: sessions, codes, sign-in attempts per
 * peer. Nothing of a session, code or key is logged or echoed in an answer's error.
 */

export const SESSION_COOKIE = "launcher_session";
export { CSRF_HEADER };

export interface SessionLimits {
  readonly maxSessions: number;
  /** A session unused this long ends. */
  readonly idleMs: number;
  /** A session ends this long after its sign-in, used or not. */
  readonly absoluteMs: number;
  readonly codeTtlMs: number;
  readonly maxCodes: number;
  /** Sign-in attempts a peer (by address) may make per window. */
  readonly attempts: number;
  readonly attemptWindowMs: number;
  readonly maxPeers: number;
}

export const SESSION_LIMITS: SessionLimits = {
  maxSessions: 64,
  idleMs: 12 * 3600_000,
  absoluteMs: 7 * 24 * 3600_000,
  codeTtlMs: 60_000,
  maxCodes: 64,
  attempts: 10,
  attemptWindowMs: 60_000,
  maxPeers: 1024,
};

export interface Session {
  readonly role: SessionRole;
  readonly csrf: string;
  readonly createdAt: number;
  seenAt: number;
}

/** 256 random bits, url-safe (base64url: no padding, no character a cookie or URL must escape). */
export const randomToken = (): string => randomBytes(32).toString("base64url");

// Sessions and codes are found by their digest, so that a lookup's time says nothing of a stored id.
const digest = (s: string): string => createHash("sha256").update(s, "utf8").digest("base64url");

/**
 * Drops the oldest entries (a Map keeps insertion order) until `map` has room for one more, those
 * `first` picks before any other: a reader signing in again and again never signs the admin out.
 */
function makeRoom<K, V>(map: Map<K, V>, max: number, first: (v: V) => boolean = () => true): void {
  for (const pass of [first, () => true]) {
    for (const [k, v] of map) {
      if (map.size < max) return;
      if (pass(v)) map.delete(k);
    }
  }
}

/** The sessions and one-time codes, in memory: pure apart from the clock and the randomness given. */
export class SessionBook {
  private readonly sessions = new Map<string, Session>();
  private readonly codes = new Map<string, { role: SessionRole; expiresAt: number }>();

  constructor(
    private readonly limits: SessionLimits = SESSION_LIMITS,
    private readonly token: () => string = randomToken,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /** A new session of `role`: its id (the cookie's value) and the session. */
  open(role: SessionRole, now: number): { id: string; session: Session } {
    this.prune(now);
    makeRoom(this.sessions, this.limits.maxSessions, (v) => v.role === "read");
    const id = this.token();
    const session: Session = { role, csrf: this.token(), createdAt: now, seenAt: now };
    this.sessions.set(digest(id), session);
    return { id, session };
  }

  /** The live session `id` names, marked as used now; undefined: none, or it expired (and is gone). */
  find(id: string, now: number): Session | undefined {
    const key = digest(id);
    const s = this.sessions.get(key);
    if (s === undefined) return undefined;
    if (this.expired(s, now)) {
      this.sessions.delete(key);
      return undefined;
    }
    s.seenAt = now;
    return s;
  }

  close(id: string): void {
    this.sessions.delete(digest(id));
  }

  /** When `s` ends whatever its use: the cookie lasts until then, and the idle expiry is judged here. */
  endsAt(s: Session): number {
    return s.createdAt + this.limits.absoluteMs;
  }

  /** When `s` ends unless used again. */
  expiresAt(s: Session): number {
    return Math.min(s.seenAt + this.limits.idleMs, s.createdAt + this.limits.absoluteMs);
  }

  /** A one-time code for a session of `role`. */
  issueCode(role: SessionRole, now: number): { code: string; expiresAt: number } | undefined {
    for (const [k, c] of this.codes) if (c.expiresAt <= now) this.codes.delete(k);
    // Full: refused, not made room for (a reader asking again and again would void the admin's link).
    if (this.codes.size >= this.limits.maxCodes) return undefined;
    const code = this.token();
    const expiresAt = now + this.limits.codeTtlMs;
    this.codes.set(digest(code), { role, expiresAt });
    return { code, expiresAt };
  }

  /** The role `code` was issued for, once: a redeemed code is gone, used or expired. */
  redeem(code: string, now: number): SessionRole | undefined {
    const key = digest(code);
    const c = this.codes.get(key);
    this.codes.delete(key);
    return c !== undefined && c.expiresAt > now ? c.role : undefined;
  }

  private expired(s: Session, now: number): boolean {
    return now >= this.expiresAt(s);
  }

  private prune(now: number): void {
    for (const [k, s] of this.sessions) if (this.expired(s, now)) this.sessions.delete(k);
  }
}

/** Sign-in attempts per peer in fixed windows; at most `maxPeers` peers remembered (oldest dropped). */
export class Attempts {
  private readonly peers = new Map<string, { start: number; count: number }>();

  constructor(private readonly limits: Pick<SessionLimits, "attempts" | "attemptWindowMs" | "maxPeers"> = SESSION_LIMITS) {}

  /** Whether `peer` has used up its failed attempts this window. */
  spent(peer: string, now: number): boolean {
    const p = this.peers.get(peer);
    return p !== undefined && now - p.start < this.limits.attemptWindowMs && p.count >= this.limits.attempts;
  }

  /** Counts one failed attempt of `peer`. */
  failed(peer: string, now: number): void {
    const p = this.peers.get(peer);
    if (p === undefined || now - p.start >= this.limits.attemptWindowMs) {
      this.peers.delete(peer);
      makeRoom(this.peers, this.limits.maxPeers);
      this.peers.set(peer, { start: now, count: 1 });
      return;
    }
    p.count++;
  }

  /** Counts one attempt of `peer` as failed; false: it had used up its attempts this window. */
  allow(peer: string, now: number): boolean {
    if (this.spent(peer, now)) return false;
    this.failed(peer, now);
    return true;
  }
}

/** The most of a Cookie header read: a longer one is not looked at. */
const MAX_COOKIE_HEADER = 8192;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{16,128}$/;

/** The value of cookie `name` in a Cookie header (RFC 6265 section 5.4: `a=b; c=d`), when it is a token. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  return cookieValues(header, name)[0];
}

/**
 * Every well-formed value of cookie `name`: a browser sends all it has of one name (another
 * service on the same host may have set one with a narrower Path, which comes first), so the
 * caller looks for the one that names a live session.
 */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (header === undefined || header.length > MAX_COOKIE_HEADER) return [];
  const out: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (TOKEN_SHAPE.test(value)) out.push(value);
  }
  return out.slice(0, 8);
}

/**
 * The Set-Cookie of a session. Secure only over TLS: a browser ignores a cookie with Secure set by
 * a non-secure origin (draft-ietf-httpbis-rfc6265bis, the storage model, which took over
 * draft-ietf-httpbis-cookie-alone), so plain HTTP would lose it. SameSite=Strict: the browser sends
 * it on no cross-site request.
 */
export function sessionCookie(id: string, maxAgeMs: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}${secure ? "; Secure" : ""}`;
}

/** Whether `presented` is `expected`, in the same time whatever either holds. */
export function tokenMatches(expected: string, presented: string | string[] | undefined): boolean {
  const given = typeof presented === "string" ? presented : "";
  return timingSafeEqual(createHash("sha256").update(expected).digest(), createHash("sha256").update(given).digest()) && given !== "";
}

/** Whether a session may take an action of `method`: undefined when it may, else why not. */
export function actionRefusal(session: Session, method: string, csrf: string | string[] | undefined): string | undefined {
  if (session.role !== "admin") return "this session signed in with an inference key, which only reads: sign in with the admin key to reach the control API";
  return method === "GET" ? undefined : csrfRefusal(session, csrf);
}

/** Why a request of `session` is refused for want of its CSRF token; undefined: it carries it. */
export function csrfRefusal(session: Session, csrf: string | string[] | undefined): string | undefined {
  if (tokenMatches(session.csrf, csrf)) return undefined;
  return `an action with a session cookie needs header ${CSRF_HEADER} with the session's csrf_token (GET ${SESSION_ROUTES.session} gives it)`;
}
