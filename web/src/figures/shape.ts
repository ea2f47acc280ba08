/**
 * The page's figures as data: a boot's events as per-node phase segments on one time axis, past
 * boots as stacked bars, engine metrics as uPlot's columns, stored runs as plot series. Pure (no
 * DOM, no preact): the components in this folder draw what these return, and
 * test/unit/web-figures.test.ts proves them. Every output is bounded whatever the input's size.
 */
import type { z } from "zod";
import { formatDiagnostic } from "../../../src/config/diagnostic.js";
import { BOOT_PHASES } from "../../../src/contract/deployment.js";
import type { BenchRun, RunSubject, ServeResult } from "../../../src/contract/evidence.js";
import type { ActivityRecord, BootViewSchema, HistoryBoot, MetricsPoint, RunsAnswer } from "../../../src/contract/read-api.js";
import { duration } from "../format.js";
import { errorMessage, readBootEvent, type PageEncodedError } from "./boot-events.js";

export type BootView = z.infer<typeof BootViewSchema>;

/** The most of anything one figure draws: what is past it is counted, never drawn. */
export const LIMITS = {
  nodes: 64,
  /** Per node: a node whose phase flaps keeps its newest segments. */
  segments: 100,
  figures: 32,
  /** Characters of a figure's value, of a cause line. */
  text: 1000,
  causeLines: 80,
  historyBars: 20,
  /** Per chart: an hour of 5 s scrapes is 720; of requests, the newest this many. */
  chartPoints: 4000,
  benchSeries: 8,
  evals: 20,
} as const;

/** The phase's place in the contract's order (src/contract/deployment.ts BOOT_PHASES); -1 for a phase this page does not know. */
export const phaseIndex = (phase: string): number => (BOOT_PHASES as readonly string[]).indexOf(phase);

/** A class name per phase, so that one phase has one colour in every figure (figures.css). */
export const phaseClass = (phase: string): string => `phase-${phaseIndex(phase) >= 0 ? phaseIndex(phase) : "other"}`;

const cut = (s: string): string => (s.length > LIMITS.text ? `${s.slice(0, LIMITS.text - 1)}…` : s);

// ---------------------------------------------------------------------------------------------
// A boot's time line

/** One stretch of a node in one phase; `left` and `width` are fractions of the boot's axis. */
export interface PhaseSegment {
  readonly phase: string;
  readonly start: number;
  readonly end: number;
  /** The node's phase now, while the boot runs: it grows with the clock. */
  readonly running: boolean;
  /** The phase is earlier than the one before it: the node's engine started over. */
  readonly restart: boolean;
  /** Serving because the boot's result said the deployment serves, not because this node's log did. */
  readonly byResult: boolean;
  readonly left: number;
  readonly width: number;
}

export interface NodeTimeline {
  readonly node: string;
  /** The node's latest phase, exactly as its boot state said it. */
  readonly phase: string;
  readonly segments: readonly PhaseSegment[];
  /** Segments left out (the oldest) past LIMITS.segments. */
  readonly dropped: number;
  readonly figures: readonly (readonly [string, string])[];
  /** The least memory the guard saw available on the node during the boot, and its total. */
  readonly memory?: { readonly minAvailableKiB: number; readonly totalKiB: number };
}

export interface RootCause {
  /** The node blamed (one of the boot's nodes when the error names one), absent when none is. */
  readonly node?: string;
  readonly message: string;
  readonly hint?: string;
  /** The lines the error carries with it (what `launcher up` prints under the failure). */
  readonly lines: readonly string[];
}

/** What a boot's events say, before the clock places them. */
export interface BootFacts {
  readonly start: number;
  /** The final event's time; absent while the boot runs. */
  readonly end?: number;
  readonly nodes: readonly { readonly node: string; readonly changes: readonly PhaseChange[]; readonly figures: Readonly<Record<string, string>>; readonly memory?: NodeTimeline["memory"] }[];
  readonly cause?: RootCause;
}

export interface BootShape {
  readonly start: number;
  readonly end: number;
  readonly running: boolean;
  readonly nodes: readonly NodeTimeline[];
  /** Nodes left out past LIMITS.nodes. */
  readonly droppedNodes: number;
  readonly ticks: readonly { readonly at: number; readonly label: string }[];
  readonly cause?: RootCause;
}

