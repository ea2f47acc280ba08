/**
 * The tests `launcher compare` calls a difference with (issue 14: "a difference is called only
 * when it exceeds the run-to-run spread"). Pure: numbers in, an interval or a p-value out.
 *
 * - Speed, two or more runs a side: Welch's two-sample t interval on the per-run values (each run
 *   of a series is one independent measurement; Welch because the two configurations need not
 *   have the same run-to-run variance). stdlib's ttest2 with `variance: "unequal"`.
 * - Speed, one run on a side (no run-to-run spread to speak of): a percentile bootstrap of the
 *   difference of means over the per-request samples that run kept (ttfts, e2els), resampling each
 *   side's requests with replacement from a seeded generator, so a comparison prints the same
 *   interval every time. This sees only request-to-request spread within one run, and says so.
 *   With one run on one side and several on the other, nothing is pooled: the row has no interval
 *   ("no spread") and a warning says why (pooling would put the runs' spread on one side only).
 * - Many rows at once: one comparison tests every metric at every concurrency, so each bench
 *   interval is a Bonferroni interval: at confidence 1 - 0.05 / m for the m bench rows that get
 *   one, so that the chance of any false "faster"/"slower" in the whole table stays within 5 %.
 * - Answers: McNemar's exact test on the items both runs answered. Only discordant pairs carry
 *   information (an item both got right or both got wrong says nothing about which is better);
 *   under "no difference" each discordant item is equally likely to favour A or B, so the count
 *   that favours A is Binomial(discordant, 1/2): the exact binomial test on it is McNemar's exact
 *   test. stdlib's binomial-test, two-sided.
 */
import ttest2 from "@stdlib/stats-ttest2";
import binomialTest from "@stdlib/stats-binomial-test";
import discreteUniform from "@stdlib/random-base-discrete-uniform";
import { mean } from "../bench/stats.js";

export { mean };

/** The family-wise confidence of a comparison's bench rows, and the level of the eval test: 95 %, alpha 0.05. */
export const CONFIDENCE = 0.95;

/** How the family-wise error over a comparison's bench rows is controlled (the module comment says why). */
export const FAMILY_CORRECTION = "bonferroni";

/** The per-interval confidence that keeps `tests` intervals together at CONFIDENCE (Bonferroni). */
export const bonferroniConfidence = (tests: number): number => 1 - (1 - CONFIDENCE) / Math.max(1, tests);

/** How an interval was had: the tests the module comment names. */
export const INTERVAL_METHODS = ["welch", "bootstrap"] as const;
export type IntervalMethod = (typeof INTERVAL_METHODS)[number];

/** An interval for mean(b) - mean(a), at `confidence`. */
export interface DifferenceInterval {
  readonly method: IntervalMethod;
  readonly difference: number;
  readonly low: number;
  readonly high: number;
  /** This interval's own confidence (CONFIDENCE when alone; higher under a family correction). */
  readonly confidence: number;
  /** Present when the interval is one of a family: how its confidence was set and over how many intervals. */
  readonly correction?: { readonly method: typeof FAMILY_CORRECTION; readonly intervals: number; readonly family_confidence: number };
}

/** The sample standard deviation (n - 1); 0 for fewer than two values. */
export function sd(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
}

/**
 * Welch's interval for mean(b) - mean(a); both need two values at least. Two sides without any
 * spread (every run gave the same figure, as a deterministic fake does) have a zero-width interval
 * at their difference: stdlib's statistic is 0/0 there.
 */
export function welchInterval(a: readonly number[], b: readonly number[], confidence = CONFIDENCE): DifferenceInterval {
  const difference = mean(b) - mean(a);
  if (sd(a) === 0 && sd(b) === 0) return { method: "welch", difference, low: difference, high: difference, confidence };
  const r = ttest2([...b], [...a], { alpha: 1 - confidence, variance: "unequal" });
  const [low = Number.NaN, high = Number.NaN] = r.ci;
  return { method: "welch", difference, low, high, confidence };
}

/** How many resamples the bootstrap draws: enough for a steady 2.5/97.5 % percentile. */
export const BOOTSTRAP_RESAMPLES = 2000;

/** Resamples in each tail at least, so that a corrected (narrow-tailed) percentile is still steady. */
const TAIL_DRAWS = 25;

/** A percentile bootstrap interval for mean(b) - mean(a), from a seeded generator: the same samples give the same interval. */
export function bootstrapInterval(a: readonly number[], b: readonly number[], confidence = CONFIDENCE, seed = 1): DifferenceInterval {
  const tail = (1 - confidence) / 2;
  const resamples = Math.max(BOOTSTRAP_RESAMPLES, Math.ceil(TAIL_DRAWS / tail));
  const resampleMean = (xs: readonly number[], pick: () => number): number => {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[pick()] ?? 0;
    return s / xs.length;
  };
  const pickA = discreteUniform.factory(0, a.length - 1, { seed });
  const pickB = discreteUniform.factory(0, b.length - 1, { seed: seed + 1 });
  const differences: number[] = [];
  for (let i = 0; i < resamples; i++) differences.push(resampleMean(b, pickB) - resampleMean(a, pickA));
  differences.sort((x, y) => x - y);
  const at = (q: number): number => differences[Math.min(resamples - 1, Math.max(0, Math.round(q * (resamples - 1))))] ?? Number.NaN;
  return { method: "bootstrap", difference: mean(b) - mean(a), low: at(tail), high: at(1 - tail), confidence };
}

/** McNemar's exact test on paired right/wrong outcomes. */
export interface McNemar {
  /** Items both answered. */
  readonly paired: number;
  /** Right in A only, in B only. */
  readonly a_only: number;
  readonly b_only: number;
  /** Two-sided exact p-value (1 when no item is discordant). */
  readonly p: number;
}

export function mcnemarExact(pairs: ReadonlyArray<readonly [aRight: boolean, bRight: boolean]>): McNemar {
  const aOnly = pairs.filter(([x, y]) => x && !y).length;
  const bOnly = pairs.filter(([x, y]) => !x && y).length;
  const discordant = aOnly + bOnly;
  const p = discordant === 0 ? 1 : Math.min(1, binomialTest(aOnly, discordant, { p: 0.5, alternative: "two-sided" }).pValue);
  return { paired: pairs.length, a_only: aOnly, b_only: bOnly, p };
}
