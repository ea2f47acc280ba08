import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { counterGrowth, pointBetween, readEngineSample, sampleLine } from "../../src/engine/engine-metrics.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { httpFetchText, MetricsScraper, type FetchText, type MetricsUpdate, type ScrapeTarget } from "../../src/measure/live/metrics-scraper.js";

const names = vllm.engineMetrics;
assert.ok(names, "vLLM's adapter names its live metrics");

/**
 * A vLLM /metrics page as prometheus_client writes it (prometheus_client/exposition.py
 * generate_latest: a counter's HELP and TYPE carry `_total`, its `_created` sample is a gauge of
 * its own), with the series vllm/v1/metrics/loggers.py PrometheusStatLogger registers (labels
 * model_name, engine), for two engine cores (data parallel 2), speculative decoding on, and a
 * served name that holds a quote and a brace.
 */
const MODEL = 'org/odd\\"name}';
const series = (name: string, v0: string, v1: string): string[] => [`${name}{model_name="${MODEL}",engine="0"} ${v0}`, `${name}{model_name="${MODEL}",engine="1"} ${v1}`];
const counter = (name: string, help: string, v0: string, v1: string): string[] => [
  `# HELP ${name}_total ${help}`,
  `# TYPE ${name}_total counter`,
  ...series(`${name}_total`, v0, v1),
  `# HELP ${name}_created ${help}`,
  `# TYPE ${name}_created gauge`,
  ...series(`${name}_created`, "1.7646e+09", "1.7646e+09"),
];
const gauge = (name: string, help: string, v0: string, v1: string): string[] => [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, ...series(name, v0, v1)];
function vllmPage(f: { running: [string, string]; waiting: [string, string]; kv: [string, string]; prompt: [string, string]; generation: [string, string]; preempted: [string, string]; accepted: string; drafted: string }): string {
  return [
    "# HELP python_gc_objects_collected_total Objects collected during gc",
    "# TYPE python_gc_objects_collected_total counter",
    'python_gc_objects_collected_total{generation="0"} 12345.0',
    ...gauge("vllm:num_requests_running", "Number of requests in model execution batches.", ...f.running),
    ...gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", ...f.waiting),
    ...gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", "0.99", "0.99"),
    ...gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", ...f.kv),
    ...counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", "4096.0", "0.0"),
    ...counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", ...f.preempted),
    ...counter("vllm:prompt_tokens", "Number of prefill tokens processed.", ...f.prompt),
    ...counter("vllm:generation_tokens", "Number of generation tokens processed.", ...f.generation),
    "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
    "# TYPE vllm:time_to_first_token_seconds histogram",
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="${MODEL}"} 0.0`,
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="${MODEL}"} 3.0`,
    `vllm:time_to_first_token_seconds_count{engine="0",model_name="${MODEL}"} 3.0`,
    `vllm:time_to_first_token_seconds_sum{engine="0",model_name="${MODEL}"} 0.42`,
    "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.",
    "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
    `vllm:spec_decode_num_draft_tokens_total{model_name="${MODEL}",engine="0"} ${f.drafted}`,
    "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.",
    "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
    `vllm:spec_decode_num_accepted_tokens_total{model_name="${MODEL}",engine="0"} ${f.accepted}`,
    "",
  ].join("\n");
}

const PAGE_1 = vllmPage({ running: ["3.0", "2.0"], waiting: ["1.0", "0.0"], kv: ["0.5", "0.25"], prompt: ["1000.0", "500.0"], generation: ["2000.0", "1000.0"], preempted: ["1.0", "0.0"], accepted: "700.0", drafted: "1000.0" });
const PAGE_2 = vllmPage({ running: ["4.0", "2.0"], waiting: ["0.0", "0.0"], kv: ["0.75", "0.25"], prompt: ["1500.0", "1000.0"], generation: ["2500.0", "1500.0"], preempted: ["3.0", "0.0"], accepted: "1100.0", drafted: "1500.0" });

