/**
 * `launcher compare`'s verdict: two sides' stored evidence (a bench series, an eval run) in, one
 * comparison out, with each difference called only where it exceeds the spread (stats.ts says
 * which test and why). Pure; the table, markdown, JSON and plot are all drawn from its result.
 */
import type { BenchRun, BenchWorkload, BootFigures, EvalRun, ServeResult } from "../evidence/records.js";
import { bootstrapInterval, mcnemarExact, mean, sd, welchInterval, type DifferenceInterval, type McNemar } from "./stats.js";

/** What one side of a comparison brings: one bench series (its runs) and/or one eval run. */
export interface Evidence {
  /** As the user named it (a recipe, deployment, lane or stored run id). */
  readonly label: string;
  readonly bench: readonly BenchRun[];
  readonly eval?: EvalRun;
}

/**
 * What a difference was called. Speed metrics are `faster`/`slower`, the others
 * `better`/`worse`, always of B against A; `no spread` when neither side has what an interval
 * needs (one run and no per-request samples of that metric).
 */
export const VERDICTS = ["faster", "slower", "better", "worse", "within noise", "no spread"] as const;
export type Verdict = (typeof VERDICTS)[number];

/** The keys of a result that hold one number (vLLM's metrics, not the per-request lists). */
type ResultKey = { [K in keyof ServeResult]-?: ServeResult[K] extends number | undefined ? K : never }[keyof ServeResult];

interface MetricSpec {
  readonly key: ResultKey;
  readonly label: string;
  readonly higherIsBetter: boolean;
  /** Whether a difference is speed (faster/slower) or something else (better/worse). */
  readonly speed: boolean;
  readonly digits: number;
  /** The metric's per-request samples, in its unit, for the bootstrap when a side has one run. */
  readonly perRequest?: (r: ServeResult) => number[];
}

const ms = (seconds: readonly number[]): number[] => seconds.map((s) => s * 1000);

/** TPOT per request as vLLM computes it: (e2el - ttft) / (output tokens - 1), for requests with more than one token. */
function tpots(r: ServeResult): number[] {
  const out: number[] = [];
  r.e2els.forEach((e2el, i) => {
    const ttft = r.ttfts[i];
    const len = r.output_lens[i];
    if (ttft !== undefined && len !== undefined && len > 1) out.push(((e2el - ttft) / (len - 1)) * 1000);
  });
  return out;
}

/** The rows compared per concurrency, in the table's order (vLLM's keys; a metric no run reports is left out). */
export const COMPARED_METRICS: readonly MetricSpec[] = [
  { key: "output_throughput", label: "output tok/s", higherIsBetter: true, speed: true, digits: 1 },
  { key: "request_throughput", label: "requests/s", higherIsBetter: true, speed: true, digits: 2 },
  { key: "mean_ttft_ms", label: "TTFT mean ms", higherIsBetter: false, speed: true, digits: 1, perRequest: (r) => ms(r.ttfts) },
  { key: "p99_ttft_ms", label: "TTFT p99 ms", higherIsBetter: false, speed: true, digits: 1 },
  { key: "mean_tpot_ms", label: "TPOT mean ms", higherIsBetter: false, speed: true, digits: 2, perRequest: tpots },
  { key: "mean_e2el_ms", label: "E2E mean ms", higherIsBetter: false, speed: true, digits: 1, perRequest: (r) => ms(r.e2els) },
  { key: "spec_decode_acceptance_rate", label: "spec-decode acceptance", higherIsBetter: true, speed: false, digits: 3 },
];

/** One side's value of a metric at one concurrency: over its runs. */
export interface Spread {
  readonly mean: number;
  /** Sample standard deviation over runs (0 with one run). */
  readonly sd: number;
  readonly runs: number;
  readonly values: readonly number[];
}

export interface MetricComparison {
  readonly concurrency: number;
  readonly metric: ResultKey;
  readonly label: string;
  readonly digits: number;
  readonly a: Spread;
  readonly b: Spread;
  /** (b - a) / a, when a is not 0. */
  readonly change?: number;
  readonly interval?: DifferenceInterval;
  readonly verdict: Verdict;
}

