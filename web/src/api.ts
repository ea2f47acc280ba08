import { CSRF_HEADER, decodeRead, READ_PATHS, SESSION_ROUTES, SessionAnswerSchema, type ReadAnswer, type SessionAnswer } from "../../src/contract/read-api.js";
import { outcomeOfAnswer, outcomeOfEvents, refusalMessage, type Action, type ActionRequest, type Outcome } from "./actions.js";
import { readPath, type PageRead } from "./state.js";

/**
 * The page's side of the daemon: its session (src/daemon/web-session-api.ts), the read API and the
 * control API, all same-origin, the session's HttpOnly cookie sent by the browser (fetch's default
 * credentials, "same-origin"). No key is kept: one typed in is sent once and forgotten.
 */

/** A read answered 401 or 403: the session ended (or never was); the page asks for a key again. */
export class SignedOut extends Error {}

/** The most a read waits for its answer. */
const READ_TIMEOUT_MS = 30_000;

export async function session(): Promise<SessionAnswer | undefined> {
  const res = await fetch(SESSION_ROUTES.session, { signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
  if (res.status === 401) return undefined;
  const parsed = SessionAnswerSchema.safeParse(await res.json().catch(() => undefined));
  if (!parsed.success) throw new Error(`the daemon's session answer is not one this page reads (HTTP ${res.status})`);
  return parsed.data;
}

export type SignInResult = "ok" | "refused" | "throttled" | "error";

/** Signs in with a key or a one-time code; the daemon sets the session cookie. */
export async function signIn(body: { key: string } | { code: string }): Promise<SignInResult> {
  const res = await fetch(SESSION_ROUTES.signIn, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
  await res.body?.cancel();
  return res.status === 204 ? "ok" : res.status === 401 ? "refused" : res.status === 429 ? "throttled" : "error";
}

export async function signOut(csrf: string): Promise<void> {
  const res = await fetch(SESSION_ROUTES.signOut, { method: "POST", headers: { [CSRF_HEADER]: csrf } });
  await res.body?.cancel();
}

/** A read route's answer, decoded by the contract; SignedOut on 401/403. */
export async function read<K extends PageRead>(kind: K): Promise<ReadAnswer<K>> {
  const res = await fetch(readPath(kind), { signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
  if (res.status === 401 || res.status === 403) throw new SignedOut(`${kind}: HTTP ${res.status}`);
  if (!res.ok) throw new Error(`${READ_PATHS[kind]}: ${refusalMessage(res.status, await res.text())}`);
  const decoded = decodeRead(kind, await res.json());
  if (!decoded.ok) throw new Error(`${READ_PATHS[kind]}: the answer is not one this page reads (${decoded.problem})`);
  return decoded.answer;
}

/** The recipes start and swap offer. */
export async function recipes(): Promise<ReadAnswer<"recipes">["recipes"]> {
  const res = await fetch(READ_PATHS.recipes, { signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
  if (res.status === 401 || res.status === 403) throw new SignedOut(`recipes: HTTP ${res.status}`);
  if (!res.ok) throw new Error(`${READ_PATHS.recipes}: ${refusalMessage(res.status, await res.text())}`);
  const decoded = decodeRead("recipes", await res.json());
  if (!decoded.ok) throw new Error(`${READ_PATHS.recipes}: the answer is not one this page reads (${decoded.problem})`);
  return decoded.answer.recipes;
}

/** The most of a boot's event stream the page reads: its events are small, and few. */
const MAX_STREAM_CHARS = 4 * 1024 * 1024;

/**
 * Sends a confirmed action with the session's CSRF token; `onOutcome` hears where it stands: once
 * for a stop or cancel, and for a start or swap at each line of its boot's events until their end.
 */
export async function act(action: Action, req: ActionRequest, csrf: string, onOutcome: (o: Outcome) => void): Promise<void> {
  const headers: Record<string, string> = { [CSRF_HEADER]: csrf, ...(req.body === undefined ? {} : { "content-type": "application/json" }) };
  const res = await fetch(req.path, { method: req.method, headers, ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }) });
  if (!req.streams || !res.ok || res.body === null) return onOutcome(outcomeOfAnswer(action, res.status, await res.text()));
  const lines: string[] = [];
  let rest = "";
  let size = 0;
  const decoder = new TextDecoder();
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    size += text.length;
    if (size > MAX_STREAM_CHARS) {
      await reader.cancel();
      break;
    }
    const parts = (rest + text).split("\n");
    rest = parts.pop() ?? "";
    lines.push(...parts);
    onOutcome(outcomeOfEvents(lines));
  }
  if (rest.trim() !== "") lines.push(rest);
  const last = outcomeOfEvents(lines);
  onOutcome(last.outcome === "pending" ? { outcome: "error", message: "the daemon's answer ended before the boot was accepted" } : last);
}
