/**
 * The statistics `vllm bench serve` reports, computed as numpy computes them there
 * (vllm/benchmarks/serve.py calculate_metrics: `np.mean(x or 0)`, `np.std(x or 0)`,
 * `np.median(x or 0)`, `np.percentile(x or 0, p)`): an empty list counts as [0], std is the
 * population's (numpy's default ddof=0), and a percentile is numpy's default "linear" method
 * (interpolation between the two closest ranks at (n - 1) * p / 100).
 */

const orZero = (xs: readonly number[]): readonly number[] => (xs.length === 0 ? [0] : xs);

export function mean(xs: readonly number[]): number {
  const v = orZero(xs);
  return v.reduce((a, x) => a + x, 0) / v.length;
}

export function std(xs: readonly number[]): number {
  const v = orZero(xs);
  const m = mean(v);
  return Math.sqrt(v.reduce((a, x) => a + (x - m) * (x - m), 0) / v.length);
}

/** numpy.percentile(xs, p) with method="linear"; p in [0, 100]. */
export function percentile(xs: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile ${p} is not within 0..100`);
  const v = [...orZero(xs)].sort((a, b) => a - b);
  const h = ((v.length - 1) * p) / 100;
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  const a = v[lo] as number;
  const b = v[hi] as number;
  return a + (h - lo) * (b - a);
}

export const median = (xs: readonly number[]): number => percentile(xs, 50);
