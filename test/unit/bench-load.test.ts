import assert from "node:assert/strict";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { describe, test } from "node:test";
import { runLevel, type ChatEndpoint } from "../../src/measure/bench/load.js";
import { syntheticPrompt } from "../../src/measure/bench/workload.js";
import { benchDeps, benchTarget, levelRequests, type BenchOptions } from "../../src/measure/bench/bench.js";
import { encodeLabels, type DeploymentLabels } from "../../src/contract/deployment.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { BenchRun } from "../../src/contract/evidence.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { FakeNode } from "../support/fake-node.js";

const require = createRequire(import.meta.url);
// The practice engine's own HTTP API and speculative decoding (CommonJS, node built-ins only).
const { createApi } = require("../../docker-images/practice-engine/lib/http.js") as {
  createApi: (o: Record<string, unknown>) => { server: Server; listen: (h: string, p: number) => Promise<void>; close: () => void };
};
const { createSpecDecode } = require("../../docker-images/practice-engine/lib/specdecode.js") as {
  createSpecDecode: (flags: Record<string, unknown>, env: Record<string, string>) => { onToken: () => void; metricsLines: (m: string) => string[] } | null;
};

const prompts = [syntheticPrompt(0, 4, 0)];
const sse = (content: string): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;
const USAGE = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })}\n\ndata: [DONE]\n\n`;

describe("a concurrency level, bounded in requests and time", () => {
  test("N streams at once at most, exactly --requests sent, a refused request counted as failed with its error", async () => {
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const endpoint: ChatEndpoint = {
      async *chunks() {
        const call = ++calls;
        inFlight++;
        most = Math.max(most, inFlight);
        try {
          await new Promise((r) => setTimeout(r, 5));
          if (call === 4) throw new Error("HTTP 503: lane_switching");
          yield sse("a ");
          yield sse("b ") + USAGE;
        } finally {
          inFlight--;
        }
      },
    };
    let t = 0;
    const run = await runLevel(endpoint, prompts, "m", 2, { concurrency: 3, requests: 10, requestTimeoutS: 5 }, () => (t += 0.001), new AbortController().signal);
    assert.equal(run.outcomes.length, 10);
    assert.equal(calls, 10);
    assert.equal(most, 3);
    const bad = run.outcomes.filter((o) => !o.ok);
    assert.equal(bad.length, 1);
    assert.match(bad[0]?.ok === false ? bad[0].error : "", /503: lane_switching/);
  });

  test("--duration: no request is sent once it is over", async () => {
    let t = 0;
    const endpoint: ChatEndpoint = {
      async *chunks() {
        t += 1; // each request takes one second on the level's clock
        yield sse("a ") + USAGE;
      },
    };
    const run = await runLevel(endpoint, prompts, "m", 2, { concurrency: 1, requests: 1000, durationS: 3.5, requestTimeoutS: 5 }, () => t, new AbortController().signal);
    assert.equal(run.outcomes.length, 4, "sent at 0, 1, 2, 3 s; not at 4 s");
  });

  test("the request timeout cuts a stream that does not end, and says so", async () => {
    const endpoint: ChatEndpoint = {
      async *chunks(_body, signal) {
        yield sse("a ");
        // A socket would hold the event loop open meanwhile (AbortSignal.timeout's timer does not).
        const open = setInterval(() => undefined, 1000);
        try {
          await new Promise((_r, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error)));
        } finally {
          clearInterval(open);
        }
      },
    };
    const run = await runLevel(endpoint, prompts, "m", 2, { concurrency: 1, requests: 1, requestTimeoutS: 0.05 }, () => performance.now() / 1000, new AbortController().signal);
    assert.equal(run.outcomes[0]?.ok, false);
    assert.match(run.outcomes[0]?.ok === false ? run.outcomes[0].error : "", /request timeout/);
  });

  test("requests per level: --requests, else a cap under --duration, else 4 per stream and at least 8", () => {
    assert.equal(levelRequests({ requests: 3 }, 8), 3);
    assert.equal(levelRequests({}, 1), 8);
    assert.equal(levelRequests({}, 8), 32);
    assert.ok(levelRequests({ durationS: 10 }, 1) >= 10_000);
  });
});

/** A practice engine's API on 127.0.0.1 at `tokensPerSec`, with speculative decoding. */
async function practiceEngine(tokensPerSec: number, acceptRate: string): Promise<{ url: string; close: () => void }> {
  const spec = createSpecDecode({ "speculative-config": '{"method":"eagle","num_speculative_tokens":4}' }, { PRACTICE_SPEC_ACCEPT_RATE: acceptRate });
  assert.ok(spec);
  const api = createApi({ model: "practice/tiny", servedNames: ["practice"], maxModelLen: 4096, kvTokens: 100000, tokensPerSec, startTime: 0, apiKeys: [], onToken: spec.onToken, extraMetrics: spec.metricsLines });
  await api.listen("127.0.0.1", 0);
  return { url: `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`, close: () => api.close() };
}

const labels = (over: Partial<DeploymentLabels>): DeploymentLabels => ({
  deployment: "d1", recipe: "r1", recipe_hash: "h1", engine: "vllm", served_model: "practice", rank: 0, role: "head", node: "n1", nnodes: 1, nodes: ["n1"], cluster: "c", endpoint: "http://127.0.0.1:9", ...over,
});

function fakeSession(endpoint: string): ClusterSession {
  const c: ContainerInfo = { id: "i", name: "launcher-d1-r0", labels: encodeLabels(labels({ endpoint, lane: "chat" })), state: "running", running: true, exitCode: 0, startedAt: "t", finishedAt: "t", image: "practice-engine:local" };
  const docker = new FakeNode("n1");
  docker.add(c.name, c.labels, { image: c.image });
  return { cluster: { name: "c" }, docker: new Map([["n1", docker]]) } as unknown as ClusterSession;
}

describe("benchTarget against the practice engine's API", () => {
  const options = (over: Partial<BenchOptions>): BenchOptions => ({ target: "chat", concurrencies: [2, 4], requests: 4, inputLen: 16, outputLen: 20, depth: 0, runs: 1, requestTimeoutS: 30, signal: new AbortController().signal, ...over });

  test("runs every level, stores each run with its subject, and a faster engine gives a higher output_throughput", async () => {
    const slow = await practiceEngine(25, "0.5");
    const fast = await practiceEngine(200, "0.5");
    try {
      const saved: BenchRun[] = [];
      const store = { saveBenchRun: (r: BenchRun) => saved.push(r), history: () => [], engineKey: () => undefined };
      const bench = async (url: string, over: Partial<BenchOptions> = {}): Promise<BenchRun[]> => benchTarget(options(over), benchDeps(fakeSession(url), store));
      const slowRuns = await bench(slow.url);
      const fastRuns = await bench(fast.url, { runs: 2 });
      assert.equal(fastRuns.length, 2);
      assert.equal(saved.length, 3, "every run stored");
      assert.equal(fastRuns[0]?.series, fastRuns[1]?.series, "one series per command");
      assert.notEqual(fastRuns[0]?.id, fastRuns[1]?.id);
      assert.deepEqual(fastRuns.map((r) => r.run), [1, 2]);
      assert.equal(slowRuns[0]?.subject.deployment, "d1");
      assert.equal(slowRuns[0]?.subject.recipe_hash, "h1");
      assert.equal(slowRuns[0]?.subject.lane, "chat");
      assert.deepEqual(slowRuns[0]?.workload, { concurrencies: [2, 4], requests: 4, input_len: 16, depth: 0, output_len: 20 });
      for (const run of [...slowRuns, ...fastRuns]) {
        assert.deepEqual(run.results.map((r) => r.max_concurrency), [2, 4]);
        for (const r of run.results) {
          assert.equal(r.completed, 4, JSON.stringify(r.errors));
          assert.equal(r.failed, 0);
          assert.equal(r.total_output_tokens, 4 * 20, "usage's counts");
          assert.equal(r.total_input_tokens, 4 * 16);
          assert.ok(r.spec_decode_acceptance_rate !== undefined && Math.abs(r.spec_decode_acceptance_rate - 50) < 5, `acceptance ${r.spec_decode_acceptance_rate}`);
        }
      }
      const at4 = (runs: BenchRun[]): number => runs[0]?.results[1]?.output_throughput ?? 0;
      assert.ok(at4(fastRuns) > 2 * at4(slowRuns), `400 tok/s ${at4(fastRuns)} vs 50 tok/s ${at4(slowRuns)}`);
      // At 25 tokens/s per stream, TPOT is about 40 ms and 4 streams make at most 100 tokens/s.
      const slow4 = slowRuns[0]?.results[1];
      // Above 25 ms, not 35: the engine keeps absolute due times, so a stall before the first token is caught up after it and lowers the mean.
      assert.ok(slow4 && slow4.mean_tpot_ms > 25 && slow4.mean_tpot_ms < 60, `tpot ${slow4?.mean_tpot_ms}`);
      assert.ok(slow4 && slow4.output_throughput > 50 && slow4.output_throughput <= 100, `throughput ${slow4?.output_throughput}`);
    } finally {
      slow.close();
      fast.close();
    }
  });

  test("interrupted: the requests in flight are cut off and the run is not stored as evidence", async () => {
    const e = await practiceEngine(20, "0.5");
    try {
      const saved: BenchRun[] = [];
      const store = { saveBenchRun: (r: BenchRun) => saved.push(r), history: () => [], engineKey: () => undefined };
      const stop = new AbortController();
      const started = performance.now();
      const runs = await benchTarget(
        options({ concurrencies: [2], requests: 4, outputLen: 200, signal: stop.signal, onProgress: (_run, p) => (p.chunks >= 4 ? stop.abort() : undefined) }),
        benchDeps(fakeSession(e.url), store),
      );
      assert.deepEqual(runs, []);
      assert.deepEqual(saved, []);
      assert.ok(performance.now() - started < 5000, "200 tokens at 20/s would take 10 s a request");
    } finally {
      e.close();
    }
  });

  test("an engine that refuses the model: every request failed, counted, with the engine's words", async () => {
    const e = await practiceEngine(0, "0.5");
    try {
      const session = fakeSession(e.url);
      const store = { saveBenchRun: () => undefined, history: () => [], engineKey: () => undefined };
      // Through a "gateway" that is the engine itself: the lane's name is the model asked for, which the engine does not serve.
      const runs = await benchTarget(options({ concurrencies: [2], requests: 3, gateway: { url: `${e.url}/` } }), benchDeps(session, store));
      const r = runs[0]?.results[0];
      assert.equal(r?.completed, 0);
      assert.equal(r?.failed, 3);
      assert.match(r?.errors[0] ?? "", /HTTP 404: .*The model `chat` does not exist/);
    } finally {
      e.close();
    }
  });
});
