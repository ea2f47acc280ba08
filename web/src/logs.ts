import { MAX_LOG_TAIL, type LogLine } from "../../src/contract/read-api.js";

/** The logs view's lines: bounded, filtered by node. Pure. */

/** Lines asked of each node when the view opens. */
export const LOG_TAIL = 300;
/** The most lines the view holds: a long follow drops its oldest. */
export const MAX_LOG_LINES = 5000;

/**
 * `lines` with `line` in its time's place: each node's follow sends its lines in order, but the
 * nodes' streams interleave as they come (a node's tail arrives whole before another's), so a line
 * goes back past the newer lines of other nodes. Docker's RFC 3339 UTC times sort as text
 * (src/daemon/read-logs.ts mergeLogLines); a line without one stays where it came.
 */
export function appendLog(lines: readonly LogLine[], line: LogLine): LogLine[] {
  const out = [...lines];
  let at = out.length;
  if (line.t !== undefined) while (at > 0 && (out[at - 1]?.t ?? "") > line.t) at--;
  out.splice(at, 0, line);
  return out.length > MAX_LOG_LINES ? out.slice(-MAX_LOG_LINES) : out;
}

/** `node` "" is every node. */
export const filterLog = (lines: readonly LogLine[], node: string): readonly LogLine[] => (node === "" ? lines : lines.filter((l) => l.node === node));

/** The nodes the filter offers: the deployment's, then any other a line named, sorted. */
export function logNodes(known: readonly string[], lines: readonly LogLine[]): string[] {
  return [...new Set([...known, ...lines.map((l) => l.node)])].sort();
}

/**
 * The follow's query: the last LOG_TAIL lines of each node, or, when it opens again, what came after
 * the newest line held (`since` in Unix seconds: docker's RFC 3339 time has nanoseconds, cut here to
 * the milliseconds Date.parse reads; docker's --tail counts after --since filters, so it is the most).
 */
export function followQuery(lastTime: string | undefined): string {
  const ms = lastTime === undefined ? NaN : Date.parse(lastTime.replace(/(\.\d{3})\d+/, "$1"));
  const q = new URLSearchParams({ follow: "1", tail: String(Number.isFinite(ms) ? MAX_LOG_TAIL : LOG_TAIL) });
  // A millisecond past the newest line, so that it is not sent twice.
  if (Number.isFinite(ms)) q.set("since", ((ms + 1) / 1000).toFixed(3));
  return q.toString();
}
