import { MAX_LOG_TAIL, type LogLine } from "../../src/contract/read-api.js";

/** The logs view's lines: bounded, filtered by node. Pure. */

/** Lines asked of each node when the view opens. */
export const LOG_TAIL = 300;
/** The most lines the view holds: a long follow drops its oldest. */
export const MAX_LOG_LINES = 5000;

/** A line as the view holds it: `seq` numbers the lines in the order they came, so a row keeps its key when a line goes in before it. */
export interface HeldLine extends LogLine {
  readonly seq: number;
}

/**
 * `lines` with `line` in its time's place: each node's follow sends its lines in order, but the
 * nodes' streams interleave as they come (a node's tail arrives whole before another's), so a line
 * goes back past the newer lines of other nodes. Docker's RFC 3339 UTC times sort as text
 * (src/daemon/read-logs.ts mergeLogLines); a line without one stays where it came.
 */
export function appendLog<L extends LogLine>(lines: readonly L[], line: L): L[] {
  const out = [...lines];
  let at = out.length;
  if (line.t !== undefined) while (at > 0 && (out[at - 1]?.t ?? "") > line.t) at--;
  out.splice(at, 0, line);
  return out.length > MAX_LOG_LINES ? out.slice(-MAX_LOG_LINES) : out;
}

/** `node` "" is every node. */
export const filterLog = <L extends LogLine>(lines: readonly L[], node: string): readonly L[] => (node === "" ? lines : lines.filter((l) => l.node === node));

/** The nodes the filter offers: the deployment's, then any other a line named, sorted. */
export function logNodes(known: readonly string[], lines: readonly LogLine[]): string[] {
  return [...new Set([...known, ...lines.map((l) => l.node)])].sort();
}

/** Each node's newest line time, after `line`. */
export function withNewest(newest: ReadonlyMap<string, string>, line: LogLine): ReadonlyMap<string, string> {
  const held = newest.get(line.node);
  if (line.t === undefined || (held !== undefined && held >= line.t)) return newest;
  return new Map([...newest, [line.node, line.t]]);
}

/**
 * Where a follow opened again starts: the oldest of the nodes' newest lines, so that a node whose
 * lines lag behind the others' loses none of its own (the route's `since` is one for every node);
 * the others' lines sent again are dropped by isResent.
 */
export function resumeFrom(newest: ReadonlyMap<string, string>): string | undefined {
  let oldest: string | undefined;
  for (const t of newest.values()) if (oldest === undefined || t < oldest) oldest = t;
  return oldest;
}

/** A line a follow opened again sends a second time: older than its node's newest held, or the same as one held at that time. */
export function isResent(lines: readonly LogLine[], newest: ReadonlyMap<string, string>, line: LogLine): boolean {
  const held = newest.get(line.node);
  if (line.t === undefined || held === undefined || line.t > held) return false;
  return line.t < held || lines.some((l) => l.node === line.node && l.t === line.t && l.rank === line.rank && l.text === line.text);
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
