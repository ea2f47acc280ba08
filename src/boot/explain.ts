import { culprit, ownCause, peerNamed } from "./blame.js";
import { BOOT_PHASES, type BootPhase } from "../contract/deployment.js";
import type { EngineAdapter } from "../engine/adapter.js";
import { cutLine } from "../remote/lines.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, type BootState } from "../engine/boot-log.js";

/** One phase a node went through, with when it began and how long it lasted (when the log has times). */
export interface PhaseStep {
  readonly phase: BootPhase;
  /** The time the log gives the phase's first line (docker's RFC 3339 time, else the engine's own). */
  readonly at?: string;
  readonly seconds?: number;
  /** The figures this phase found. */
  readonly figures: Readonly<Record<string, number>>;
}

/** What a saved engine log says about a boot: the one shape `launcher explain` prints (and --json). */
export interface Explanation {
  readonly engine: string;
  readonly phase: BootPhase;
  readonly ready: boolean;
  readonly failed: boolean;
  /** The line that ended the boot (the engine's fatal line), if any. */
  readonly fatal: string | null;
  /** The root cause: the first real exception, never a wrapper. */
  readonly cause: string | null;
  readonly hint: string | null;
  readonly figures: Readonly<Record<string, number>>;
  readonly phases: readonly PhaseStep[];
  /** The node the explanation is about, when the log is `launcher logs` output (`[node] line`). */
  readonly node?: string;
  /**
   * The node whose log tells of `node`'s failure (its cause names `node` as the peer that died, by
   * the address `node`'s own log, or its name, gives): the phases, cause and lines are of its log.
   */
  readonly reportedBy?: string;
  /** Every node in the log (one unnamed node for a single container's log). */
  readonly nodes: readonly { readonly node: string; readonly phase: BootPhase; readonly failed: boolean }[];
  /** The cause and the lines around it, as a terminal shows them. */
  readonly context: readonly string[];
  /** Lines that did not stop the engine but likely explain the failure (the parser's `warnings`). */
  readonly warnings: readonly string[];
}

/** How many lines before the cause (a traceback's frames) and after it are shown. */
const CONTEXT_BEFORE = 12;
const CONTEXT_AFTER = 3;

// `launcher logs` (src/cli/logs.ts) puts `[node]` (padded to the longest name) before every line.
export const NODE_PREFIX = /^\[([^\]\s]+) *\] ?(.*)$/s;

interface Line {
  readonly node: string;
  /** As the log has it (what the parser reads). */
  readonly raw: string;
  /** As a terminal shows it (the engine's own reading: no colour codes, a redrawn bar's last state). */
  readonly text: string;
  readonly time?: { readonly text: string; readonly ms: number };
}

/**
 * The log's lines, whatever wrote it: raw engine output, `docker logs --timestamps`, or `launcher
 * logs` with its `[node]` prefixes. The prefixes count only when every line has one: an engine line
 * may itself start with a bracket (`[Gloo] Rank 0 ...`).
 */
export function readLogLines(adapter: EngineAdapter, text: string): Line[] {
  // A multi-line log record may end its lines with "\r\n" (the engine's readLine handles a "\r" inside a line).
  // Each line cut as a streamed one is (src/remote/lines.ts): a saved log is anyone's file.
  const raw = text.split(/\r?\n/).map((l) => cutLine(l));
  if (raw.at(-1) === "") raw.pop();
  const prefixed = raw.some((l) => l !== "") && raw.every((l) => l === "" || NODE_PREFIX.test(l));
  return raw.map((l) => {
    const m = prefixed ? NODE_PREFIX.exec(l) : null;
    const node = m?.[1] ?? "";
    const { time, text: rest } = splitTimestamp(m ? (m[2] ?? "") : l);
    const shown = adapter.readLine(rest);
    const docker = time === undefined ? undefined : Date.parse(time);
    const own = docker === undefined || Number.isNaN(docker) ? adapter.lineTime?.(shown) : undefined;
    return {
      node,
      raw: rest,
      text: shown.text,
      ...(docker !== undefined && !Number.isNaN(docker) ? { time: { text: time as string, ms: docker } } : own ? { time: own } : {}),
    };
  });
}