/** A phase a node entered, when; `byResult`: entered by the boot's ready result rather than said by its log. */
export interface PhaseChange {
  readonly phase: string;
  readonly t: number;
  readonly byResult?: true;
}

interface NodeAcc {
  changes: PhaseChange[];
  figures: Readonly<Record<string, string>>;
  memory?: { minAvailableKiB: number; totalKiB: number };
}

/**
 * The boot's events (src/boot/up-events.ts' JSON, read by ./boot-events.ts): an event the time line
 * does not draw is skipped. Each node keeps the times its phase changed, its latest figures, the least
 * memory seen; the error event gives the root cause.
 */
export function readBootEvents(boot: Pick<BootView, "events" | "started_at">): BootFacts {
  const nodes = new Map<string, NodeAcc>();
  const of = (node: string): NodeAcc => nodes.get(node) ?? (nodes.set(node, { changes: [], figures: {} }).get(node) as NodeAcc);
  let start: number | undefined;
  let end: number | undefined;
  let error: PageEncodedError | undefined;
  for (const raw of boot.events) {
    const e = readBootEvent(raw);
    if (e === undefined) continue;
    start ??= e.t;
    if (e.type === "node") {
      const acc = of(e.node);
      if (acc.changes.at(-1)?.phase !== e.state.phase) acc.changes.push({ phase: e.state.phase, t: e.t });
      acc.figures = e.state.figures;
    } else if (e.type === "memory") {
      const acc = of(e.node);
      const m = acc.memory;
      acc.memory = { minAvailableKiB: Math.min(m?.minAvailableKiB ?? Infinity, e.sample.availableKiB), totalKiB: e.sample.totalKiB };
    } else if (e.type === "result" || e.type === "error") {
      end = e.t;
      if (e.type === "error") error = e.error;
      // A ready boot's head answered /health: its deployment serves, every rank of it, as status
      // judges a deployment whose head is healthy (src/nodes/status.ts judge). A headless worker's
      // log never says a serving line, and the head's may come after /health answers.
      else for (const acc of nodes.values()) if (acc.changes.length > 0 && acc.changes.at(-1)?.phase !== "serving") acc.changes.push({ phase: "serving", t: e.t, byResult: true });
    }
  }
  // A node the guard sampled but that failed before its log said a phase can still be the one blamed.
  const known = [...nodes.keys()];
  return {
    // The boot's accepted time: a page that kept only a long boot's newest events still starts the axis there.
    start: Number.isFinite(Date.parse(boot.started_at)) ? Math.min(Date.parse(boot.started_at), start ?? Infinity) : (start ?? 0),
    ...(end === undefined ? {} : { end }),
    nodes: [...nodes].filter(([, a]) => a.changes.length > 0).map(([node, a]) => ({ node, changes: a.changes, figures: a.figures, ...(a.memory === undefined ? {} : { memory: a.memory }) })),
    ...(error === undefined ? {} : { cause: rootCause(error, known) }),
  };
}

function rootCause(e: PageEncodedError, nodes: readonly string[]): RootCause {
  const bound = (lines: readonly string[]): string[] => lines.slice(0, LIMITS.causeLines).map(cut);
  switch (e.kind) {
    case "remote": {
      const node = e.blamed !== undefined && nodes.includes(e.blamed.node) ? e.blamed.node : undefined;
      return { ...(node === undefined ? {} : { node }), message: cut(`${e.node}: ${e.message}`), ...(e.hint === undefined ? {} : { hint: cut(e.hint) }), lines: bound(e.detail === undefined ? [] : e.detail.split("\n")) };
    }
    case "user":
      return { message: cut(e.message), ...(e.hint === undefined ? {} : { hint: cut(e.hint) }), lines: bound(e.diagnostics.flatMap((d) => formatDiagnostic(d).split("\n"))) };
    default:
      return { message: cut(errorMessage(e)), lines: [] };
  }
}