/** Requests per concurrency, summed over a side's runs: failures are shown, never hidden. */
export interface RequestCounts {
  readonly concurrency: number;
  readonly a: { readonly completed: number; readonly failed: number };
  readonly b: { readonly completed: number; readonly failed: number };
}

export interface EvalComparison {
  readonly a: { readonly id: string; readonly correct: number; readonly total: number };
  readonly b: { readonly id: string; readonly correct: number; readonly total: number };
  /** McNemar's exact test on the items both answered (same id and expected answer). */
  readonly test: McNemar;
  readonly verdict: Verdict;
}

/** What launcher knows of what served a side. */
export interface SideSummary {
  readonly label: string;
  readonly target?: string;
  readonly deployment?: string;
  readonly recipe?: string;
  readonly recipe_hash?: string;
  readonly engine_version?: string;
  readonly boot?: BootFigures;
  readonly series?: string;
  readonly runs: number;
  readonly workload?: BenchWorkload;
  /** The eval run compared, and its question set. */
  readonly eval_run?: { readonly id: string; readonly set: string };
}

export interface Comparison {
  readonly a: SideSummary;
  readonly b: SideSummary;
  readonly bench: readonly MetricComparison[];
  readonly requests: readonly RequestCounts[];
  readonly eval?: EvalComparison;
  /** What makes the comparison weaker than it looks (different workloads, sets, concurrencies). */
  readonly warnings: readonly string[];
}

function summarize(e: Evidence): SideSummary {
  const first = e.bench[0];
  const subject = first?.subject ?? e.eval?.subject;
  return {
    label: e.label,
    ...(subject === undefined ? {} : subject),
    ...(first === undefined ? {} : { series: first.series, workload: first.workload }),
    runs: e.bench.length,
    ...(e.eval === undefined ? {} : { eval_run: { id: e.eval.id, set: e.eval.set.path } }),
  };
}

/** Each run's result at a concurrency (a run without that level gives none). */
const resultsAt = (runs: readonly BenchRun[], c: number): ServeResult[] =>
  runs.flatMap((r) => r.results.filter((x) => x.max_concurrency === c));

const spreadOf = (values: readonly number[]): Spread => ({ mean: mean(values), sd: sd(values), runs: values.length, values });

/** The interval a metric gets: Welch over runs when both sides have two, else the bootstrap over requests when both kept them. */
function intervalFor(spec: MetricSpec, a: readonly ServeResult[], b: readonly ServeResult[], av: readonly number[], bv: readonly number[]): DifferenceInterval | undefined {
  if (av.length >= 2 && bv.length >= 2) return welchInterval(av, bv);
  if (spec.perRequest === undefined) return undefined;
  const ar = a.flatMap(spec.perRequest);
  const br = b.flatMap(spec.perRequest);
  return ar.length >= 2 && br.length >= 2 ? bootstrapInterval(ar, br) : undefined;
}

function verdictOf(spec: Pick<MetricSpec, "higherIsBetter" | "speed">, interval: DifferenceInterval | undefined): Verdict {
  if (interval === undefined || Number.isNaN(interval.low) || Number.isNaN(interval.high)) return "no spread";
  const up = interval.low > 0;
  const down = interval.high < 0;
  if (!up && !down) return "within noise";
  const better = up === spec.higherIsBetter;
  if (spec.speed) return better ? "faster" : "slower";
  return better ? "better" : "worse";
}

