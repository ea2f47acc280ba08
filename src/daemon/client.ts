import { UserError } from "../config/errors.js";
import { decodeEvent, type UpEvent } from "../boot/up-events.js";
import { BootListSchema, CONTROL_PATHS, type BootSummary, type LocalDaemon } from "./protocol.js";
import type { UpSubmission } from "../app/up-submission.js";
import { ControlErrorSchema, decodeStop, type StopAnswer, type StopRequest } from "../contract/control-api.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";

/** A daemon to talk to, and the admin key to show it (never in the URL, never printed). */
export interface DaemonTarget {
  /** Its URL: where it is reached over TCP, and how messages name it. */
  readonly url: string;
  readonly key?: string;
  /** The owner-only control socket of this user's own daemon on this machine: used in place of TCP. */
  readonly socket?: string;
}

/** How to run a daemon, said wherever one is missing. */
export const RUN_A_DAEMON = "run `launcher serve --control` (on this machine, or on any that reaches the nodes, then --daemon URL or LAUNCHER_DAEMON=URL): boots then outlive the terminal";

/** What the CLI knows when it picks a daemon. */
export interface DaemonChoice {
  /** `--daemon URL`. */
  readonly flag?: string;
  /** `$LAUNCHER_DAEMON`: a URL, or `none` for no daemon even when a local one runs. */
  readonly env?: string;
  /** This user's own daemon on this machine, already judged trustworthy (src/daemon/local-daemon.ts). */
  readonly local?: { readonly url: string; readonly socket: string };
}

/**
 * The daemon to talk to: the flag, then the variable, then this user's local daemon; undefined:
 * run in this process. A URL given that is the local daemon's is reached through its socket,
 * which needs no key (its TCP port answers an admin key only).
 */
export function chooseDaemon(c: DaemonChoice): { url: string; socket?: string } | undefined {
  const given = c.flag ?? (c.env === undefined || c.env === "" ? undefined : c.env);
  if (given === "none") return undefined;
  if (given !== undefined) {
    const url = checkDaemonUrl(given, c.flag === undefined ? "LAUNCHER_DAEMON" : "--daemon");
    return c.local !== undefined && c.local.url === url ? { ...c.local } : { url };
  }
  return c.local === undefined ? undefined : { ...c.local };
}

/** An http(s) URL without credentials in it (a key in a URL ends up in logs and `ps`). */
export function checkDaemonUrl(text: string, what: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UserError(`${what} ${JSON.stringify(text)} is not a URL`, "for example http://127.0.0.1:8080 or http://spark1:8080");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UserError(`${what} must be an http:// or https:// URL`, "for example http://127.0.0.1:8080");
  if (url.username !== "" || url.password !== "") throw new UserError(`${what} must not hold a user or key`, "put the admin key in LAUNCHER_ADMIN_KEY or a file named by LAUNCHER_ADMIN_KEY_FILE");
  return url.origin;
}

/**
 * An undici dispatcher that connects to a Unix socket (undici docs/docs/api/Client.md,
 * `connect.socketPath`); loaded only when a socket is used, as undici's load is a tenth of a
 * second of every command's start. Fetch is given it as `dispatcher`, which Node's fetch
 * (undici inside) honours (undici docs/docs/api/Fetch.md).
 */
type Dispatcher = NonNullable<RequestInit["dispatcher"]>;
const dispatchers = new Map<string, Dispatcher>();
async function socketDispatcher(socket: string): Promise<Dispatcher> {
  const known = dispatchers.get(socket);
  if (known !== undefined) return known;
  const { Agent } = await import("undici");
  // The package's Agent and the one inside Node's fetch are two copies of one interface.
  const agent = new Agent({ connect: { socketPath: socket } }) as unknown as Dispatcher;
  dispatchers.set(socket, agent);
  return agent;
}

/**
 * A dispatcher for one call whose answer comes only once its work is done (a stop waits out its
 * grace): undici's Agent gives up on an answer's headers after 300 s by default (`headersTimeout`,
 * undici docs/api/Client.md), which a long grace passes.
 */
async function patientDispatcher(socket: string | undefined, headersWithinMs: number): Promise<Dispatcher> {
  const { Agent } = await import("undici");
  return new Agent({ headersTimeout: headersWithinMs, ...(socket === undefined ? {} : { connect: { socketPath: socket } }) }) as unknown as Dispatcher;
}

function unreachable(target: DaemonTarget, e: unknown): UserError {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  return new UserError(`cannot reach the daemon at ${target.url}${target.socket === undefined ? "" : ` (through its socket ${target.socket})`}: ${cause?.code ?? cause?.message ?? (e as Error).message}`, `start it (launcher serve --control), or pass --daemon URL / LAUNCHER_DAEMON=none to run here`);
}

/** What a 401 of the control API tells the user to do. */
const ADMIN_KEY_HINT = "set LAUNCHER_ADMIN_KEY (or LAUNCHER_ADMIN_KEY_FILE) to the daemon's admin key: an inference key is not one";

/**
 * The daemon's answer when it is 2xx or one of `expected`; any other is the daemon's refusal, as a
 * user error (a 401's hint is `keyHint`).
 */