/** Ticks at a round step, at most about `most` of them, as fractions of the axis. */
export function axisTicks(spanMs: number, most = 6): { at: number; label: string }[] {
  if (!(spanMs > 0)) return [{ at: 0, label: "0 s" }];
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14_400, 43_200, 86_400];
  const seconds = spanMs / 1000;
  const step = steps.find((s) => seconds / s <= most) ?? Math.ceil(seconds / most / 86_400) * 86_400;
  const ticks: { at: number; label: string }[] = [];
  for (let s = 0; s * 1000 <= spanMs && ticks.length <= most; s += step) ticks.push({ at: (s * 1000) / spanMs, label: s === 0 ? "0 s" : duration(s) });
  return ticks;
}

/** The facts placed on one axis, boot start to its end (or to `now` while it runs). */
export function layoutBoot(facts: BootFacts, now: number): BootShape {
  const running = facts.end === undefined;
  const lastChange = facts.nodes.reduce((m, n) => Math.max(m, n.changes.at(-1)?.t ?? m), facts.start);
  const end = facts.end ?? Math.max(now, lastChange);
  const span = Math.max(end - facts.start, 1);
  const place = (t: number): number => Math.min(1, Math.max(0, (t - facts.start) / span));
  const nodes = facts.nodes.slice(0, LIMITS.nodes).map((n): NodeTimeline => {
    const segments = n.changes.map((c, i): PhaseSegment => {
      const next = n.changes[i + 1];
      const segEnd = next?.t ?? end;
      const before = n.changes[i - 1];
      const left = place(c.t);
      return { phase: c.phase, start: c.t, end: segEnd, running: running && next === undefined, restart: before !== undefined && phaseIndex(c.phase) < phaseIndex(before.phase), byResult: c.byResult === true, left, width: Math.max(0, place(segEnd) - left) };
    });
    const kept = segments.slice(-LIMITS.segments);
    const figures = Object.entries(n.figures).slice(0, LIMITS.figures).map(([k, v]) => [cut(k), cut(v)] as const);
    return { node: n.node, phase: n.changes.at(-1)?.phase ?? "starting", segments: kept, dropped: segments.length - kept.length, figures, ...(n.memory === undefined ? {} : { memory: n.memory }) };
  });
  return { start: facts.start, end, running, nodes, droppedNodes: facts.nodes.length - nodes.length, ticks: axisTicks(end - facts.start), ...(facts.cause === undefined ? {} : { cause: facts.cause }) };
}

// ---------------------------------------------------------------------------------------------
// Past boots of a recipe

export interface HistorySegment {
  readonly phase: string;
  readonly seconds: number;
  /** Fractions of the widest bar's total. */
  readonly left: number;
  readonly width: number;
}

export interface HistoryBar {
  readonly id: number;
  readonly started_at: string;
  readonly outcome: HistoryBoot["outcome"];
  /** The boot's seconds (start to end), else the sum of its phases while it runs. */
  readonly seconds: number;
  readonly head: string | undefined;
  readonly segments: readonly HistorySegment[];
  readonly error?: string;
}

export interface HistoryShape {
  readonly bars: readonly HistoryBar[];
  /** The phases drawn, in boot order: the legend. */
  readonly phases: readonly string[];
  /** Seconds the widest bar spans (the shared axis' end). */
  readonly scaleSeconds: number;
}

/**
 * The head node's phases of a boot (its first node: rank 0, whose API serves), as `launcher
 * history` shows them (src/cli/history.ts headPhases): serving is where the boot ends, so it is no
 * step. A phase with no end yet lasts to the boot's end, or counts 0 while the boot runs.
 */
function headSteps(b: HistoryBoot): { phase: string; seconds: number }[] {
  const head = b.nodes[0];
  const end = b.ended_at === undefined ? undefined : Date.parse(b.ended_at);
  return b.phases
    .filter((p) => p.node === head && p.phase !== "serving")
    .map((p) => ({ phase: p.phase, seconds: p.seconds ?? (end === undefined ? 0 : Math.max(0, (end - Date.parse(p.started_at)) / 1000)) }))
    .filter((p) => Number.isFinite(p.seconds));
}