interface NodeLog {
  state: BootState;
  readonly lines: string[];
  /** Index in `lines` of the root cause line, and its time / place in the whole log (to find the node that failed first). */
  causeAt?: { index: number; order: number; ms?: number };
  readonly steps: { phase: BootPhase; at?: Line["time"]; end?: Line["time"]; before: Readonly<Record<string, string>>; figures: Record<string, string> }[];
}

const failedOf = (s: BootState): boolean => s.fatal !== undefined || (s.cause !== undefined && !s.ready);
const numbers = (f: Readonly<Record<string, string>>): Record<string, number> =>
  Object.fromEntries(Object.entries(f).flatMap(([k, v]) => (Number.isFinite(Number(v)) ? [[k, Number(v)]] : [])));

/** Reads a whole saved log through the same parser `up` uses (advanceBoot), one state per node. */
export function explainLog(adapter: EngineAdapter, text: string): Explanation {
  const nodes = new Map<string, NodeLog>();
  readLogLines(adapter, text).forEach((line, order) => {
    let n = nodes.get(line.node);
    if (n === undefined) {
      n = { state: INITIAL_BOOT, lines: [], steps: [] };
      nodes.set(line.node, n);
    }
    const before = n.state;
    n.state = advanceBoot(adapter, before, line.raw);
    n.lines.push(line.text);
    if (before.cause === undefined && n.state.cause !== undefined) {
      n.causeAt = { index: n.lines.length - 1, order, ...(line.time ? { ms: line.time.ms } : {}) };
    }
    const last = n.steps.at(-1);
    if (last === undefined || last.phase !== n.state.phase) {
      if (last !== undefined && line.time !== undefined) last.end = line.time;
      n.steps.push({ phase: n.state.phase, ...(line.time ? { at: line.time } : {}), before: before.figures, figures: {} });
    } else if (last.at === undefined && line.time !== undefined) {
      last.at = line.time;
    }
    const step = n.steps.at(-1);
    if (step !== undefined) {
      for (const [k, v] of Object.entries(n.state.figures)) if (step.before[k] !== v) step.figures[k] = v;
      if (line.time !== undefined && step.at !== undefined && line.time.ms >= step.at.ms) step.end = line.time;
    }
  });
  const all = [...nodes.entries()];
  const chosen = pickNode(all);
  const [name, log] = chosen ?? ["", { state: INITIAL_BOOT, lines: [], steps: [] } as NodeLog];
  const s = log.state;
  const peer = peerNamed(all, chosen, s, ([node, n]) => [node, n.state.address])?.[0];
  const failed = failedOf(s);
  const main = failed ? failureHint(adapter, s.cause, log.lines) : undefined;
  const warnings = s.warnings ?? [];
  const hint = [...(main === undefined ? [] : [main]), ...(failed ? warnings.map(warningNote) : [])].join("; ");
  const at = log.causeAt?.index;
  return {
    engine: adapter.name,
    phase: s.phase,
    // A log that reached the serving phase is ready even when the server's own ready line is
    // hidden (a quieter server log level): the engine logs that phase once its init is done.
    ready: s.ready || s.phase === "serving",
    failed,
    fatal: s.fatal ?? null,
    cause: s.cause ?? null,
    hint: hint === "" ? null : hint,
    figures: numbers(s.figures),
    phases: log.steps.map((st) => ({
      phase: st.phase,
      ...(st.at ? { at: st.at.text } : {}),
      ...(st.at && st.end ? { seconds: (st.end.ms - st.at.ms) / 1000 } : {}),
      figures: numbers(st.figures),
    })),
    ...(name === "" ? {} : { node: peer ?? name }),
    ...(peer === undefined ? {} : { reportedBy: name }),
    nodes: all.map(([node, n]) => ({ node, phase: n.state.phase, failed: failedOf(n.state) })),
    // The parser's traceback of the cause (its own process's lines), then what followed it.
    context: at === undefined ? [] : [...(s.causeLines ?? log.lines.slice(Math.max(0, at - CONTEXT_BEFORE), at + 1)), ...log.lines.slice(at + 1, at + CONTEXT_AFTER + 1)],
    warnings,
  };
}

