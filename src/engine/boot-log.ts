import { BOOT_PHASES, type BootPhase } from "../contract/deployment.js";
import type { EngineAdapter, LogLine } from "./adapter.js";

/** What launcher knows about one node's boot, read from its log lines. */
export interface BootState {
  readonly phase: BootPhase;
  readonly figures: Readonly<Record<string, string>>;
  readonly ready: boolean;
  /** The first fatal line seen, if any. */
  readonly fatal?: string;
  /**
   * The root cause: the first real exception (its message, without the process prefix and logger
   * header), which comes before the fatal wrapper lines; never a wrapper, never the exception of a
   * record that only warns (a plugin that failed to load).
   */
  readonly cause?: string;
  /** The lines that led up to the cause (its traceback), as shown, the cause last. */
  readonly causeLines?: readonly string[];
  /** The cause only says a peer process died (the adapter's peerLossPatterns): another node failed first. */
  readonly causeIsPeerLoss?: true;
  /** The address of the peer such a cause names (the adapter's peerAddress), when it names one. */
  readonly peerAddress?: string;
  /** The address the node's own log says it has (the adapter's nodeAddress), the first one it said. */
  readonly address?: string;
  /** Lines that did not stop the engine but likely explain a later failure (with their exception). */
  readonly warnings?: readonly string[];
  /** Shown lines (no colour codes, the last drawing of a redrawn line). */
  readonly lastLines: readonly string[];
  /** The rank has reached the rendezvous with its peers (and may be waiting there for them). */
  readonly atRendezvous?: true;
  /** The engine finished its init: its API may answer any moment, so /health is worth polling. */
  readonly pastInit?: true;
  /** The rank said it runs headless (a worker node). */
  readonly headless?: true;
  /** The logger record whose lines belong to the last warning (its traceback), while it goes on. */
  readonly warningRecord?: string;
}

export const INITIAL_BOOT: BootState = { phase: "starting", figures: {}, ready: false, lastLines: [] };

const KEEP_LINES = 40;
const CAUSE_LINES = 12;
const MAX_WARNINGS = 5;
const REFINE_WITHIN = 12;
// `docker logs --timestamps` prefixes every line with an RFC 3339 time.
export const TIMESTAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) (.*)$/;

/**
 * An RFC 3339 time as Docker writes it (nanoseconds; `inspect`'s FinishedAt cuts trailing zeros)
 * in milliseconds since the epoch, keeping the fraction Date.parse drops past the millisecond (to
 * about a microsecond: a double's precision at today's epoch);
 * undefined when it is not one (Docker's zero time "0001-01-01T00:00:00Z" is one, far back).
 */
export function timeMs(t: string): number | undefined {
  const m = /^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(t);
  if (m === null) return undefined;
  const whole = Date.parse(`${m[1] as string}${m[3] as string}`);
  return Number.isNaN(whole) ? undefined : whole + Number(`0${m[2] ?? ""}`) * 1000;
}

export function splitTimestamp(line: string): { time?: string; text: string } {
  const m = TIMESTAMP.exec(line);
  return m ? { time: m[1] as string, text: m[2] as string } : { text: line };
}

