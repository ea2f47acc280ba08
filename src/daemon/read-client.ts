/**
 * The read API's client (src/contract/read-api.ts): each route's answer decoded with the contract,
 * and the SSE stream's events as they come. `launcher top` and the page read the daemon through
 * this; the key goes in a header (DaemonTarget), never in a URL.
 */
import { UserError } from "../config/errors.js";
import { decodeRead, decodeReadEvent, READ_PATHS, type LogLine, type ReadAnswer, type ReadAnswerKind, type ReadEvent } from "../contract/read-api.js";
import { call, type DaemonTarget } from "./client.js";
import { SseParser } from "./sse.js";

/** What a 401 of the read API tells the user to do. */
export const READ_KEY_HINT = "show the daemon an admin key (LAUNCHER_ADMIN_KEY) or an inference key: the read API takes either";

/** The routes answered with one JSON object (logs has its own call: it names a deployment). */
export type PlainReadKind = Exclude<ReadAnswerKind, "logs">;

const withQuery = (path: string, query: Readonly<Record<string, string | number | undefined>>): string => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
  const text = q.toString();
  return text === "" ? path : `${path}?${text}`;
};

async function decoded<K extends ReadAnswerKind>(target: DaemonTarget, kind: K, res: Response): Promise<ReadAnswer<K>> {
  const r = decodeRead(kind, await res.json().catch(() => undefined));
  if (!r.ok) throw new UserError(`the daemon at ${target.url} answered ${kind} in a shape this launcher does not know (${r.problem})`, "run the same launcher version on both sides");
  return r.answer;
}

/** One route's answer: `query` as the route takes it (history: recipe, limit; runs: kind, limit; activity: limit). */
export async function readAnswer<K extends PlainReadKind>(target: DaemonTarget, kind: K, query: Readonly<Record<string, string | number | undefined>> = {}, signal?: AbortSignal): Promise<ReadAnswer<K>> {
  const res = await call(target, "GET", withQuery(READ_PATHS[kind], query), undefined, signal, [], READ_KEY_HINT);
  return decoded(target, kind, res);
}

export interface LogsQuery {
  readonly tail?: number;
  /** Unix seconds, or an ISO 8601 time with its zone. */
  readonly since?: string | number;
  readonly cluster?: string;
}

/** A deployment's last lines, merged across its nodes in time order. */
export async function readLogs(target: DaemonTarget, deployment: string, query: LogsQuery = {}, signal?: AbortSignal): Promise<ReadAnswer<"logs">> {
  const res = await call(target, "GET", withQuery(READ_PATHS.logs(deployment), { ...query }), undefined, signal, [], READ_KEY_HINT);
  return decoded(target, "logs", res);
}

/**
 * Reads an SSE answer to its end or until `signal` aborts, handing each event this launcher knows
 * to `onEvent`. A stream cut by the daemon (it stopped) is a user error naming it.
 */
async function readStream(target: DaemonTarget, res: Response, onEvent: (e: ReadEvent) => void, signal: AbortSignal): Promise<void> {
  if (res.body === null) return;
  const parser = new SseParser();
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body) {
      for (const m of parser.add(decoder.decode(chunk as Uint8Array, { stream: true }))) {
        if (signal.aborted) return;
        const e = decodeReadEvent(m.event, m.data);
        if (e !== undefined) onEvent(e);
      }
    }
  } catch (e) {
    if (signal.aborted) return;
    if (e instanceof UserError) throw e;
    throw new UserError(`the daemon at ${target.url} cut its stream: ${(e as Error).message}`, "it stopped or restarted: open the stream again");
  }
}

/**
 * The daemon's `events` stream: each change as it happens, until the daemon ends it or `signal`
 * aborts. `onOpen` is called once its headers came: the daemon sends them as it takes the client
 * (src/daemon/sse.ts SseHub.add), so every change after that is an event and a client reads the
 * routes then.
 */
export async function followEvents(target: DaemonTarget, onEvent: (e: ReadEvent) => void, signal: AbortSignal, onOpen?: () => void): Promise<void> {
  const res = await call(target, "GET", READ_PATHS.events, undefined, signal, [], READ_KEY_HINT);
  onOpen?.();
  await readStream(target, res, onEvent, signal);
}

/** A deployment's log lines from `tail` back, then each new one, until the stream ends or `signal` aborts. */
export async function followLogs(target: DaemonTarget, deployment: string, query: LogsQuery, onLine: (line: LogLine) => void, signal: AbortSignal): Promise<void> {
  const res = await call(target, "GET", withQuery(READ_PATHS.logs(deployment), { ...query, follow: 1 }), undefined, signal, [], READ_KEY_HINT);
  await readStream(target, res, (e) => (e.event === "log" ? onLine(e.data) : undefined), signal);
}
