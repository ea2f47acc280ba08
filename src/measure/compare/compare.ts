/**
 * `launcher compare`'s verdict: two sides' stored evidence (a bench series, an eval run) in, one
 * comparison out, with each difference called only where it exceeds the spread (stats.ts says
 * which test and why). Pure; the table, markdown, JSON and plot are all drawn from its result.
 */
import { completedIndexes, type BenchRun, type BenchWorkload, type BootFigures, type EvalRun, type ServeResult } from "../../contract/evidence.js";
import { tpotOf } from "../bench/metrics.js";
import { bonferroniConfidence, bootstrapInterval, CONFIDENCE, FAMILY_CORRECTION, mcnemarExact, mean, sd, welchInterval, type DifferenceInterval, type McNemar } from "./stats.js";

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

/**
 * A per-request list's completed requests only, in ms: a failed request is kept as 0 s in the
 * record (vLLM's defaults) and would otherwise count as the fastest request of all.
 */
const completedMs = (r: ServeResult, seconds: readonly number[]): number[] => completedIndexes(r).flatMap((i) => (seconds[i] === undefined ? [] : [(seconds[i] as number) * 1000]));

/** TPOT per completed request, by vLLM's rule (bench's tpotOf), in ms. */
const tpots = (r: ServeResult): number[] =>
  completedIndexes(r).flatMap((i) => {
    const [latency, ttft, len] = [r.latencies[i], r.ttfts[i], r.output_lens[i]];
    return latency === undefined || ttft === undefined || len === undefined ? [] : tpotOf(latency * 1000, ttft * 1000, len);
  });

