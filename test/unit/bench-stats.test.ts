import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mean, median, percentile, std } from "../../src/measure/bench/stats.js";

const close = (a: number, b: number, what: string): void => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);

// Expected values are numpy's (np.percentile default method "linear", np.std ddof=0), as
// vllm/benchmarks/serve.py calculate_metrics calls them.
describe("bench statistics as numpy computes them for vllm bench serve", () => {
  test("percentiles interpolate linearly between the closest ranks", () => {
    close(percentile([1, 2, 3, 4], 90), 3.7, "np.percentile([1,2,3,4], 90)");
    close(percentile([1, 2, 3, 4], 99), 3.97, "np.percentile([1,2,3,4], 99)");
    close(percentile([4, 1, 3, 2], 50), 2.5, "unsorted input");
    close(percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 99), 99.1, "np.percentile(range(10,101,10), 99)");
    close(percentile([7], 99), 7, "one value");
    assert.throws(() => percentile([1], 101), RangeError);
  });

  test("mean, median and the population std", () => {
    close(mean([1, 2, 3, 4]), 2.5, "mean");
    close(median([1, 2, 3, 4, 100]), 3, "median");
    close(std([1, 2, 3, 4]), 1.118033988749895, "np.std([1,2,3,4])");
  });

  test("an empty list counts as [0], as vLLM's `np.mean(x or 0)`", () => {
    for (const f of [mean, median, std, (xs: readonly number[]) => percentile(xs, 99)]) assert.equal(f([]), 0);
  });
});
