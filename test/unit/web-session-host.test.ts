import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { READ_PATHS, SESSION_ROUTES } from "../../src/contract/read-api.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import { call } from "../../src/daemon/client.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { PAGE_HEADERS } from "../../src/daemon/web-page.js";
import { HOME_ADMIN_KEY, HOME_INFERENCE_KEY, runPiped, startHomeDaemon } from "../support/home-daemon.js";
import { cliArgs } from "../built-cli.js";

// The page's sessions as `launcher serve --control` mounts them (src/daemon/daemon.ts): sign in
// with a key or a one-time code, read with the cookie, act only as an admin session showing its
// CSRF token, and `launcher dashboard --no-open` printing a link that signs in once. The daemon
// runs in this process on a folder of its own, with a stand-in discovery watcher and one node
// that refuses SSH at once (as in test/unit/read-api-host.test.ts).

const ADMIN = HOME_ADMIN_KEY;
const INFERENCE = HOME_INFERENCE_KEY;

const post = (url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/** The cookie a sign-in set, as a browser sends it back. */
function cookieOf(res: Response): string {
  const set = res.headers.get("set-cookie") ?? "";
  assert.match(set, /^launcher_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+$/);
  return set.split(";")[0] as string;
}

/** `launcher dashboard ARGS` in a pipe, to its end (bounded): never spawnSync, the daemon answering it runs in this process. */
async function dashboard(dir: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env, NODE_OPTIONS: "", LAUNCHER_API_KEY: INFERENCE, LAUNCHER_ADMIN_KEY: undefined, LAUNCHER_ADMIN_KEY_FILE: undefined, LAUNCHER_DAEMON: undefined, XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "client-state"), DISPLAY: undefined, WAYLAND_DISPLAY: undefined };
  return runPiped([process.execPath, ...cliArgs(), "dashboard", ...args], { cwd: dir, env });
}

async function withDaemon(run: (url: string, dir: string, lines: string[], socket: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-web-session-"));
  let daemon: Daemon | undefined;
  try {
    const lines: string[] = [];
    daemon = await startHomeDaemon(dir, lines);
    const socket = (daemon as unknown as { running: { socket: { path: string } | undefined } }).running.socket?.path;
    assert.ok(socket !== undefined);
    await run(`http://127.0.0.1:${daemon.port}`, dir, lines, socket);
  } finally {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

test("an admin session reads with its cookie, and acts only with its CSRF token; a read session never acts; sign-out ends it", { timeout: 60_000 }, async () => {
  await withDaemon(async (url, _dir, lines) => {
    assert.equal((await fetch(`${url}${SESSION_ROUTES.session}`)).status, 401);
    assert.equal((await post(`${url}${SESSION_ROUTES.signIn}`, { key: "wrong-key-0123456789" })).status, 401);
    assert.equal((await post(`${url}${SESSION_ROUTES.signIn}`, { key: ADMIN, more: 1 })).status, 400);
    const formLike = await fetch(`${url}${SESSION_ROUTES.signIn}`, { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify({ key: ADMIN }) });
    assert.equal(formLike.status, 400, "a body a cross-site form could send is refused");
    const signedIn = await post(`${url}${SESSION_ROUTES.signIn}`, { key: ADMIN });
    assert.equal(signedIn.status, 204);
    const cookie = cookieOf(signedIn);
    assert.match(signedIn.headers.get("set-cookie") ?? "", /Max-Age=604800$/, "the cookie lasts to the absolute expiry (7 days); the idle one is the daemon's");
    const session = (await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie } })).json()) as { role: string; csrf_token: string; expires_at: string };
    assert.equal(session.role, "admin");
    assert.ok(Date.parse(session.expires_at) > Date.now());
    assert.equal((await fetch(`${url}${READ_PATHS.lanes}`, { headers: { cookie } })).status, 200);

    const without = await post(`${url}${CONTROL_PATHS.boots}`, {}, { cookie });
    assert.equal(without.status, 403);
    assert.match(((await without.json()) as { error: { message: string } }).error.message, /x-launcher-csrf/);
    assert.equal((await post(`${url}${CONTROL_PATHS.boots}`, {}, { cookie, "x-launcher-csrf": "not-the-token" })).status, 403);
    // With the token the request reaches the control API, which judges the (empty) submission.
    assert.equal((await post(`${url}${CONTROL_PATHS.boots}`, {}, { cookie, "x-launcher-csrf": session.csrf_token })).status, 400);
    assert.equal((await fetch(`${url}${CONTROL_PATHS.boot("nothing")}`, { method: "DELETE", headers: { cookie, "x-launcher-csrf": session.csrf_token } })).status, 404);

    const read = await post(`${url}${SESSION_ROUTES.signIn}`, { key: INFERENCE });
    const readCookie = cookieOf(read);
    const readSession = (await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie: readCookie } })).json()) as { role: string; csrf_token: string };
    assert.equal(readSession.role, "read");
    assert.equal((await fetch(`${url}${READ_PATHS.deployments}`, { headers: { cookie: readCookie } })).status, 200);
    const acting = await post(`${url}${CONTROL_PATHS.boots}`, {}, { cookie: readCookie, "x-launcher-csrf": readSession.csrf_token });
    assert.equal(acting.status, 403);
    assert.match(((await acting.json()) as { error: { message: string } }).error.message, /only reads/);

    assert.equal((await post(`${url}${SESSION_ROUTES.signOut}`, {}, { cookie })).status, 403, "sign-out too needs the CSRF token");
    assert.equal((await post(`${url}${SESSION_ROUTES.signOut}`, {}, { cookie, "x-launcher-csrf": session.csrf_token })).status, 204);
    assert.equal((await fetch(`${url}${READ_PATHS.lanes}`, { headers: { cookie } })).status, 401);
    assert.equal((await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie } })).status, 401);
    const said = lines.join("\n");
    for (const secret of [ADMIN, INFERENCE, cookie.split("=")[1] as string, session.csrf_token]) assert.ok(!said.includes(secret), "nothing of a key or session in the daemon's log");
  });
});

