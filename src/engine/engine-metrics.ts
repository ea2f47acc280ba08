import type { MetricsPoint } from "../contract/read-api.js";
import type { EngineMetricNames } from "./adapter.js";

/** The figures of one scrape, as the engine's series give them (counters as their running totals). */
export type EngineFigure = keyof EngineMetricNames;
export type EngineSample = Readonly<Partial<Record<EngineFigure, number>>>;

/** Gauges: read as they are. KV cache usage is a share, averaged over its series rather than summed. */
const AVERAGED: ReadonlySet<EngineFigure> = new Set(["kvCacheUsage"]);

/** Prometheus's text exposition format writes these for the floats a number cannot spell. */
const SPECIAL: Readonly<Record<string, number>> = { "+Inf": Infinity, "-Inf": -Infinity, Inf: Infinity, NaN: Number.NaN };

/**
 * Where a sample line's labels end (the index after `}`), honouring quoted label values and their
 * escapes; -1 when they never close. Label values are the engine's text (a served model name may
 * hold `}`), so a `}` inside quotes does not end them.
 */
function labelsEnd(line: string, open: number): number {
  let quoted = false;
  for (let i = open + 1; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === "}") return i + 1;
  }
  return -1;
}

/**
 * One sample line of the text format (`name{labels} value [timestamp]`,
 * https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format): its metric name
 * and value, or undefined for a comment, a blank or a line that is not a sample.
 */
export function sampleLine(line: string): { readonly name: string; readonly value: number } | undefined {
  if (line === "" || line.startsWith("#")) return undefined;
  const brace = line.indexOf("{");
  const space = line.indexOf(" ");
  let nameEnd: number;
  let rest: number;
  if (brace !== -1 && (space === -1 || brace < space)) {
    nameEnd = brace;
    rest = labelsEnd(line, brace);
    if (rest === -1) return undefined;
  } else {
    if (space === -1) return undefined;
    nameEnd = space;
    rest = space;
  }
  const words = line.slice(rest).trim().split(/\s+/);
  const word = words[0] ?? "";
  const value = SPECIAL[word] ?? (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(word) ? Number(word) : undefined);
  return value === undefined ? undefined : { name: line.slice(0, nameEnd), value };
}

/**
 * The figures one /metrics text gives, by the adapter's names: of each figure's names the first
 * the text has, its series summed (averaged for a share). A figure with no series, or with a
 * value that is not a finite number, is left out. Pure: the scraper bounds the text it passes.
 */
export function readEngineSample(text: string, names: EngineMetricNames): EngineSample {
  const wanted = new Map<string, number[]>();
  for (const list of Object.values(names) as (readonly string[])[]) for (const n of list) wanted.set(n, []);
  for (const raw of text.split("\n")) {
    const s = sampleLine(raw.trim());
    if (s !== undefined && Number.isFinite(s.value)) wanted.get(s.name)?.push(s.value);
  }
  const out: Partial<Record<EngineFigure, number>> = {};
  for (const [figure, list] of Object.entries(names) as [EngineFigure, readonly string[]][]) {
    const values = list.map((n) => wanted.get(n) ?? []).find((v) => v.length > 0);
    if (values === undefined) continue;
    const sum = values.reduce((a, v) => a + v, 0);
    const value = AVERAGED.has(figure) ? sum / values.length : sum;
    // Finite series can still sum past a double (a hostile or broken /metrics): left out.
    if (Number.isFinite(value)) out[figure] = value;
  }
  return out;
}

/** A sample and when it was taken (ms on the scraper's clock). */
export interface TimedSample {
  readonly at: number;
  readonly figures: EngineSample;
}

/**
 * How much a counter grew between two scrapes. A counter that went down was reset (the engine
 * restarted): it counted from 0 since, so its growth is its new value, as Prometheus's rate()
 * reads a reset. Undefined when either scrape lacks it.
 */
export function counterGrowth(before: number | undefined, after: number | undefined): number | undefined {
  if (before === undefined || after === undefined) return undefined;
  return after >= before ? after - before : after;
}

/** A point's figures (src/contract/read-api.ts MetricsPoint without its time): a figure the engine did not give is absent. */
export type EnginePointFigures = Omit<MetricsPoint, "t">;

/**
 * The point `after` makes, with `before` (the scrape just before it, if any) for what it counts
 * between them: tokens per second and preemptions since `before`, and speculative acceptance as
 * accepted / drafted tokens since `before` (vLLM's own definition: vllm/v1/spec_decode/metrics.py,
 * rate(accepted) / rate(drafted)); absent on a first scrape, and acceptance when nothing was drafted.
 */
export function pointBetween(before: TimedSample | undefined, after: TimedSample): EnginePointFigures {
  const a = after.figures;
  const b = before?.figures ?? {};
  const secs = before === undefined ? 0 : (after.at - before.at) / 1000;
  const grew = (figure: EngineFigure): number | undefined => (before === undefined ? undefined : counterGrowth(b[figure], a[figure]));
  const perSecond = (figure: EngineFigure): number | undefined => {
    const n = grew(figure);
    return n === undefined || secs <= 0 ? undefined : n / secs;
  };
  const drafted = grew("specDrafted");
  const accepted = grew("specAccepted");
  const figures: Record<keyof EnginePointFigures, number | undefined> = {
    kv_cache_usage: a.kvCacheUsage,
    requests_running: a.requestsRunning,
    requests_waiting: a.requestsWaiting,
    prompt_tps: perSecond("promptTokens"),
    generation_tps: perSecond("generationTokens"),
    preemptions: grew("preemptions"),
    spec_acceptance: drafted === undefined || accepted === undefined || drafted <= 0 ? undefined : Math.min(1, accepted / drafted),
  };
  return Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined && Number.isFinite(v))) as EnginePointFigures;
}