/** The rows compared per concurrency, in the table's order (vLLM's keys; a metric no run reports is left out). */
export const COMPARED_METRICS: readonly MetricSpec[] = [
  { key: "output_throughput", label: "output tok/s", higherIsBetter: true, speed: true, digits: 1 },
  { key: "request_throughput", label: "requests/s", higherIsBetter: true, speed: true, digits: 2 },
  { key: "mean_ttft_ms", label: "TTFT mean ms", higherIsBetter: false, speed: true, digits: 1, perRequest: (r) => completedMs(r, r.ttfts) },
  { key: "p99_ttft_ms", label: "TTFT p99 ms", higherIsBetter: false, speed: true, digits: 1 },
  { key: "mean_tpot_ms", label: "TPOT mean ms", higherIsBetter: false, speed: true, digits: 2, perRequest: tpots },
  { key: "mean_e2el_ms", label: "E2E mean ms", higherIsBetter: false, speed: true, digits: 1, perRequest: (r) => completedMs(r, r.latencies) },
  { key: "spec_decode_acceptance_rate", label: "spec-decode acceptance %", higherIsBetter: true, speed: false, digits: 1 },
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
  /** Why the row has no interval (and so "no spread"). */
  readonly no_interval?: string;
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

/** How a row's interval is had, decided before any is computed (the family's size sets each one's confidence). */
type Plan = { readonly method: "welch" } | { readonly method: "bootstrap"; readonly a: number[]; readonly b: number[] } | { readonly method: "none"; readonly why: string };

/**
 * Welch over runs when both sides have two runs or more; the bootstrap over completed requests
 * when both have one run and kept them; never a pool of one side's runs against the other's one
 * run (that would put run-to-run spread on one side only).
 */
function planFor(spec: MetricSpec, a: readonly ServeResult[], b: readonly ServeResult[]): Plan {
  if (a.length >= 2 && b.length >= 2) return { method: "welch" };
  if (a.length !== b.length) return { method: "none", why: `one side has ${Math.min(a.length, b.length)} run, the other ${Math.max(a.length, b.length)}: bench the one-run side with --runs 2 or more` };
  if (spec.perRequest === undefined) return { method: "none", why: "one run a side, run bench --runs 2 or more" };
  const ar = a.flatMap(spec.perRequest);
  const br = b.flatMap(spec.perRequest);
  if (ar.length < 2 || br.length < 2) return { method: "none", why: "fewer than two completed requests on a side" };
  return { method: "bootstrap", a: ar, b: br };
}

function intervalOf(plan: Plan, av: readonly number[], bv: readonly number[], tests: number): DifferenceInterval | undefined {
  const confidence = bonferroniConfidence(tests);
  const correction = { method: FAMILY_CORRECTION, intervals: tests, family_confidence: CONFIDENCE } as const;
  if (plan.method === "welch") return { ...welchInterval(av, bv, confidence), correction };
  if (plan.method === "bootstrap") return { ...bootstrapInterval(plan.a, plan.b, confidence), correction };
  return undefined;
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

/** One row to compare: its values over runs and how its interval will be had. */
interface PlannedRow {
  readonly spec: MetricSpec;
  readonly concurrency: number;
  readonly av: number[];
  readonly bv: number[];
  readonly plan: Plan;
}

function planRow(spec: MetricSpec, c: number, a: readonly ServeResult[], b: readonly ServeResult[]): PlannedRow | undefined {
  const values = (rs: readonly ServeResult[]): number[] =>
    rs.flatMap((r) => {
      const v = r[spec.key];
      return typeof v === "number" ? [v] : [];
    });
  const av = values(a);
  const bv = values(b);
  if (av.length === 0 || bv.length === 0) return undefined;
  // The runs that have this metric (a run without the spec-decode counters has none).
  const withValue = (rs: readonly ServeResult[]): ServeResult[] => rs.filter((r) => typeof r[spec.key] === "number");
  return { spec, concurrency: c, av, bv, plan: planFor(spec, withValue(a), withValue(b)) };
}

function compareRow(row: PlannedRow, tests: number): MetricComparison {
  const { spec, av, bv } = row;
  const interval = intervalOf(row.plan, av, bv, tests);
  const as = spreadOf(av);
  const bs = spreadOf(bv);
  return {
    concurrency: row.concurrency,
    metric: spec.key,
    label: spec.label,
    digits: spec.digits,
    a: as,
    b: bs,
    ...(as.mean === 0 ? {} : { change: (bs.mean - as.mean) / as.mean }),
    ...(interval === undefined ? {} : { interval }),
    ...(row.plan.method === "none" ? { no_interval: row.plan.why } : {}),
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
  const planned: PlannedRow[] = [];
  const requests: RequestCounts[] = [];
  for (const c of shared) {
    const ra = resultsAt(a.bench, c);
    const rb = resultsAt(b.bench, c);
    requests.push({ concurrency: c, a: counts(ra), b: counts(rb) });
    if (ra.length !== rb.length && (ra.length < 2 || rb.length < 2)) {
      warnings.push(`concurrency ${c}: A has ${ra.length} run(s), B ${rb.length}: one run is not pooled against several, so speed is not called there (bench the one-run side with --runs 2 or more)`);
    }
    for (const spec of COMPARED_METRICS) {
      const row = planRow(spec, c, ra, rb);
      if (row !== undefined) planned.push(row);
    }
  }
  // Every interval of the table is one of a family: Bonferroni over the rows that get one.
  const tests = planned.filter((r) => r.plan.method !== "none").length;
  const bench = planned.map((r) => compareRow(r, tests));
  if (tests > 1) warnings.push(`the ${tests} bench intervals are Bonferroni-corrected (each at ${Number((bonferroniConfidence(tests) * 100).toFixed(1))}%), so that all of them together hold at ${CONFIDENCE * 100}%`);
  const ev = a.eval !== undefined && b.eval !== undefined ? compareEval(a.eval, b.eval, warnings) : undefined;
  if ((a.eval === undefined) !== (b.eval === undefined)) warnings.push(`only ${a.eval === undefined ? "B" : "A"} has an eval run: answers are not compared`);
  return { a: summarize(a), b: summarize(b), bench, requests, ...(ev === undefined ? {} : { eval: ev }), warnings };
}
