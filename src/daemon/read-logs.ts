/**
 * `GET deployments/{name}/logs`: a deployment's logs merged across its nodes, each line with its
 * node and rank. Read through the `logs` use case's sources (src/app/logs.ts) and the Docker
 * client's `docker logs` (each line cut to LINE_MAX as it enters, src/remote/lines.ts); the engine
 * keys the store recorded are redacted as `launcher logs` redacts them. Bounded: `tail` lines per
 * node (at most MAX_LOG_TAIL), a follow for at most FOLLOW_MAX_MS, and a follower that reads too
 * slowly is cut.
 */
import type { ServerResponse } from "node:http";
import { redactText } from "../config/redact.js";
import { LABELS } from "../contract/deployment.js";
import { MAX_LOG_TAIL, type LogLine } from "../contract/read-api.js";
import { splitTimestamp } from "../engine/boot-log.js";
import type { LogsSince } from "../remote/docker.js";
import type { LogSource } from "../app/logs.js";
import { EVENT_STREAM, SSE_DEFAULTS, sseComment, sseFrame, sseRetry } from "./sse.js";

/** Lines per node when `tail` is not given (what `launcher logs` reads by default). */
export const DEFAULT_LOG_TAIL = 200;
/** The longest one follow runs; the client opens it again with `since` if it wants more. */
export const FOLLOW_MAX_MS = 60 * 60 * 1000;
/**
 * The most characters of log text one `logs` answer holds (tail x nodes x a line's 16 KiB could
 * be hundreds of MiB held at once): shared among the nodes, each keeping its newest lines.
 */
export const MAX_LOG_ANSWER_CHARS = 8 * 1024 * 1024;
/** A follow's heartbeat: the event stream's. */
const FOLLOW_HEARTBEAT_MS = SSE_DEFAULTS.heartbeatMs;
/** The most a follower may have unread before it is cut. */
export const FOLLOW_MAX_BACKLOG_BYTES = 1024 * 1024;

export interface LogQuery {
  readonly tail: number;
  readonly since?: LogsSince;
  readonly follow: boolean;
  /** The deployment's cluster, when its name is on several. */
  readonly cluster?: string;
}

/** `since` as Unix seconds (`1764900000`, `1764900000.5`) or an ISO 8601 time with its zone; undefined: neither. */
function parseSince(text: string): LogsSince | undefined {
  if (/^\d{1,12}(\.\d{1,9})?$/.test(text)) return { unixSeconds: Number(text) };
  if (text.length > 64 || !/(Z|[+-]\d{2}:?\d{2})$/.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? { unixSeconds: ms / 1000 } : undefined;
}

/** The query of a logs request, or what is wrong with it (said in a 400). */
export function parseLogQuery(query: URLSearchParams): { ok: true; query: LogQuery } | { ok: false; problem: string } {
  const tailText = query.get("tail");
  const tail = tailText === null ? DEFAULT_LOG_TAIL : /^\d{1,7}$/.test(tailText) ? Math.min(Number(tailText), MAX_LOG_TAIL) : undefined;
  if (tail === undefined) return { ok: false, problem: `tail must be a count of lines (at most ${MAX_LOG_TAIL} are read), not ${JSON.stringify(tailText?.slice(0, 40))}` };
  const sinceText = query.get("since");
  const since = sinceText === null ? undefined : parseSince(sinceText);
  if (sinceText !== null && since === undefined) return { ok: false, problem: `since must be Unix seconds or an ISO 8601 time with its zone (2026-12-05T02:00:00Z), not ${JSON.stringify(sinceText.slice(0, 40))}` };
  const followText = query.get("follow");
  if (followText !== null && followText !== "0" && followText !== "1") return { ok: false, problem: "follow is 1 (follow new lines) or 0" };
  const cluster = query.get("cluster");
  return { ok: true, query: { tail, follow: followText === "1", ...(since === undefined ? {} : { since }), ...(cluster === null ? {} : { cluster: cluster.slice(0, 256) }) } };
}

/** A raw `docker logs --timestamps` line of `source` as the API gives it, its secrets redacted. */
export function logLine(node: string, rank: number, raw: string, secrets: readonly string[]): LogLine {
  const { time, text } = splitTimestamp(raw);
  return { ...(time === undefined ? {} : { t: time }), node, rank, text: redactText(text, secrets) };
}

/**
 * Lines of several nodes in time order. Docker's timestamps are RFC 3339 in UTC with nanoseconds
 * (moby daemon/logger jsonfilelog, `--timestamps`), so their text sorts as their time; a line
 * without one sorts first. Stable: one node's lines of one instant keep their order.
 */
export function mergeLogLines(lines: readonly LogLine[]): LogLine[] {
  const at = (l: LogLine): string => l.t ?? "";
  return [...lines].sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0));
}