export async function call(target: DaemonTarget, method: string, path: string, body: unknown, signal?: AbortSignal, expected: readonly number[] = [], keyHint = ADMIN_KEY_HINT, headersWithinMs?: number): Promise<Response> {
  let res: Response;
  try {
    const dispatcher = headersWithinMs !== undefined ? await patientDispatcher(target.socket, headersWithinMs) : target.socket === undefined ? undefined : await socketDispatcher(target.socket);
    // Through the socket the URL's host and port are not used (nor checked: any port is fine).
    res = await fetch(`${target.socket === undefined ? target.url : "http://localhost"}${path}`, {
      ...(dispatcher === undefined ? {} : { dispatcher }),
      method,
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(target.key === undefined ? {} : { authorization: `Bearer ${target.key}` }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw unreachable(target, e);
  }
  if (res.ok || expected.includes(res.status)) return res;
  const text = await res.text().catch(() => "");
  let message = text.trim();
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string } };
    message = parsed.error?.message ?? message;
  } catch {
    // Not JSON: the text as it is.
  }
  const hint = res.status === 401 ? keyHint : undefined;
  throw new UserError(`the daemon at ${target.url} refused: ${message || `HTTP ${res.status}`}`, hint);
}

/** Reads an answer of events, one per line, to its end (or until `signal` aborts). */
async function readEvents(res: Response, onEvent: (e: UpEvent) => void, signal: AbortSignal): Promise<void> {
  if (res.body === null) return;
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of res.body) {
    rest += decoder.decode(chunk as Uint8Array, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      // Detached (or accepted, for --detach): what came in the same chunk is not shown.
      if (signal.aborted) return;
      if (line.trim() === "") continue;
      const e = decodeEvent(line);
      if (e !== undefined) onEvent(e);
    }
  }
}

/** Submits a boot and hands its events to `onEvent` until its end, or until `signal` aborts (detach). */
export async function submitBoot(target: DaemonTarget, submission: UpSubmission, onEvent: (e: UpEvent) => void, signal: AbortSignal): Promise<void> {
  await readEvents(await call(target, "POST", CONTROL_PATHS.boots, submission, signal), onEvent, signal);
}

/** A boot's events from its start, then each new one until its end, or until `signal` aborts. */
export async function followBoot(target: DaemonTarget, name: string, onEvent: (e: UpEvent) => void, signal: AbortSignal): Promise<void> {
  await readEvents(await call(target, "GET", CONTROL_PATHS.events(name), undefined, signal), onEvent, signal);
}

/** Cancels a boot in progress; its final event once it is rolled back, undefined when the daemon runs no boot of that name. */
export async function cancelBoot(target: DaemonTarget, name: string): Promise<UpEvent | undefined> {
  const res = await call(target, "DELETE", CONTROL_PATHS.boot(name), undefined, undefined, [404]);
  const text = await res.text();
  if (res.status === 404) return undefined;
  return decodeEvent(text.trim());
}

/** The boots the daemon holds (running and recently finished); `signal` bounds the wait. */
export async function listBoots(target: DaemonTarget, signal?: AbortSignal): Promise<BootSummary[]> {
  const res = await call(target, "GET", CONTROL_PATHS.boots, undefined, signal);
  const parsed = BootListSchema.safeParse(await res.json().catch(() => undefined));
  if (!parsed.success) throw new UserError(`the daemon at ${target.url} answered the list of boots in a shape this launcher does not know`, "run the same launcher version on both sides");
  return parsed.data.boots;
}

/**
 * What the daemon's stop of a deployment came to: its answer; `unseen` (404: it sees no such
 * deployment, or it has no stop route); `refused`, down's own refusal there (409: a bare name that
 * fits several deployments), to be said as down says it here. Any other refusal is thrown (a UserError).
 */
export type StopResult = { readonly kind: "answer"; readonly answer: StopAnswer } | { readonly kind: "unseen" } | { readonly kind: "refused"; readonly error: UserError };

/** Beyond a stop's grace, how long its answer may take: the nodes' SSH round trips and removals (bounded by theirs). */
const STOP_ANSWER_MARGIN_S = 300;

export async function stopDeployment(target: DaemonTarget, name: string, request: StopRequest): Promise<StopResult> {
  // The answer comes once the stop is done: its grace, and the time to reach every node, besides.
  const within = ((request.grace_seconds ?? seconds(DEFAULTS.stopGrace)) + STOP_ANSWER_MARGIN_S) * 1000;
  const res = await call(target, "POST", CONTROL_PATHS.stop(name), request, undefined, [404, 409], ADMIN_KEY_HINT, within);
  const value = (await res.json().catch(() => undefined)) as unknown;
  if (res.status === 404) return { kind: "unseen" };
  if (res.status === 409) {
    const refusal = ControlErrorSchema.safeParse(value);
    const error = refusal.success ? refusal.data.error : { message: `the daemon at ${target.url} refused to stop ${name}`, hint: undefined };
    return { kind: "refused", error: new UserError(error.message, error.hint) };
  }
  const decoded = decodeStop(value);
  if (!decoded.ok) throw new UserError(`the daemon at ${target.url} answered the stop of ${name} in a shape this launcher does not know (${decoded.problem})`, "run the same launcher version on both sides");
  return { kind: "answer", answer: decoded.answer };
}