function compareMetric(spec: MetricSpec, c: number, a: readonly ServeResult[], b: readonly ServeResult[]): MetricComparison | undefined {
  const values = (rs: readonly ServeResult[]): number[] =>
    rs.flatMap((r) => {
      const v = r[spec.key];
      return typeof v === "number" ? [v] : [];
    });
  const av = values(a);
  const bv = values(b);
  if (av.length === 0 || bv.length === 0) return undefined;
  const interval = intervalFor(spec, a, b, av, bv);
  const as = spreadOf(av);
  const bs = spreadOf(bv);
  return {
    concurrency: c,
    metric: spec.key,
    label: spec.label,
    digits: spec.digits,
    a: as,
    b: bs,
    ...(as.mean === 0 ? {} : { change: (bs.mean - as.mean) / as.mean }),
    ...(interval === undefined ? {} : { interval }),
    verdict: verdictOf(spec, interval),
  };
}

const concurrencies = (runs: readonly BenchRun[]): Set<number> => new Set(runs.flatMap((r) => r.results.map((x) => x.max_concurrency)));

function counts(rs: readonly ServeResult[]): { completed: number; failed: number } {
  return { completed: rs.reduce((s, r) => s + r.completed, 0), failed: rs.reduce((s, r) => s + r.failed, 0) };
}

/** Items pair when both runs have them under one id with one expected answer, and both got an answer. */
function compareEval(a: EvalRun, b: EvalRun, warnings: string[]): EvalComparison {
  if (a.set.sha256 !== b.set.sha256) {
    warnings.push(`the eval runs used different sets (${a.set.path} ${a.set.sha256.slice(0, 12)}, ${b.set.path} ${b.set.sha256.slice(0, 12)}): only items with the same id and expected answer are paired`);
  }
  const inB = new Map(b.items.map((i) => [i.id, i]));
  const pairs: Array<readonly [boolean, boolean]> = [];
  for (const x of a.items) {
    const y = inB.get(x.id);
    if (y === undefined || y.expected !== x.expected || x.answer === undefined || y.answer === undefined) continue;
    pairs.push([x.correct, y.correct]);
  }
  const test = mcnemarExact(pairs);
  const verdict: Verdict = test.paired === 0 ? "no spread" : test.p >= 0.05 ? "within noise" : test.b_only > test.a_only ? "better" : "worse";
  return { a: { id: a.id, correct: a.correct, total: a.total }, b: { id: b.id, correct: b.correct, total: b.total }, test, verdict };
}

const describeWorkload = (w: BenchWorkload): string => JSON.stringify({ ...w, concurrencies: undefined });

export function compare(a: Evidence, b: Evidence): Comparison {
  const warnings: string[] = [];
  const ca = concurrencies(a.bench);
  const cb = concurrencies(b.bench);
  const shared = [...ca].filter((c) => cb.has(c)).sort((x, y) => x - y);
  const onlyOne = [...new Set([...ca, ...cb])].filter((c) => !(ca.has(c) && cb.has(c))).sort((x, y) => x - y);
  if (onlyOne.length > 0) warnings.push(`concurrency ${onlyOne.join(", ")} was measured on one side only: not compared`);
  const wa = a.bench[0]?.workload;
  const wb = b.bench[0]?.workload;
  if (wa !== undefined && wb !== undefined && describeWorkload(wa) !== describeWorkload(wb)) {
    warnings.push(`the two bench series sent different workloads (A ${describeWorkload(wa)}, B ${describeWorkload(wb)}): their speeds are not like for like`);
  }
  const bench: MetricComparison[] = [];
  const requests: RequestCounts[] = [];
  for (const c of shared) {
    const ra = resultsAt(a.bench, c);
    const rb = resultsAt(b.bench, c);
    requests.push({ concurrency: c, a: counts(ra), b: counts(rb) });
    for (const spec of COMPARED_METRICS) {
      const m = compareMetric(spec, c, ra, rb);
      if (m !== undefined) bench.push(m);
    }
  }
  const ev = a.eval !== undefined && b.eval !== undefined ? compareEval(a.eval, b.eval, warnings) : undefined;
  if ((a.eval === undefined) !== (b.eval === undefined)) warnings.push(`only ${a.eval === undefined ? "B" : "A"} has an eval run: answers are not compared`);
  return { a: summarize(a), b: summarize(b), bench, requests, ...(ev === undefined ? {} : { eval: ev }), warnings };
}