/**
 * The node to explain: of the failed ones the one to blame (src/boot/blame.ts): a node with a
 * cause of its own before one that only says a peer died; then the first to fail, by the log's
 * times when both have one, else by the order of the lines (two nodes' logs followed at once reach
 * the file in no certain order, and the engine's own times are whole seconds); else the one
 * furthest on.
 */
function pickNode(all: readonly [string, NodeLog][]): [string, NodeLog] | undefined {
  const failed = all.filter(([, n]) => failedOf(n.state));
  if (failed.length > 0) {
    return culprit(failed, ([, n]) => ({
      ownCause: ownCause(n.state),
      ...(n.causeAt?.ms === undefined ? {} : { atMs: n.causeAt.ms }),
      order: n.causeAt?.order ?? Number.POSITIVE_INFINITY,
    }));
  }
  const rank = (n: NodeLog): number => (n.state.ready ? BOOT_PHASES.length : BOOT_PHASES.indexOf(n.state.phase));
  return [...all].sort(([, a], [, b]) => rank(b) - rank(a))[0];
}

/**
 * The hint for a failed boot, in the words `launcher explain` uses (`up`'s failure message shows the
 * same), from the cause and the log's lines as shown (the parser's `lastLines` or `readLine` text).
 */
export function failureHint(adapter: EngineAdapter, cause: string | undefined, lines: readonly string[]): string | undefined {
  return adapter.hintFor?.(cause, lines);
}

/** A line that did not stop the engine (the parser's `warnings`: a plugin that failed to load), as explain and up say it. */
export const warningNote = (warning: string): string => `${warning} (this likely explains the failure)`;

const figureText = (f: Readonly<Record<string, number>>): string => Object.entries(f).map(([k, v]) => `${k} ${v}`).join(", ");

/** What `launcher explain` prints without --json. */
export function formatExplanation(e: Explanation): string[] {
  const many = e.nodes.length > 1;
  const out: string[] = [`engine ${e.engine}${many ? `, ${e.nodes.length} nodes: ${e.nodes.map((n) => `${n.node} ${n.phase}${n.failed ? " (failed)" : ""}`).join(", ")}` : ""}`];
  out.push(`phases${e.node !== undefined ? ` of ${e.reportedBy ?? e.node}` : ""}:`);
  const width = Math.max(...BOOT_PHASES.map((p) => p.length));
  for (const p of e.phases) {
    const when = p.at === undefined ? "" : `  at ${p.at}`;
    const took = p.seconds === undefined ? "" : `  ${p.seconds.toFixed(1)} s`;
    const figures = Object.keys(p.figures).length === 0 ? "" : `  (${figureText(p.figures)})`;
    out.push(`  ${p.phase.padEnd(width)}${when}${took}${figures}`);
  }
  const where = e.node === undefined ? "" : e.reportedBy === undefined ? ` on ${e.node}` : ` on ${e.node} (${e.reportedBy}'s log says this node died)`;
  if (e.failed && e.ready) out.push(`the engine reached serving${where}, then failed`);
  else if (e.failed) out.push(`the boot failed${where} in phase ${e.phase}`);
  else if (e.ready) out.push(`the boot reached serving${where}`);
  else out.push(`no failure in the log: it ends in phase ${e.phase}${where} (saved while still booting?)`);
  if (e.cause !== null) {
    out.push(`cause: ${e.cause}`);
    if (e.context.length > 0) out.push("lines around it:", ...e.context.map((l) => `  | ${l}`));
  }
  if (e.fatal !== null && e.fatal !== e.cause) out.push(`fatal: ${e.fatal}`);
  if (e.hint !== null) out.push(`hint: ${e.hint}`);
  return out;
}