/** A recipe's boots, newest first, at most LIMITS.historyBars of them, on one axis. */
export function shapeHistory(recipe: string, boots: readonly HistoryBoot[]): HistoryShape {
  const mine = boots.filter((b) => b.recipe === recipe);
  const newest = [...mine].sort((a, b) => Date.parse(b.started_at) - Date.parse(a.started_at)).slice(0, LIMITS.historyBars);
  const steps = newest.map(headSteps);
  const totals = newest.map((b, i) => b.seconds ?? (steps[i] ?? []).reduce((s, p) => s + p.seconds, 0));
  const scaleSeconds = Math.max(1, ...totals, ...steps.map((s) => s.reduce((sum, p) => sum + p.seconds, 0)));
  const bars = newest.map((b, i): HistoryBar => {
    let at = 0;
    const segments = (steps[i] ?? []).map((p) => {
      const seg = { phase: p.phase, seconds: p.seconds, left: at / scaleSeconds, width: p.seconds / scaleSeconds };
      at += p.seconds;
      return seg;
    });
    return { id: b.id, started_at: b.started_at, outcome: b.outcome, seconds: totals[i] ?? 0, head: b.nodes[0], segments, ...(b.error === undefined ? {} : { error: cut(b.error) }) };
  });
  const seen = new Set(steps.flat().map((p) => p.phase));
  const phases = [...BOOT_PHASES.filter((p) => seen.has(p)), ...[...seen].filter((p) => phaseIndex(p) < 0).sort()];
  return { bars, phases, scaleSeconds };
}

// ---------------------------------------------------------------------------------------------
// Engine metrics

export const CHART_METRICS = ["generation_tps", "kv_cache_usage", "queue", "ttft"] as const;
export type ChartMetric = (typeof CHART_METRICS)[number];

type PointKey = Exclude<keyof MetricsPoint, "t">;
interface ChartSpec {
  readonly title: string;
  readonly unit: string;
  /** The lines, each a field of the metrics points (ttft: of the activity records). */
  readonly series: readonly { readonly key: PointKey; readonly label: string; readonly scale?: number }[];
  /** Drawn as points (one per request), never joined. */
  readonly pointsOnly?: true;
}

export const CHART_SPECS: Readonly<Record<ChartMetric, ChartSpec>> = {
  generation_tps: { title: "Throughput", unit: "tok/s", series: [{ key: "generation_tps", label: "generation" }, { key: "prompt_tps", label: "prompt" }] },
  kv_cache_usage: { title: "KV cache in use", unit: "%", series: [{ key: "kv_cache_usage", label: "KV cache", scale: 100 }] },
  queue: { title: "Requests", unit: "requests", series: [{ key: "requests_running", label: "running" }, { key: "requests_waiting", label: "waiting" }] },
  ttft: { title: "Time to first token", unit: "ms", series: [], pointsOnly: true },
};

export const CHART_WINDOW_MS = 60 * 60 * 1000;
/** A pause between samples longer than this many typical intervals is drawn as a gap, not a line across it. */
export const GAP_FACTOR = 3;

/** uPlot's aligned columns: x in seconds since the epoch (uPlot's time scale), then one column per series. */
export type Columns = [number[], ...(number | null)[][]];

export interface ChartShape {
  readonly columns: Columns;
  /** The samples drawn (gap markers not counted). */
  readonly points: number;
}

