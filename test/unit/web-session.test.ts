import assert from "node:assert/strict";
import { test } from "node:test";
import { actionRefusal, Attempts, cookieValue, SESSION_LIMITS, SessionBook, sessionCookie, tokenMatches } from "../../src/daemon/web-session.js";

// The sessions' pure core: ids and codes from a counter, times from numbers given.

const counter = (): (() => string) => {
  let n = 0;
  return () => `token-${String(++n).padStart(16, "0")}`;
};
const limits = { ...SESSION_LIMITS, maxSessions: 3, idleMs: 1000, absoluteMs: 5000, codeTtlMs: 60_000, maxCodes: 2 };

test("a session remembers its role, is found by its id, and ends idle or at its absolute expiry", () => {
  const book = new SessionBook(limits, counter());
  const { id, session } = book.open("admin", 0);
  assert.equal(session.role, "admin");
  assert.notEqual(session.csrf, id);
  assert.equal(book.find(id, 900)?.role, "admin");
  assert.equal(book.find(id, 1800)?.role, "admin", "used at 900: idle until 1900");
  assert.equal(book.find(id, 2801), undefined, "idle past 1000 ms");
  const kept = book.open("read", 10_000);
  for (let t = 10_500; t < 15_000; t += 500) assert.equal(book.find(kept.id, t)?.role, "read");
  assert.equal(book.find(kept.id, 15_000), undefined, "absolute expiry even when used");
  assert.equal(book.find("token-unknown-0000000", 0), undefined);
});

test("at most maxSessions sessions: the oldest is dropped; a closed one is gone", () => {
  const book = new SessionBook(limits, counter());
  const ids = [0, 1, 2, 3].map((t) => book.open("read", t).id);
  assert.equal(book.size, 3);
  assert.equal(book.find(ids[0] as string, 4), undefined);
  assert.equal(book.find(ids[3] as string, 4)?.role, "read");
  book.close(ids[3] as string);
  assert.equal(book.find(ids[3] as string, 5), undefined);
});

test("a code is single-use, expires within its TTL, keeps the role it was issued for; past maxCodes waiting, a new one is refused, not made room for", () => {
  const book = new SessionBook(limits, counter());
  const a = book.issueCode("admin", 0);
  assert.ok(a);
  assert.equal(a.expiresAt, 60_000);
  assert.equal(book.redeem(a.code, 1), "admin");
  assert.equal(book.redeem(a.code, 2), undefined, "used once");
  const late = book.issueCode("read", 0);
  assert.ok(late);
  assert.equal(book.redeem(late.code, 60_000), undefined, "expired");
  const admin = book.issueCode("admin", 60_000);
  const full = [book.issueCode("read", 60_000), book.issueCode("read", 60_000), book.issueCode("read", 60_000)];
  assert.equal(full.filter((c) => c === undefined).length, full.length - (limits.maxCodes - 1), "refused once full");
  assert.equal(book.redeem(admin?.code as string, 60_001), "admin", "a reader's codes never void the admin's");
});

test("a full session book drops a reader's session before the admin's", () => {
  const book = new SessionBook(limits, counter());
  const admin = book.open("admin", 0);
  for (let i = 0; i < limits.maxSessions + 2; i++) book.open("read", 1);
  assert.equal(book.find(admin.id, 2)?.role, "admin");
});

test("real tokens are 256-bit url-safe and never repeat", () => {
  const book = new SessionBook();
  const code = book.issueCode("read", 0)?.code ?? "";
  const { id, session } = book.open("read", 0);
  for (const t of [code, id, session.csrf]) assert.match(t, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(new Set([code, id, session.csrf]).size, 3);
});

test("sign-in attempts are limited per peer and window, and the peers remembered are bounded", () => {
  const attempts = new Attempts({ attempts: 2, attemptWindowMs: 1000, maxPeers: 2 });
  assert.deepEqual([attempts.allow("a", 0), attempts.allow("a", 1), attempts.allow("a", 2), attempts.allow("b", 2)], [true, true, false, true]);
  assert.equal(attempts.allow("a", 1000), true, "a new window");
  attempts.allow("c", 1000);
  assert.equal(attempts.allow("b", 1001), true, "b was dropped as the oldest, so starts afresh");
});

test("the session cookie is read from a Cookie header only when it is a token, and set HttpOnly, SameSite=Strict", () => {
  const id = "abcdefghijklmnop_-0123";
  assert.equal(cookieValue(`a=b; launcher_session=${id}; c=d`, "launcher_session"), id);
  assert.equal(cookieValue(`launcher_session=${id}`, "launcher_session"), id);
  assert.equal(cookieValue("launcher_session=short", "launcher_session"), undefined);
  assert.equal(cookieValue("launcher_session=has space in it 0123456", "launcher_session"), undefined);
  assert.equal(cookieValue(`xlauncher_session=${id}`, "launcher_session"), undefined);
  assert.equal(cookieValue(`${"a=b; ".repeat(2000)}launcher_session=${id}`, "launcher_session"), undefined, "too long a header");
  assert.equal(cookieValue(undefined, "launcher_session"), undefined);
  assert.equal(sessionCookie(id, 90_500, false), `launcher_session=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=90`);
  assert.match(sessionCookie(id, 1000, true), /; Secure$/);
});

test("an action needs an admin session and, unless a GET, its CSRF token", () => {
  const book = new SessionBook(limits, counter());
  const admin = book.open("admin", 0).session;
  const read = book.open("read", 0).session;
  assert.equal(actionRefusal(admin, "POST", admin.csrf), undefined);
  assert.equal(actionRefusal(admin, "GET", undefined), undefined);
  assert.match(actionRefusal(admin, "DELETE", undefined) ?? "", /x-launcher-csrf/);
  assert.match(actionRefusal(admin, "POST", read.csrf) ?? "", /x-launcher-csrf/);
  assert.match(actionRefusal(admin, "POST", [admin.csrf]) ?? "", /x-launcher-csrf/);
  assert.match(actionRefusal(read, "POST", read.csrf) ?? "", /only reads/);
  assert.match(actionRefusal(read, "GET", undefined) ?? "", /only reads/);
  assert.equal(tokenMatches("x", ""), false);
});

test("without an admin key, the owner socket's code is for reading: no session acts where no key may", async () => {
  const { createServer } = await import("node:http");
  const { WebSessions } = await import("../../src/daemon/web-session-api.js");
  const { SESSION_ROUTES } = await import("../../src/contract/read-api.js");
  for (const [checkAdmin, role] of [[undefined, "read"], [(k: string | undefined) => k === "admin-key-0123456789", "admin"]] as const) {
    const sessions = new WebSessions(checkAdmin === undefined ? {} : { checkAdmin });
    // As the owner socket serves it: every peer is the daemon's own user.
    const server = createServer((req, res) => void sessions.handle(req, res, (req.url ?? "/").split("?")[0] ?? "/", true));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const post = (p: string, body: unknown): Promise<Response> => fetch(`${base}${p}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const code = ((await (await post(SESSION_ROUTES.codes, {})).json()) as { code: string }).code;
      const signed = await post(SESSION_ROUTES.signIn, { code });
      const cookie = (signed.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
      const session = (await (await fetch(`${base}${SESSION_ROUTES.session}`, { headers: { cookie } })).json()) as { role: string };
      assert.equal(session.role, role);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  }
});