test("a code asked for with a key signs in once, for the key's role; it is never the key; `launcher dashboard --no-open` prints a link that signs in once; sign-ins are rate-limited", { timeout: 90_000 }, async () => {
  await withDaemon(async (url, dir, lines, socket) => {
    assert.equal((await post(`${url}${SESSION_ROUTES.codes}`, {})).status, 401);
    const asked = await fetch(`${url}${SESSION_ROUTES.codes}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN}` } });
    const { code, expires_at, url_path } = (await asked.json()) as { code: string; expires_at: string; url_path: string };
    assert.match(code, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(code, ADMIN);
    assert.equal(url_path, `/?code=${code}`);
    assert.ok(Date.parse(expires_at) - Date.now() <= 60_000);
    const first = await post(`${url}${SESSION_ROUTES.signIn}`, { code });
    assert.equal(first.status, 204);
    const role = ((await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie: cookieOf(first) } })).json()) as { role: string }).role;
    assert.equal(role, "admin");
    assert.equal((await post(`${url}${SESSION_ROUTES.signIn}`, { code })).status, 401, "a code works once");

    const page = await fetch(`${url}/?code=${code}`);
    // The built page, or (run from the sources without npm run build) the 503 that says how to build it: test/unit/web-page.test.ts tests both.
    assert.ok(page.status === 200 || page.status === 503, `HTTP ${page.status}`);
    for (const [name, value] of Object.entries(PAGE_HEADERS)) assert.equal(page.headers.get(name), value);
    const html = await page.text();
    for (const secret of [ADMIN, INFERENCE, code]) assert.ok(!html.includes(secret), "the page's HTML holds no key and no code");
    if (page.status === 200) for (const asset of ["/page/app.js", "/page/app.css"]) assert.equal((await fetch(`${url}${asset}`)).headers.get("content-security-policy"), "default-src 'self'; frame-ancestors 'none'");
    for (const other of ["/page/../package.json", "/page/", "/constructor", "/sign-in.html"]) assert.notEqual((await fetch(`${url}${other}`)).status, 200, other);

    const printed = await dashboard(dir, ["--no-open", "--daemon", url]);
    assert.equal(printed.code, 0, printed.stderr);
    const link = printed.stdout.trim();
    assert.match(link, new RegExp(`^${url}/\\?code=[A-Za-z0-9_-]{43}$`));
    const linked = new URL(link).searchParams.get("code") as string;
    assert.ok(!link.includes(INFERENCE));
    const byLink = await post(`${url}${SESSION_ROUTES.signIn}`, { code: linked });
    assert.equal(byLink.status, 204);
    const linkedRole = ((await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie: cookieOf(byLink) } })).json()) as { role: string }).role;
    assert.equal(linkedRole, "read", "the inference key's code gives a read session");
    assert.equal((await post(`${url}${SESSION_ROUTES.signIn}`, { code: linked })).status, 401);
    const json = await dashboard(dir, ["--no-open", "--json", "--daemon", url]);
    const answer = JSON.parse(json.stdout) as { url: string; expires_at: string };
    assert.match(answer.url, new RegExp(`^${url}/\\?code=[A-Za-z0-9_-]{43}$`));
    assert.ok(Date.parse(answer.expires_at) > Date.now());

    // The daemon's own user, through its socket, is given an admin code without a key.
    const owned = (await (await call({ url, socket }, "POST", SESSION_ROUTES.codes, undefined)).json()) as { code: string };
    const byOwner = await post(`${url}${SESSION_ROUTES.signIn}`, { code: owned.code });
    assert.equal(((await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie: cookieOf(byOwner) } })).json()) as { role: string }).role, "admin");

    // Only wrong keys count: ten a minute from one address; a code still signs in after them.
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await post(`${url}${SESSION_ROUTES.signIn}`, { key: "wrong-key-0123456789" })).status);
    assert.deepEqual(statuses, [...Array<number>(10).fill(401), 429, 429]);
    const after = (await (await post(`${url}${SESSION_ROUTES.codes}`, {}, { authorization: `Bearer ${INFERENCE}` })).json()) as { code: string };
    assert.equal((await post(`${url}${SESSION_ROUTES.signIn}`, { code: after.code })).status, 204, "a code is never throttled");
    const said = lines.join("\n");
    for (const secret of [ADMIN, INFERENCE, code, linked]) assert.ok(!said.includes(secret), "nothing of a key or code in the daemon's log");
  });
});