const rankOf = (s: LogSource): number => {
  const n = Number(s.c.labels[LABELS.rank]);
  return Number.isSafeInteger(n) ? n : -1;
};

/** Every source's last lines, merged. */
export async function readLogLines(sources: readonly LogSource[], query: LogQuery, secrets: readonly string[], signal: AbortSignal, maxChars = MAX_LOG_ANSWER_CHARS): Promise<LogLine[]> {
  const read = { tail: query.tail, signal, ...(query.since === undefined ? {} : { since: query.since }) };
  // Each node gets its share of the answer's characters, its newest lines kept.
  const share = Math.floor(maxChars / Math.max(1, sources.length));
  const perNode = await Promise.all(
    sources.map(async (s) => {
      const kept: LogLine[] = [];
      let size = 0;
      let first = 0;
      for await (const raw of s.docker.logs(s.c.name, read)) {
        const line = logLine(s.node, rankOf(s), raw, secrets);
        kept.push(line);
        size += line.text.length;
        for (; size > share && first < kept.length; first++) size -= (kept[first] as LogLine).text.length;
      }
      return kept.slice(first);
    }),
  );
  return mergeLogLines(perNode.flat());
}

/** What ends a follow besides its client: its time bound, and the daemon stopping. */
export interface FollowBounds {
  readonly maxMs?: number;
  readonly closing?: AbortSignal;
}

/**
 * Streams every source's lines as SSE `log` events as they come, from `tail` back, until the
 * containers end, the client goes, it reads too slowly, FOLLOW_MAX_MS passes or the daemon stops
 * (those two say so in an `end` event). Each node's lines come in its order; lines of two nodes
 * come as they arrive.
 */
export async function followLogLines(res: ServerResponse, sources: readonly LogSource[], query: LogQuery, secrets: () => readonly string[], bounds: FollowBounds = {}): Promise<void> {
  // A client gone while the sources were looked up: its close was heard before this listened.
  if (res.destroyed) return;
  const maxMs = bounds.maxMs ?? FOLLOW_MAX_MS;
  const stop = new AbortController();
  res.on("close", () => stop.abort());
  res.writeHead(200, { "content-type": EVENT_STREAM, "cache-control": "no-store", "x-accel-buffering": "no" });
  res.write(sseRetry(2000));
  // Nothing is written once the stream is stopped: a write after the end would be an error on the response.
  const finish = (reason: string): void => {
    if (!stop.signal.aborted) res.write(sseFrame("end", { reason }));
    stop.abort();
  };
  const timer = setTimeout(() => finish(`a follow lasts at most ${maxMs / 1000} s: open it again with since`), maxMs);
  timer.unref();
  // A quiet log still sends bytes, so that no client or proxy takes the stream for dead.
  const beat = setInterval(() => {
    if (!stop.signal.aborted) res.write(sseComment("heartbeat"));
  }, FOLLOW_HEARTBEAT_MS);
  beat.unref();
  const closing = (): void => finish("the daemon stops");
  bounds.closing?.addEventListener("abort", closing, { once: true });
  if (bounds.closing?.aborted === true) closing();
  const read = { tail: query.tail, follow: true, signal: stop.signal, ...(query.since === undefined ? {} : { since: query.since }) };
  await Promise.all(
    sources.map(async (s) => {
      for await (const raw of s.docker.logs(s.c.name, read)) {
        if (stop.signal.aborted) return;
        if (res.writableLength > FOLLOW_MAX_BACKLOG_BYTES) {
          stop.abort();
          res.destroy();
          return;
        }
        res.write(sseFrame("log", logLine(s.node, rankOf(s), raw, secrets())));
      }
    }),
  ).catch(() => undefined);
  clearTimeout(timer);
  clearInterval(beat);
  bounds.closing?.removeEventListener("abort", closing);
  if (!res.writableEnded) res.end();
}
