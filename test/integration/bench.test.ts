import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { LATENCY_METRICS, LATENCY_STATS, latencyKey, type BenchRun } from "../../src/contract/evidence.js";
import { Store } from "../../src/store/store.js";
import { launcher, launcherContainers, ok, practiceSuite, STATE_HOME, startGateway, variant, within } from "./practice-cluster.js";

// One host: the two deployments run one after the other (a node holds one deployment at a time).
const HOSTS = 1;
const dir = practiceSuite(HOSTS, "launcher-bench-it-");
/** practice-2x on one node (it keeps its --speculative-config of 5 tokens) at `rate` tokens/s per stream. */
const solo = (name: string, rate: number): string =>
  variant(dir, name, "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_TOKENS_PER_SEC = "${rate}"\nPRACTICE_SPEC_ACCEPT_RATE = "0.6"\n`);

interface BenchJson {
  readonly series: string;
  readonly runs: readonly BenchRun[];
}
const WORKLOAD = ["--concurrency", "1,2", "--requests", "4", "--input-len", "16", "--output-len", "20"];

describe("launcher bench on the practice cluster", { concurrency: false }, () => {
  test("bench a deployment: --json has vLLM's keys per concurrency, the counts, the acceptance rate, and the run is stored with what served it; a faster token rate through the gateway gives a higher output_throughput", async (t) => {
    ok(await launcher(["up", solo("bench-slow", 25)]), "up slow");
    let slow: BenchJson;
    try {
      const r = ok(await launcher(["bench", "bench-slow", ...WORKLOAD, "--json"], 120_000), "bench slow");
      slow = JSON.parse(r.stdout) as BenchJson;
      assert.match(r.stderr, /run 1 concurrency 2: 4 done \(0 failed\) of 4 sent, \d+ tok\/s/, "progress on stderr");
    } finally {
      ok(await launcher(["down", "deployment/bench-slow", "--grace", "1"]), "down slow");
    }
    assert.equal(slow.runs.length, 1);
    const run = slow.runs[0] as BenchRun;
    assert.deepEqual(run.results.map((x) => x.max_concurrency), [1, 2]);
    for (const x of run.results) {
      const keyed = x as unknown as Record<string, unknown>;
      for (const m of LATENCY_METRICS) for (const s of LATENCY_STATS) assert.equal(typeof keyed[latencyKey(s, m)], "number", latencyKey(s, m));
      for (const k of ["request_throughput", "output_throughput", "total_token_throughput", "duration"]) assert.equal(typeof keyed[k], "number", k);
      assert.equal(x.completed, 4, JSON.stringify(x.errors));
      assert.equal(x.failed, 0);
      assert.equal(x.total_output_tokens, 80, "the engine's usage counts");
      assert.equal(x.total_input_tokens, 64);
      assert.ok(x.spec_decode_acceptance_rate !== undefined && Math.abs(x.spec_decode_acceptance_rate - 60) < 5, `acceptance ${x.spec_decode_acceptance_rate}`);
      // 25 tokens/s per stream: about 40 ms between tokens.
      assert.ok(x.mean_tpot_ms > 30 && x.mean_tpot_ms < 80, `tpot ${x.mean_tpot_ms}`);
    }
    assert.equal(run.subject.deployment, "bench-slow");
    assert.match(run.subject.recipe_hash ?? "", /\S/);
    assert.equal(run.subject.engine_version, "0.12.0", "the version the image reported at up");
    assert.equal(run.subject.boot?.kv_tokens, 1_250_000, "the boot's figures");
    const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
    try {
      assert.deepEqual(store.benchRuns({ series: slow.series }).map((x) => x.id), [run.id]);
    } finally {
      store.close();
    }

    ok(await launcher(["up", solo("bench-fast", 200), "--lane", "benchlane"]), "up fast");
    const gateway = await startGateway();
    try {
      // The gateway learns the lane from its poll of the nodes.
      await within(20_000, "the gateway routing the lane", async () => {
        const res = await fetch(`${gateway.url}/v1/models`);
        const body = (await res.json()) as { data?: { id: string }[] };
        return body.data?.some((m) => m.id === "benchlane") ? true : undefined;
      });
      const r = ok(await launcher(["bench", "lane/benchlane", ...WORKLOAD, "--runs", "2", "--gateway", gateway.url, "--json"], 120_000), "bench fast through the gateway");
      const fast = JSON.parse(r.stdout) as BenchJson;
      assert.deepEqual(fast.runs.map((x) => x.run), [1, 2]);
      assert.ok(fast.runs.every((x) => x.series === fast.series && x.subject.lane === "benchlane" && x.subject.deployment === "bench-fast"));
      const at2 = (b: BenchJson, i = 0): number => b.runs[i]?.results[1]?.output_throughput ?? 0;
      const shown = (b: BenchJson): string => b.runs.map((x) => x.results.map((l) => `c=${l.max_concurrency} ${l.output_throughput.toFixed(1)} tok/s tpot ${l.mean_tpot_ms.toFixed(1)} ms ttft p99 ${l.p99_ttft_ms.toFixed(1)} ms accept ${l.spec_decode_acceptance_rate?.toFixed(3)}`).join("; ")).join(" | ");
      t.diagnostic(`25 tok/s direct: ${shown(slow)}`);
      t.diagnostic(`200 tok/s via gateway: ${shown(fast)}`);
      for (const i of [0, 1]) assert.ok(at2(fast, i) > 2 * at2(slow), `200 tok/s: ${at2(fast, i)} vs 25 tok/s: ${at2(slow)}`);
      // The table, without --json.
      const table = ok(await launcher(["bench", "bench-fast", "--concurrency", "2", "--requests", "2", "--input-len", "8", "--output-len", "8"], 60_000), "bench table");
      assert.match(table.stdout, /conc\s+done\s+failed/);
      assert.match(table.stdout, /^\s+2\s+2\s+0\s/m);
    } finally {
      await gateway.stop();
      ok(await launcher(["down", "deployment/bench-fast", "--grace", "1"]), "down fast");
    }
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a target that does not run is a user error naming what runs; a failed request is counted and shown, exit 1", async () => {
    const none = await launcher(["bench", "nothing-here", "--requests", "1"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /nothing serves nothing-here on the cluster/);
    assert.doesNotMatch(none.stderr, /\n\s+at /, "no stack");
    ok(await launcher(["up", solo("bench-refuse", 0)]), "up");
    try {
      // A gateway address where nothing listens: every request fails, and says why.
      const bad = await launcher(["bench", "bench-refuse", "--requests", "2", "--output-len", "4", "--gateway", "http://127.0.0.1:9/"]);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /2 of 2 requests failed: fetch failed/);
      assert.match(bad.stdout, /^\s+1\s+0\s+2\s/m, "the table shows 0 done, 2 failed");
    } finally {
      ok(await launcher(["down", "deployment/bench-refuse", "--grace", "1"]), "down");
    }
  });
});