/** The last hour before the newest sample, in time order, at most LIMITS.chartPoints of the newest. */
export function lastHour<T extends { readonly t: number }>(items: readonly T[]): T[] {
  const sorted = items.filter((p) => Number.isFinite(p.t)).sort((a, b) => a.t - b.t);
  const newest = sorted.at(-1)?.t;
  if (newest === undefined) return [];
  return sorted.filter((p) => p.t >= newest - CHART_WINDOW_MS).slice(-LIMITS.chartPoints);
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

/** A chart's columns from the metrics window (or, for ttft, the requests). */
export function chartColumns(metric: ChartMetric, points: readonly MetricsPoint[], activity: readonly ActivityRecord[]): ChartShape {
  if (metric === "ttft") {
    const requests = lastHour(activity.filter((r) => r.ttft_ms !== undefined && Number.isFinite(r.ttft_ms)));
    return { columns: [requests.map((r) => r.t / 1000), requests.map((r) => r.ttft_ms as number)], points: requests.length };
  }
  const spec = CHART_SPECS[metric];
  const value = (p: MetricsPoint, key: PointKey, scale: number): number | null => {
    const v = p[key];
    return v === undefined || !Number.isFinite(v) ? null : v * scale;
  };
  const window = lastHour(points.filter((p) => spec.series.some((s) => p[s.key] !== undefined)));
  const gaps = window.slice(1).map((p, i) => p.t - (window[i] as MetricsPoint).t);
  const gapMs = window.length >= 3 ? GAP_FACTOR * median(gaps) : Infinity;
  const xs: number[] = [];
  const ys: (number | null)[][] = spec.series.map(() => []);
  window.forEach((p, i) => {
    // A null row between two samples far apart: uPlot breaks the line there (spanGaps is off).
    if (i > 0 && (gaps[i - 1] as number) > gapMs) {
      xs.push((p.t + (window[i - 1] as MetricsPoint).t) / 2000);
      for (const col of ys) col.push(null);
    }
    xs.push(p.t / 1000);
    spec.series.forEach((s, j) => (ys[j] as (number | null)[]).push(value(p, s.key, s.scale ?? 1)));
  });
  return { columns: [xs, ...ys], points: window.length };
}

// ---------------------------------------------------------------------------------------------
// Stored runs: bench series and evals

/** The panels, left to right: vLLM's keys (src/contract/evidence.ts ServeResult), as `compare --plot` draws them. */
export const RUN_PANELS = [
  { key: "output_throughput", title: "Output throughput", unit: "tok/s", higherIsBetter: true },
  { key: "mean_ttft_ms", title: "TTFT, mean", unit: "ms", higherIsBetter: false },
  { key: "mean_tpot_ms", title: "Time per output token, mean", unit: "ms", higherIsBetter: false },
] as const satisfies readonly { key: keyof ServeResult; title: string; unit: string; higherIsBetter: boolean }[];
export type RunPanelKey = (typeof RUN_PANELS)[number]["key"];

/** One series at one concurrency: the mean over its runs, their spread, and each run's value. */
export interface RunPoint {
  readonly concurrency: number;
  /** Fraction across the panel (the concurrencies are evenly spaced categories). */
  readonly x: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
  readonly values: readonly number[];
}

export interface BenchSeriesShape {
  readonly series: string;
  /** What was benched: its recipe, else its deployment, else the target as named. */
  readonly subject: string;
  readonly started_at: string;
  readonly runs: number;
  readonly failed: number;
  readonly points: Readonly<Record<RunPanelKey, readonly RunPoint[]>>;
}

export interface EvalShape {
  readonly id: string;
  readonly subject: string;
  readonly started_at: string;
  readonly correct: number;
  readonly total: number;
  readonly set: string;
  readonly setHash: string;
}

export interface RunsShape {
  readonly series: readonly BenchSeriesShape[];
  readonly evals: readonly EvalShape[];
  readonly concurrencies: readonly number[];
  /** Each panel's top value (its axis' end). */
  readonly yMax: Readonly<Record<RunPanelKey, number>>;
  /** What tells the subjects apart, one line each, the first subject the reference. */
  readonly summary: readonly string[];
  /** Runs drawn: bench runs of the drawn series and the evals drawn. */
  readonly drawn: number;
}

const subjectOf = (s: RunSubject): string => cut(s.recipe ?? s.deployment ?? s.target);

function seriesPoints(runs: readonly BenchRun[], key: RunPanelKey, concurrencies: readonly number[]): RunPoint[] {
  const band = (c: number): number => (concurrencies.indexOf(c) + 0.5) / Math.max(1, concurrencies.length);
  return concurrencies.flatMap((c) => {
    const values = runs.flatMap((r) => r.results.filter((x) => x.max_concurrency === c).map((x) => x[key]).filter((v) => Number.isFinite(v)));
    if (values.length === 0) return [];
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    return [{ concurrency: c, x: band(c), mean, min: Math.min(...values), max: Math.max(...values), values }];
  });
}

/** The bench runs grouped by series (in the answer's order), at most LIMITS.benchSeries. */
function benchSeries(bench: readonly BenchRun[]): { shapes: BenchSeriesShape[]; concurrencies: number[]; drawn: number } {
  const groups = new Map<string, BenchRun[]>();
  for (const r of bench) if (groups.has(r.series) || groups.size < LIMITS.benchSeries) groups.set(r.series, [...(groups.get(r.series) ?? []), r]);
  const runs = [...groups.values()];
  const concurrencies = [...new Set(runs.flat().flatMap((r) => r.results.map((x) => x.max_concurrency)))].filter(Number.isFinite).sort((a, b) => a - b).slice(0, 32);
  const shapes = runs.map((rs): BenchSeriesShape => {
    const first = rs[0] as BenchRun;
    const points = Object.fromEntries(RUN_PANELS.map((p) => [p.key, seriesPoints(rs, p.key, concurrencies)])) as Record<RunPanelKey, RunPoint[]>;
    return { series: first.series, subject: subjectOf(first.subject), started_at: first.started_at, runs: rs.length, failed: rs.reduce((s, r) => s + r.results.reduce((f, x) => f + x.failed, 0), 0), points };
  });
  return { shapes, concurrencies, drawn: runs.reduce((s, rs) => s + rs.length, 0) };
}

const signed = (n: number, digits = 0): string => `${n > 0 ? "+" : n < 0 ? "−" : "±"}${Math.abs(n).toFixed(digits)}`;
const tokS = (v: number): string => `${v < 10 ? v.toFixed(1) : Math.round(v)} tok/s`;

/** A series' mean output throughput at a concurrency. */
const throughputAt = (s: BenchSeriesShape | undefined, c: number): number | undefined => s?.points.output_throughput.find((p) => p.concurrency === c)?.mean;

/** How one subject's throughput at concurrency `c` reads beside the reference's. */
function throughputWords(c: number, mine: number | undefined, ref: number | undefined): string[] {
  if (mine === undefined) return [];
  const where = c === 1 ? "single-stream" : `at ${c} concurrent`;
  const pct = ref === undefined || ref === 0 ? "" : ` (${signed(((mine - ref) / ref) * 100)} %)`;
  return [`${where} ${tokS(mine)}${pct}`];
}

/**
 * One line per subject (its newest series and newest eval), the first subject the reference the
 * others are read against: `B: 158/176 (−9) · single-stream 41 tok/s (−12 %)`. An eval is only
 * set beside one of the same set (its SHA-256), and a concurrency only beside the same one.
 */
function summarize(series: readonly BenchSeriesShape[], evals: readonly EvalShape[]): string[] {
  const subjects = [...new Set([...series.map((s) => s.subject), ...evals.map((e) => e.subject)])];
  const newest = (subject: string): { s: BenchSeriesShape | undefined; e: EvalShape | undefined } => ({ s: series.find((x) => x.subject === subject), e: evals.find((x) => x.subject === subject) });
  const ref = subjects[0] === undefined ? undefined : newest(subjects[0]);
  return subjects.slice(0, LIMITS.benchSeries + LIMITS.evals).map((subject, i) => {
    const { s, e } = newest(subject);
    const against = i === 0 ? undefined : ref;
    const parts: string[] = [];
    if (e !== undefined) {
      const same = against?.e !== undefined && against.e.setHash === e.setHash;
      parts.push(`${e.correct}/${e.total}${same ? ` (${signed(e.correct - (against.e as EvalShape).correct)})` : ""}`);
    }
    const levels = s === undefined ? [] : s.points.output_throughput.map((p) => p.concurrency);
    const shown = [...new Set([levels[0], levels.at(-1)])].filter((c): c is number => c !== undefined);
    for (const c of shown) parts.push(...throughputWords(c, throughputAt(s, c), throughputAt(against?.s, c)));
    return `${subject}${i === 0 ? "" : ` vs ${subjects[0] as string}`}: ${parts.length > 0 ? parts.join(" · ") : "no figures"}`;
  });
}

/** Stored runs as the runs view draws them: bench series across concurrencies, evals as correct/total. */
export function shapeRuns(runs: RunsAnswer): RunsShape {
  const { shapes, concurrencies, drawn } = benchSeries(runs.bench);
  const evals = runs.evals.slice(0, LIMITS.evals).map((e): EvalShape => ({ id: e.id, subject: subjectOf(e.subject), started_at: e.started_at, correct: e.correct, total: e.total, set: cut(e.set.path), setHash: e.set.sha256 }));
  const yMax = Object.fromEntries(RUN_PANELS.map((p) => [p.key, Math.max(0, ...shapes.flatMap((s) => s.points[p.key].map((x) => x.max)))])) as Record<RunPanelKey, number>;
  return { series: shapes, evals, concurrencies, yMax, summary: summarize(shapes, evals), drawn: drawn + evals.length };
}