/** The state after one more raw log line (its docker timestamp already split off). */
export function advanceBoot(adapter: EngineAdapter, state: BootState, raw: string): BootState {
  const line = adapter.readLine(raw);
  if (line.text.trim() === "") return state;
  const lastLines = [...state.lastLines.slice(-(KEEP_LINES - 1)), line.text];
  let { phase, ready, fatal, cause, causeLines, warnings, pastInit, headless } = state;
  const { causeIsPeerLoss } = state;
  const figures = { ...state.figures };
  for (const p of adapter.bootPhases) {
    const m = p.pattern.exec(line.body);
    if (!m) continue;
    // A phase never goes back: a headless node logs its config (`Resolved architecture`) before its
    // own start line (vllm/entrypoints/cli/serve.py run_headless builds the config first).
    if (BOOT_PHASES.indexOf(p.phase) > BOOT_PHASES.indexOf(phase)) phase = p.phase;
    for (const [name, group] of Object.entries(p.figures ?? {})) {
      const value = m[group];
      if (value !== undefined) figures[name] = value.replace(/,/g, "");
    }
    if (p.sets?.includes("pastInit")) pastInit = true;
    if (p.sets?.includes("headless")) headless = true;
  }
  if (adapter.readyPattern.test(line.body)) ready = true;
  const atRendezvous = state.atRendezvous === true || adapter.rendezvousPatterns.some((p) => p.test(line.body));

  // A warning's own record (the traceback of `logger.exception`) goes with the warning.
  let warningRecord = line.record !== undefined && line.record === state.warningRecord ? state.warningRecord : undefined;
  const warning = adapter.warningPatterns.find((p) => p.test(line.body));
  if (warning !== undefined) {
    if ((warnings?.length ?? 0) < MAX_WARNINGS) warnings = [...(warnings ?? []), line.body];
    warningRecord = line.record;
  } else if (warningRecord !== undefined && warnings !== undefined && adapter.exceptionPattern.test(line.body)) {
    const last = warnings[warnings.length - 1] as string;
    // The first exception of the record (the innermost of a chain) says why.
    if (!last.endsWith(")")) warnings = [...warnings.slice(0, -1), `${last} (${line.body})`];
  }

  if (warningRecord === undefined) {
    const wrapper = adapter.wrapperPatterns.some((p) => p.test(line.body));
    if (cause === undefined && !wrapper && adapter.exceptionPattern.test(line.body)) {
      cause = line.body;
      causeLines = causeContext(lastLines, line);
    }
    if (fatal === undefined && adapter.fatalPatterns.some((p) => p.test(line.body))) {
      fatal = line.body;
      if (cause === undefined && !wrapper) {
        cause = line.body;
        causeLines = causeContext(lastLines, line);
      }
    }
  }
  if (cause !== undefined && cause === state.cause) {
    const refined = refineCause(adapter, state, lastLines);
    if (refined !== undefined) {
      cause = refined;
      causeLines = causeContext(lastLines, line);
    }
  }
  const peer = cause === state.cause ? { causeIsPeerLoss, peerAddress: state.peerAddress } : peerOf(adapter, cause);
  const address = state.address ?? adapter.nodeAddress?.(line.text);
  return {
    phase,
    figures,
    ready,
    lastLines,
    ...(fatal === undefined ? {} : { fatal }),
    ...(cause === undefined ? {} : { cause }),
    ...(causeLines === undefined ? {} : { causeLines }),
    ...(peer.causeIsPeerLoss === true ? { causeIsPeerLoss: true as const } : {}),
    ...(peer.peerAddress === undefined ? {} : { peerAddress: peer.peerAddress }),
    ...(address === undefined ? {} : { address }),
    ...(warnings === undefined ? {} : { warnings }),
    ...(atRendezvous ? { atRendezvous: true as const } : {}),
    ...(pastInit === true ? { pastInit: true as const } : {}),
    ...(headless === true ? { headless: true as const } : {}),
    ...(warningRecord === undefined ? {} : { warningRecord }),
  };
}

/**
 * Whether a new cause only says a peer died (an exception line, a fatal line or a refined cause
 * alike), and the peer's address when it names one.
 */
function peerOf(adapter: EngineAdapter, cause: string | undefined): { causeIsPeerLoss?: true; peerAddress?: string } {
  if (cause === undefined || !adapter.peerLossPatterns.some((p) => p.test(cause))) return {};
  const peerAddress = adapter.peerAddress?.(cause);
  return { causeIsPeerLoss: true, ...(peerAddress === undefined ? {} : { peerAddress }) };
}

/** The adapter's fuller cause, from the lines of the cause's process since the cause's own line. */
function refineCause(adapter: EngineAdapter, state: BootState, lastLines: readonly string[]): string | undefined {
  const causeText = state.causeLines?.[state.causeLines.length - 1];
  if (adapter.refineCause === undefined || state.cause === undefined || causeText === undefined) return undefined;
  const at = lastLines.lastIndexOf(causeText);
  // Other processes' lines may come between, but not many: past that, stop reading the cause again.
  if (at < 0 || lastLines.length - at > REFINE_WITHIN) return undefined;
  const proc = adapter.readLine(causeText).proc;
  const after = lastLines.slice(at + 1).filter((l) => proc === undefined || adapter.readLine(l).proc === proc);
  return adapter.refineCause(state.cause, after.map((l) => adapter.readLine(l).body));
}

/** The cause's traceback: the lines just before it from the same process (other ranks interleave). */
function causeContext(lastLines: readonly string[], line: LogLine): readonly string[] {
  const prefix = line.proc === undefined ? undefined : `(${line.proc}) `;
  const same = prefix === undefined ? lastLines : lastLines.filter((l) => l.startsWith(prefix));
  return same.slice(-CAUSE_LINES);
}

/** A short line of the figures pulled from the log so far. */
export function describeFigures(f: Readonly<Record<string, string>>): string {
  const parts: string[] = [];
  if (f.model_gib) parts.push(`model ${f.model_gib} GiB${f.load_seconds ? ` in ${f.load_seconds} s` : ""}`);
  if (f.kv_tokens) parts.push(`KV ${Number(f.kv_tokens).toLocaleString("en-US")} tokens`);
  if (f.max_concurrency) parts.push(`${f.max_concurrency}x concurrency`);
  if (f.graph_seconds) parts.push(`graphs ${f.graph_seconds} s`);
  return parts.join(", ");
}

/** One rank's whole log (lines as `docker logs` gives them, with or without its times) read through advanceBoot. */
export function readBoot(adapter: EngineAdapter, lines: readonly string[]): BootState {
  return lines.reduce((state, line) => advanceBoot(adapter, state, splitTimestamp(line).text), INITIAL_BOOT);
}
