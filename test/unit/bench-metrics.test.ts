import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { acceptanceRate, readSpecCounters, serveResult } from "../../src/measure/bench/metrics.js";
import type { RequestOutcome } from "../../src/measure/bench/stream.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { LATENCY_METRICS, LATENCY_STATS, latencyKey } from "../../src/contract/evidence.js";

const close = (a: number, b: number, what: string): void => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);
const done = (ttft: number, itl: number[], latency: number, out: number, input = 10): RequestOutcome => ({ ok: true, start_s: 0, ttft_s: ttft, itl_s: itl, latency_s: latency, input_tokens: input, output_tokens: out });
const failed = (error: string): RequestOutcome => ({ ok: false, start_s: 0, input_tokens: 10, error });

describe("a level's result keyed and computed as vllm bench serve's", () => {
  test("TPOT is (e2el - ttft) / (output_len - 1), only for answers of more than one token; ITL pools every gap; throughput is over the level's duration", () => {
    const r = serveResult([done(0.1, [0.1, 0.2], 0.5, 5), done(0.2, [], 0.2, 1, 20), failed("HTTP 500: boom")], 2, 4);
    close(r.mean_tpot_ms, 100, "(0.5 - 0.1) / 4 s, the one-token answer left out");
    close(r.mean_ttft_ms, 150, "ttft over completed requests only");
    close(r.mean_itl_ms, 150, "itl pooled");
    close(r.mean_e2el_ms, 350, "e2el");
    assert.equal(r.completed, 2);
    assert.equal(r.failed, 1);
    assert.equal(r.total_input_tokens, 30, "completed requests' input only, as vLLM");
    assert.equal(r.total_output_tokens, 6);
    close(r.request_throughput, 1, "2 completed / 2 s");
    close(r.output_throughput, 3, "6 tokens / 2 s");
    close(r.total_token_throughput, 18, "36 tokens / 2 s");
    assert.equal(r.max_concurrency, 4);
    assert.deepEqual(r.ttfts, [0.1, 0.2, 0], "per request, a failed one as 0");
    assert.deepEqual(r.output_lens, [5, 1, 0]);
    assert.deepEqual(r.latencies, [0.5, 0.2, 0], "vLLM's RequestFuncOutput.latency per request");
    assert.deepEqual(r.errors, ["", "", "HTTP 500: boom"], "one entry per request, \"\" for a success, as serve.py's `errors`");
    assert.equal(r.spec_decode_acceptance_rate, undefined);
  });

  test("every key vLLM writes for ttft, tpot, itl, e2el is there, p90 and p99 included", () => {
    const r = serveResult([done(0.1, [0.1], 0.2, 2)], 1, 1, 0.5) as unknown as Record<string, unknown>;
    for (const m of LATENCY_METRICS) for (const s of LATENCY_STATS) assert.equal(typeof r[latencyKey(s, m)], "number", latencyKey(s, m));
    for (const k of ["mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "std_e2el_ms", "p90_ttft_ms", "request_throughput", "output_throughput", "total_token_throughput", "completed", "failed", "duration"]) assert.ok(k in r, k);
    assert.equal(r.spec_decode_acceptance_rate, 0.5, "passed through as given (a percent)");
  });

  test("all failed: zeros, the count and every request's error", () => {
    const r = serveResult(Array.from({ length: 15 }, (_, i) => failed(`e${i}`)), 1, 1);
    assert.equal(r.completed, 0);
    assert.equal(r.failed, 15);
    assert.equal(r.errors.length, 15);
    assert.equal(r.mean_ttft_ms, 0);
    assert.equal(r.output_throughput, 0);
  });

  test("the acceptance rate is accepted / drafted tokens between two scrapes of vLLM's counters", () => {
    const names = vllm.specDecodeMetrics;
    assert.ok(names);
    const scrape = (drafts: number, accepted: number, pos0: number): string =>
      [
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        `vllm:spec_decode_num_draft_tokens_total{model_name="m",engine="0"} ${drafts}.0`,
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        `vllm:spec_decode_num_accepted_tokens_total{model_name="m",engine="0"} ${accepted}.0`,
        `vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="0"} ${pos0}.0`,
        `vllm:spec_decode_num_accepted_tokens_created{model_name="m",engine="0"} 1.7e9`,
      ].join("\n");
    const before = readSpecCounters(scrape(100, 60, 50), names);
    assert.deepEqual(before, { accepted: 60, drafted: 100 }, "the per-position and _created series are not summed in");
    const after = readSpecCounters(scrape(300, 210, 170), names);
    assert.equal(acceptanceRate(before, after), 75, "a percent, as vllm/benchmarks/serve.py writes spec_decode_acceptance_rate");
    assert.equal(acceptanceRate(before, before), undefined, "nothing drafted over the run");
    assert.equal(acceptanceRate(readSpecCounters("vllm:num_requests_running 0", names), after), undefined, "no counters: no rate");
  });
});