test("a vLLM page reads as its figures: series summed over engine cores, KV cache usage averaged, the new KV name before the old", () => {
  assert.deepEqual(readEngineSample(PAGE_1, names), {
    kvCacheUsage: 0.375,
    requestsRunning: 5,
    requestsWaiting: 1,
    promptTokens: 1500,
    generationTokens: 3000,
    preemptions: 1,
    specAccepted: 700,
    specDrafted: 1000,
  });
});

test("a vLLM before 0.9 (gpu_cache_usage_perc only, no speculative decoding) gives its KV usage under the old name, and no acceptance", () => {
  const old = ["# TYPE vllm:gpu_cache_usage_perc gauge", 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5', 'vllm:num_requests_running{model_name="m"} 2.0'].join("\n");
  assert.deepEqual(readEngineSample(old, names), { kvCacheUsage: 0.5, requestsRunning: 2 });
});

test("sample lines: labels with quoted braces and escapes, timestamps, special floats; comments and broken lines are not samples", () => {
  assert.deepEqual(sampleLine('a{x="}\\"{",y="2"} 3.5 1712345678000'), { name: "a", value: 3.5 });
  assert.deepEqual(sampleLine("b 1e3"), { name: "b", value: 1000 });
  assert.deepEqual(sampleLine("c +Inf"), { name: "c", value: Infinity });
  assert.equal(sampleLine("# TYPE a gauge"), undefined);
  assert.equal(sampleLine('a{x="never closed} 1'), undefined);
  assert.equal(sampleLine("a not-a-number"), undefined);
  assert.equal(sampleLine(""), undefined);
  // A name that only starts with a wanted one, and values that are not finite, count for nothing.
  const text = ['vllm:num_requests_running_extra{model_name="m"} 9', 'vllm:num_requests_running{model_name="m"} NaN', 'vllm:num_requests_waiting{model_name="m"} +Inf'].join("\n");
  assert.deepEqual(readEngineSample(text, names), {});
});

test("between two scrapes: tokens per second, preemptions since, accepted / drafted since; a first scrape has gauges only", () => {
  const before = { at: 10_000, figures: readEngineSample(PAGE_1, names) };
  const after = { at: 15_000, figures: readEngineSample(PAGE_2, names) };
  assert.deepEqual(pointBetween(before, after), {
    kv_cache_usage: 0.5,
    requests_running: 6,
    requests_waiting: 0,
    prompt_tps: 200,
    generation_tps: 200,
    preemptions: 2,
    spec_acceptance: 0.8,
  });
  assert.deepEqual(pointBetween(undefined, before), { kv_cache_usage: 0.375, requests_running: 5, requests_waiting: 1 });
});

test("a counter that went down was reset (the engine restarted): it counted from 0 since", () => {
  assert.equal(counterGrowth(1000, 1200), 200);
  assert.equal(counterGrowth(1000, 300), 300);
  assert.equal(counterGrowth(undefined, 300), undefined);
  const before = { at: 0, figures: { generationTokens: 90_000, specDrafted: 500, specAccepted: 400 } };
  const after = { at: 2_000, figures: { generationTokens: 100, specDrafted: 500, specAccepted: 400 } };
  // Nothing drafted since: no acceptance, rather than 0/0.
  assert.deepEqual(pointBetween(before, after), { generation_tps: 50 });
});

/** A scraper over fakes: targets set by the test, pages served from a table, a clock the test moves. */
function fakeScraper(opts: { windowMs?: number; intervalMs?: number } = {}) {
  let now = 1_000_000;
  let targets: ScrapeTarget[] = [];
  const pages = new Map<string, string>();
  const asked: { url: string; headers: Record<string, string>; maxBytes: number }[] = [];
  const fetchText: FetchText = async (url, headers, _signal, maxBytes) => {
    asked.push({ url, headers, maxBytes });
    return pages.get(url);
  };
  const scraper = new MetricsScraper({
    targets: () => targets,
    fetchText,
    clock: () => now,
    wallClock: () => now,
    intervalMs: opts.intervalMs ?? 5_000,
    timeoutMs: 1_000,
    maxBytes: 64 * 1024,
    windowMs: opts.windowMs ?? 60 * 60 * 1000,
  });
  return {
    scraper,
    asked,
    pages,
    setTargets: (t: ScrapeTarget[]) => (targets = t),
    advance: (ms: number) => (now += ms),
  };
}

const A: ScrapeTarget = { cluster: "lab", deployment: "qwen", endpoint: "http://10.0.0.1:8000", engine: "vllm", apiKey: "sk-engine-secret" };
const B: ScrapeTarget = { cluster: "lab", deployment: "llama", endpoint: "http://10.0.0.2:8000" };

test("the scraper asks each serving deployment's /metrics (its key as a header, never in the URL), keeps points and tells its listeners", async () => {
  const f = fakeScraper();
  f.setTargets([A, B]);
  f.pages.set("http://10.0.0.1:8000/metrics", PAGE_1);
  f.pages.set("http://10.0.0.2:8000/metrics", PAGE_1);
  const heard: MetricsUpdate[] = [];
  f.scraper.subscribe((u) => heard.push(u));
  await f.scraper.scrapeOnce();
  f.advance(5_000);
  f.pages.set("http://10.0.0.1:8000/metrics", PAGE_2);
  await f.scraper.scrapeOnce();
  assert.deepEqual(f.asked[0], { url: "http://10.0.0.1:8000/metrics", headers: { authorization: "Bearer sk-engine-secret" }, maxBytes: 64 * 1024 });
  assert.deepEqual(f.asked[1]?.headers, {}, "an engine with no key gets none");
  const qwen = f.scraper.windows().find((w) => w.deployment === "qwen");
  assert.equal(qwen?.points.length, 2);
  assert.deepEqual(qwen?.points[1], { t: 1_005_000, kv_cache_usage: 0.5, requests_running: 6, requests_waiting: 0, prompt_tps: 100 + 100, generation_tps: 200, preemptions: 2, spec_acceptance: 0.8 });
  assert.equal(heard.length, 4);
  assert.deepEqual(heard.at(-1)?.point, f.scraper.windows().find((w) => w.deployment === "llama")?.points[1]);
  assert.ok(!JSON.stringify(f.scraper.windows()).includes("sk-engine-secret"));
});

test("a window keeps the last hour at the interval and no more; a deployment gone loses its window; a failed scrape adds no point", async () => {
  const f = fakeScraper({ windowMs: 60_000, intervalMs: 5_000 });
  f.setTargets([A, B]);
  f.pages.set("http://10.0.0.1:8000/metrics", PAGE_1);
  for (let i = 0; i < 30; i++) {
    await f.scraper.scrapeOnce();
    f.advance(5_000);
  }
  const qwen = f.scraper.windows().find((w) => w.deployment === "qwen");
  assert.equal(qwen?.points.length, 12, "60 s at 5 s");
  assert.equal(qwen?.points.at(-1)?.t, 1_000_000 + 29 * 5_000, "the newest kept");
  assert.equal(f.scraper.windows().find((w) => w.deployment === "llama"), undefined, "no page, no point, no window");
  f.setTargets([B]);
  await f.scraper.scrapeOnce();
  assert.deepEqual(f.scraper.windows(), [], "qwen no longer serves: its window is dropped");
});

test("one round at a time: a round asked for while one runs is that round", async () => {
  let release: () => void = () => undefined;
  let calls = 0;
  const scraper = new MetricsScraper({
    targets: () => [A],
    fetchText: () => {
      calls++;
      return new Promise((resolve) => (release = () => resolve(PAGE_1)));
    },
    clock: () => 0,
    wallClock: () => 0,
    intervalMs: 5_000,
    timeoutMs: 1_000,
    maxBytes: 1024 * 1024,
    windowMs: 60_000,
  });
  const first = scraper.scrapeOnce();
  const second = scraper.scrapeOnce();
  assert.equal(first, second);
  release();
  await first;
  assert.equal(calls, 1);
});

test("httpFetchText: the body up to its cap, nothing past it or for a status but 200", async () => {
  const server = createServer((req, res) => {
    if (req.url === "/big") res.end("x".repeat(200_000));
    else if (req.url === "/gone") res.writeHead(404).end("no");
    else res.end("vllm:num_requests_running 1\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const signal = (): AbortSignal => AbortSignal.timeout(5_000);
    assert.equal(await httpFetchText(`${base}/small`, {}, signal(), 1024), "vllm:num_requests_running 1\n");
    assert.equal(await httpFetchText(`${base}/big`, {}, signal(), 1024), undefined);
    assert.equal(await httpFetchText(`${base}/gone`, {}, signal(), 1024), undefined);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

const require = createRequire(import.meta.url);
// The practice engine's own HTTP API and speculative decoding (CommonJS, node built-ins only).
const { createApi } = require("../../docker-images/practice-engine/lib/http.js") as {
  createApi: (o: Record<string, unknown>) => { server: Server; listen: (h: string, p: number) => Promise<void>; close: () => void };
};
const { createSpecDecode } = require("../../docker-images/practice-engine/lib/specdecode.js") as {
  createSpecDecode: (flags: Record<string, unknown>, env: Record<string, string>) => { onToken: () => void; metricsLines: (m: string) => string[] } | null;
};

test("the scraper reads the practice engine's /metrics over HTTP: every figure, and tokens per second while it serves", async () => {
  const spec = createSpecDecode({ "speculative-config": '{"num_speculative_tokens": 3}' }, { PRACTICE_SPEC_ACCEPT_RATE: "0.5" });
  assert.ok(spec);
  const api = createApi({ model: "m", servedNames: ["m"], maxModelLen: 4096, kvTokens: 100_000, tokensPerSec: 0, startTime: 0, onToken: spec.onToken, extraMetrics: spec.metricsLines });
  await api.listen("127.0.0.1", 0);
  const endpoint = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  let now = 0;
  const scraper = new MetricsScraper({ targets: () => [{ cluster: "c", deployment: "d", endpoint }], fetchText: httpFetchText, clock: () => now, wallClock: () => now, intervalMs: 1_000, timeoutMs: 5_000, maxBytes: 1 << 20, windowMs: 60_000 });
  try {
    await scraper.scrapeOnce();
    const res = await fetch(`${endpoint}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "a b c d" }], max_tokens: 40 }) });
    await res.text();
    now += 2_000;
    await scraper.scrapeOnce();
    const [first, second] = scraper.windows()[0]?.points ?? [];
    assert.deepEqual(first, { t: 0, kv_cache_usage: 0, requests_running: 0, requests_waiting: 0 });
    assert.deepEqual(second, { t: 2_000, kv_cache_usage: 0, requests_running: 0, requests_waiting: 0, prompt_tps: 2, generation_tps: 20, preemptions: 0, spec_acceptance: 0.5 });
  } finally {
    api.close();
  }
});

test("series whose sum passes a double are left out, so a point always encodes", async () => {
  const { readEngineSample } = await import("../../src/engine/engine-metrics.js");
  const names = { kvCacheUsage: ["kv"], requestsRunning: ["run"], requestsWaiting: ["wait"], promptTokens: ["p"], generationTokens: ["g"], preemptions: ["pre"], specAccepted: ["a"], specDrafted: ["d"] };
  assert.deepEqual(readEngineSample('run{engine="0"} 1.7e308\nrun{engine="1"} 1.7e308\nwait 2\n', names), { requestsWaiting: 2 });
});
