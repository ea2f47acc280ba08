import type { BootPhase } from "../deploy/contract.js";
import type { EngineAdapter } from "./adapter.js";

/** What launcher knows about one node's boot, read from its log lines. */
export interface BootState {
  readonly phase: BootPhase;
  readonly figures: Readonly<Record<string, string>>;
  readonly ready: boolean;
  /** The first fatal line seen, if any. */
  readonly fatal?: string;
  /** The first exception (the root cause), which may come before the fatal wrapper line. */
  readonly cause?: string;
  readonly lastLines: readonly string[];
  /** The rank has reached the rendezvous with its peers (and may be waiting there for them). */
  readonly atRendezvous?: true;
}

export const INITIAL_BOOT: BootState = { phase: "starting", figures: {}, ready: false, lastLines: [] };

const KEEP_LINES = 40;
const EXCEPTION = /^(?:\S+ )?(?:\([^)]*\) )?(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit)): .+/;
const WRAPPER = /Engine core initialization failed\. See root cause above/;
// `docker logs --timestamps` prefixes every line with an RFC 3339 time.
const TIMESTAMP = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) (.*)$/;

export function splitTimestamp(line: string): { time?: string; text: string } {
  const m = TIMESTAMP.exec(line);
  return m ? { time: m[1] as string, text: m[2] as string } : { text: line };
}

/** The state after one more log line. */
export function advanceBoot(adapter: EngineAdapter, state: BootState, line: string): BootState {
  const lastLines = [...state.lastLines.slice(-(KEEP_LINES - 1)), line];
  let { phase, ready, fatal, cause } = state;
  const figures = { ...state.figures };
  for (const p of adapter.bootPhases) {
    const m = p.pattern.exec(line);
    if (!m) continue;
    phase = p.phase;
    for (const [name, group] of Object.entries(p.figures ?? {})) {
      const value = m[group];
      if (value !== undefined) figures[name] = value.replace(/,/g, "");
    }
  }
  if (adapter.readyPattern.test(line)) ready = true;
  const atRendezvous = state.atRendezvous === true || adapter.rendezvousPatterns.some((p) => p.test(line));
  const trimmed = line.trim();
  if (cause === undefined && EXCEPTION.test(trimmed) && !WRAPPER.test(trimmed)) cause = trimmed;
  if (fatal === undefined && adapter.fatalPatterns.some((p) => p.test(line))) {
    fatal = trimmed;
    cause ??= trimmed;
  }
  return {
    phase,
    figures,
    ready,
    lastLines,
    ...(fatal === undefined ? {} : { fatal }),
    ...(cause === undefined ? {} : { cause }),
    ...(atRendezvous ? { atRendezvous: true as const } : {}),
  };
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
