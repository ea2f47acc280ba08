import { BOOT_PHASES, type DeploymentStatus } from "../../src/contract/deployment.js";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { launcher, launcherContainers, onHost, startGateway, variant, within, type Daemon, ok, suiteDown, suiteUp } from "./practice-cluster.js";

// The gateway, lanes and the store on the practice cluster (4 hosts, practice engine): what only
// the wire shows (discovery across processes, the official client, a real engine's streams, a
// killed container). What a client is answered while a model boots, loses a rank or is swapped
// onto its own nodes is test/unit/gateway-decisions.test.ts's; two ups of one lane,
// test/unit/launch-decisions.test.ts's (of the same nodes, up-decisions.test.ts's); a lane left
// switching by a dead up, lane-switching.test.ts's.
const HOSTS = 4;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-gw-"));
const KEY = "sk-launcher-test-7c1f";
let gw: Daemon;
let client: OpenAI;

const host = (i: number): string => `10.231.0.${10 + i}`;
const openai = (baseURL: string, apiKey = "none") => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 30_000 });

before(async () => {
  await suiteUp(HOSTS);
  gw = await startGateway();
  client = openai(gw.url);
}, { timeout: 300_000 });
after(async () => {
  await gw?.stop();
  await suiteDown();
  rmSync(dir, { recursive: true, force: true });
}, { timeout: 300_000 });

/** The API error a call fails with (the test fails if it succeeds). */
async function apiError(call: () => Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call();
  } catch (e) {
    if (e instanceof OpenAI.APIError) return e;
    throw e;
  }
  throw new Error("expected an API error, the call succeeded");
}

async function chatModel(model: string): Promise<string> {
  const r = await client.chat.completions.create({ model, max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
  return r.model;
}

async function streams(endpoint: string): Promise<{ open: number; started: number; aborted: number }> {
  return (await (await fetch(`${endpoint}/practice/streams`, { signal: AbortSignal.timeout(5000) })).json()) as { open: number; started: number; aborted: number };
}


type Deployment = Pick<DeploymentStatus, "deployment" | "lane" | "served_model" | "status" | "endpoint" | "ranks">;

async function deployments(): Promise<Deployment[]> {
  return (JSON.parse(ok(await launcher(["status", "--json"]), "status").stdout) as { deployments: Deployment[] }).deployments;
}

const nodesOf = (d: Deployment): string[] => [...new Set(d.ranks.map((r) => r.node))];

/**
 * Lane `lane` serves: what it serves already when `want` allows it, else `recipe` booted on
 * `nodes` (anything else on those nodes removed first). So each test sets up what it needs and
 * runs alone (`--test-name-pattern`), and after another test it reuses a lane already right
 * instead of booting again. `only`: nothing else may run on the cluster.
 */
async function laneServes(lane: string, recipe: string, nodes: readonly string[], want: { exact?: boolean; only?: boolean } = {}): Promise<Deployment> {
  const name = path.basename(recipe);
  const fits = (d: Deployment): boolean =>
    d.lane === lane && d.status === "serving" && (want.exact !== true || (d.deployment === name && nodesOf(d).join(",") === nodes.join(",")));
  let all = await deployments();
  let current = all.find(fits);
  const unwanted = all.filter((d) => d !== current && (want.only === true || nodesOf(d).some((n) => nodes.includes(n)) || (d.lane === lane && current === undefined)));
  for (const d of unwanted) ok(await launcher(["down", `deployment/${d.deployment}`, "--grace", "1"]), `down ${d.deployment}`);
  if (current === undefined) {
    ok(await launcher(["up", recipe, "--lane", lane, "--nodes", nodes.join(","), "--json"], 120_000), `up ${name} in lane ${lane}`);
    all = await deployments();
    current = all.find(fits);
  }
  assert.ok(current, `lane ${lane} serves ${name}`);
  const served = current;
  await within(15_000, `lane ${lane} routable`, async () => ((await client.models.list()).data.some((m) => m.id === lane && (m as unknown as { deployment: string; status: string }).deployment === served.deployment && (m as unknown as { status: string }).status === "serving") ? true : undefined));
  return served;
}

/** One Prometheus sample of the gateway's /metrics; 0 when the series is not there yet. */
async function metric(series: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

// The recipes the tests boot, each its own name (a deployment is named after its recipe).
const B = variant(dir, "practice-b", "practice-2x", `args = ["--served-model-name", "practice-b"]\n`);
const C = variant(dir, "practice-c", "practice-2x", `args = ["--served-model-name", "practice-c"]\n[env]\nPRACTICE_PHASE_DELAY_MS = "400"\n`);
const OOM = variant(dir, "practice-oom", "practice-2x", `[env]\nPRACTICE_FAULT = "oom"\n`);
const N12 = ["n1", "n2"];

describe("launcher serve on the practice cluster", { concurrency: false }, () => {
  // The bounds here are what a loaded 2-core machine may need, not the product's latency: the time
  // each change took to reach the gateway is printed (t.diagnostic) beside the test.
  test("a deployment started by `launcher up` in another process is routable through the gateway (the time printed)", async (t) => {
    ok(await launcher(["down", "--all", "--grace", "1"]), "an empty cluster");
    const up = ok(await launcher(["up", "practice-2x", "--lane", "main", "--json"]), "up");
    assert.equal((JSON.parse(up.stdout) as { mode: string }).mode, "first");
    const seen = await within(15_000, "main routable through the gateway", async () => {
      const list = await client.models.list();
      return list.data.find((m) => m.id === "main" && (m as unknown as { status: string }).status === "serving");
    });
    t.diagnostic(`routable ${seen.ms} ms after up returned`);
    assert.deepEqual(
      { ...seen.value, created: 0 },
      { id: "main", object: "model", created: 0, owned_by: "launcher", deployment: "practice-2x", recipe: "practice-2x", phase: "serving", lane: "main", status: "serving", nodes: ["n1", "n2"] },
    );
    // Discovery may first see it booting, in any phase of the contract's list.
    const first = /\+ practice-2x (\S+)(?: \((\S+)\))?: model practice, lane main at http:\/\/10\.231\.0\.11:8000/.exec(gw.log());
    assert.ok(first !== null, gw.log());
    assert.ok(first[1] === "serving" || (first[1] === "booting" && BOOT_PHASES.some((p) => p === first[2])), first[0]);
  });

  test("the official openai client: chat, streaming, completions, embeddings, models", async () => {
    await laneServes("main", "practice-2x", N12, { exact: true, only: true });
    const chat = await client.chat.completions.create({ model: "main", max_tokens: 6, messages: [{ role: "user", content: "hello" }] });
    assert.equal(chat.model, "practice", "a lane alias reaches the engine as its served name");
    assert.equal(chat.usage?.completion_tokens, 6);
    assert.ok((chat.choices[0]?.message.content ?? "").trim().split(" ").length === 6);

    const stream = await client.chat.completions.create({ model: "practice", max_tokens: 8, stream: true, messages: [{ role: "user", content: "hello" }] });
    let text = "";
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      text += c.choices[0]?.delta.content ?? "";
    }
    assert.ok(chunks >= 8, `${chunks} chunks`);
    assert.ok(text.startsWith(chat.choices[0]?.message.content ?? "?"), "same prompt, same deterministic words, streamed or not");

    const completion = await client.completions.create({ model: "main", prompt: "once upon", max_tokens: 4 });
    assert.equal(completion.usage?.completion_tokens, 4);
    const emb = await client.embeddings.create({ model: "main", input: ["a", "b"] });
    assert.equal(emb.data.length, 2);
    assert.equal(emb.data[0]?.embedding.length, 8);
    const models = (await client.models.list()).data.map((m) => m.id).sort();
    assert.deepEqual(models, ["main", "practice"]);
  });

  test("unknown model: 404 listing the models it knows", async () => {
    await laneServes("main", "practice-2x", N12, { exact: true, only: true });
    const before = await metric('launcher_gateway_errors_total{model="(unknown)",lane="",kind="unknown_model"}');
    const e = await apiError(() => chatModel("no-such-model"));
    assert.equal(e.status, 404);
    assert.equal(e.code, "model_not_found");
    assert.match(e.message, /the model `no-such-model` does not exist; known models: main, practice/);
    assert.equal(await metric('launcher_gateway_errors_total{model="(unknown)",lane="",kind="unknown_model"}'), before + 1, "counted in /metrics");
  });

  test("an engine that breaks the connection: 502, never retried", async () => {
    // A deliberately broken engine (named as such): healthy on /health, cuts every chat request. It
    // counts those only: the daemon's own reads of a serving engine (its /metrics every 5 s, its
    // generation probe on /v1/completions) are answered, empty, and are not the gateway retrying.
    const script = "let n=0;require('http').createServer((q,s)=>{if(q.url!=='/v1/chat/completions'){s.end();return}n++;console.log('request',n);s.socket.destroy()}).listen(8999)";
    const labels = ["deployment=ghost", "recipe=ghost", "recipe-hash=0", "served-model=ghost", "rank=0", "nnodes=1", "node=n4", `endpoint=http://${host(4)}:8999`].flatMap((l) => ["--label", `launcher.${l}`]);
    onHost(4, ["docker", "run", "--detach", "--name", "ghost", "--network", "host", ...labels, "--entrypoint", "/usr/local/bin/vllm", "practice-engine:local", "-e", script]);
    const before = await metric('launcher_gateway_errors_total{model="ghost",lane="",kind="upstream"}');
    try {
      await within(15_000, "ghost discovered", async () => ((await client.models.list()).data.some((m) => m.id === "ghost" && (m as unknown as { status: string }).status === "serving") ? true : undefined));
      const e = await apiError(() => chatModel("ghost"));
      assert.equal(e.status, 502);
      assert.equal(e.code, "upstream_failed");
      assert.match(e.message, /deployment ghost \(http:\/\/10\.231\.0\.14:8999\) did not answer/);
      assert.equal(onHost(4, ["docker", "logs", "ghost"]).trim(), "request 1", "the gateway sent the request once");
      assert.equal(await metric('launcher_gateway_errors_total{model="ghost",lane="",kind="upstream"}'), before + 1, "counted in /metrics");
    } finally {
      onHost(4, ["docker", "rm", "--force", "ghost"]);
    }
  });

  test("a client that aborts a stream stops the engine's stream", async () => {
    const main = await laneServes("main", "practice-2x", N12);
    const endpoint = main.endpoint;
    const abortedBefore = await metric('launcher_gateway_errors_total{model="main",lane="main",kind="client_abort"}');
    const before = await streams(endpoint);
    const stream = await client.chat.completions.create({ model: "main", max_tokens: 3000, stream: true, messages: [{ role: "user", content: "a long answer" }] });
    let got = 0;
    for await (const _ of stream) if (++got === 5) break;
    assert.equal(got, 5);
    stream.controller.abort();
    const after = await within(15_000, "the engine's stream closed", async () => {
      const s = await streams(endpoint);
      return s.open === 0 && s.aborted > before.aborted ? s : undefined;
    });
    assert.equal(after.value.aborted, before.aborted + 1);
    await within(15_000, "the abort counted in /metrics", async () => ((await metric('launcher_gateway_errors_total{model="main",lane="main",kind="client_abort"}')) === abortedBefore + 1 ? true : undefined));
  });

  test("/health and /metrics in Prometheus text: requests, errors, time to first token, tokens per second, in flight", async () => {
    await laneServes("main", "practice-2x", N12);
    const count = (await deployments()).length;
    const health = await within(15_000, `the gateway's /health counts ${count} deployment(s)`, async () => {
      const h = (await (await fetch(`${gw.url}/health`)).json()) as { status: string; deployments: number };
      return h.deployments === count ? h : undefined;
    });
    assert.equal(health.value.status, "ok");
    const res = await fetch(`${gw.url}/metrics`);
    assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
    const series = {
      mainOk: 'launcher_gateway_requests_total{model="main",lane="main",code="200"}',
      practiceOk: 'launcher_gateway_requests_total{model="practice",lane="main",code="200"}',
      ttft: 'launcher_gateway_time_to_first_token_seconds_count{model="practice",lane="main"}',
      rate: 'launcher_gateway_tokens_per_second_count{model="main",lane="main"}',
      tokens: 'launcher_gateway_output_tokens_total{model="main",lane="main"}',
    };
    const before = Object.fromEntries(await Promise.all(Object.entries(series).map(async ([k, v]) => [k, await metric(v)] as const)));
    // A whole answer through the lane's name, and a stream through the served model's.
    await client.chat.completions.create({ model: "main", max_tokens: 5, messages: [{ role: "user", content: "hi" }] });
    const stream = await client.chat.completions.create({ model: "practice", max_tokens: 4, stream: true, messages: [{ role: "user", content: "hi" }] });
    for await (const _ of stream);
    const delta = async (k: keyof typeof series): Promise<number> => (await metric(series[k])) - (before[k] ?? 0);
    assert.equal(await delta("mainOk"), 1);
    assert.equal(await delta("practiceOk"), 1);
    assert.equal(await delta("ttft"), 1, "time to first token of the stream");
    assert.equal(await delta("rate"), 1, "tokens per second of the whole answer");
    assert.equal(await delta("tokens"), 5);
    assert.equal(await metric('launcher_gateway_in_flight_requests{model="main",lane="main"}'), 0);
  });

  test("API keys: refused without or with a wrong key, accepted with one; never logged; no key on a public address is refused", async () => {
    const main = await laneServes("main", "practice-2x", N12);
    const keyFile = path.join(dir, "keys");
    writeFileSync(keyFile, `# gateway keys\n${KEY}\n`);
    const secured = await startGateway(["--api-key-file", keyFile]);
    try {
      for (const key of ["none", `${KEY}x`]) {
        const e = await apiError(() => openai(secured.url, key).models.list());
        assert.equal(e.status, 401);
        assert.equal(e.code, "invalid_api_key");
      }
      // practice-2x sets no engine key: a gateway with keys does not route it (its engine would be
      // open to anyone who goes around the gateway). api-key.test routes keyed recipes.
      const e = await apiError(() => openai(secured.url, KEY).chat.completions.create({ model: "main", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }));
      assert.equal(e.status, 503);
      assert.equal(e.code, "engine_key_missing");
      assert.match(e.message, new RegExp(`deployment ${main.deployment}\\) is not routed: its engine demands no API key`));
      assert.equal((await fetch(`${secured.url}/health`)).status, 200, "/health needs no key");
      assert.equal((await fetch(`${secured.url}/metrics`)).status, 401);
      assert.match(secured.log(), /1 API key/);
    } finally {
      await secured.stop();
    }
    assert.ok(!secured.log().includes(KEY), "the key never appears in the log");

    const open = await launcher(["serve", "--listen", "0.0.0.0:0"]);
    assert.equal(open.code, 1);
    assert.match(open.stderr, /refusing to listen on 0\.0\.0\.0 without an API key/);
    const keyed = await startGateway(["--listen", "0.0.0.0:0"], { LAUNCHER_API_KEY: KEY });
    try {
      assert.match(keyed.log(), /listening on http:\/\/0\.0\.0\.0:\d+\/v1 \(1 API key/);
      assert.equal((await apiError(() => openai(keyed.url).models.list())).status, 401);
      assert.ok((await openai(keyed.url, KEY).models.list()).data.length > 0);
    } finally {
      await keyed.stop();
    }
  });

  test("lane swap to free nodes while a client keeps streaming: no request fails, the new model answers", async () => {
    await laneServes("main", "practice-2x", N12, { exact: true, only: true });
    let swapping = true;
    const failures: string[] = [];
    const models: string[] = [];
    let started = 0;
    const loop = async (): Promise<void> => {
      // Bounded: at most 600 requests or 90 s per loop.
      const deadline = Date.now() + 90_000;
      for (let i = 0; i < 600 && Date.now() < deadline; i++) {
        const doneAfterThis = !swapping;
        started++;
        try {
          const s = await client.chat.completions.create({ model: "main", max_tokens: 20, stream: true, messages: [{ role: "user", content: `n${i}` }] });
          let model = "";
          let n = 0;
          for await (const c of s) {
            model = c.model;
            if (c.choices[0]?.delta.content) n++;
          }
          if (n !== 20) failures.push(`request ${i}: ${n} tokens`);
          models.push(model);
        } catch (e) {
          failures.push(`request ${i}: ${(e as Error).message}`);
        }
        if (doneAfterThis) break;
      }
    };
    const loops = [loop(), loop()];
    // The swap starts once both clients have a request under way, not after a guessed delay.
    await within(10_000, "both client loops sent a request", async () => (started >= 2 ? true : undefined));
    const up = await launcher(["up", B, "--lane", "main", "--json"], 120_000);
    swapping = false;
    await Promise.all(loops);
    ok(up, "swap up");
    const result = JSON.parse(up.stdout) as { mode: string; replaced: string[]; deployment: string };
    assert.deepEqual([result.mode, result.replaced, result.deployment], ["disjoint", ["practice-2x"], "practice-b"]);
    assert.deepEqual(failures, []);
    assert.equal(models[0], "practice");
    assert.equal(models.at(-1), "practice-b");
    assert.deepEqual(launcherContainers(HOSTS), ["n3:launcher-practice-b-r0:running", "n4:launcher-practice-b-r1:running"]);
  });

  test("lanes and history: what each lane serves, its swaps, and every boot's phases", async () => {
    // Its own lane, from an empty cluster: a first boot, a swap onto its own nodes, a failed swap.
    // (What a failed swap leaves, the lane and each node's containers, is test/unit/lane-swap.test.ts's.)
    ok(await launcher(["down", "--all", "--grace", "1"]), "an empty cluster");
    ok(await launcher(["up", "practice-2x", "--lane", "hist", "--nodes", "n1,n2"], 120_000), "first");
    ok(await launcher(["up", C, "--lane", "hist", "--nodes", "n1,n2"], 120_000), "overlap");
    assert.equal((await launcher(["up", OOM, "--lane", "hist", "--nodes", "n3,n4"], 120_000)).code, 1, "the failed swap");
    const lanes = JSON.parse(ok(await launcher(["lanes", "--json"]), "lanes").stdout) as {
      lanes: { lane: string; state: string; deployment?: string; running?: { deployment: string; status: string }[]; swaps: { mode: string; outcome: string; to_deployment: string }[] }[];
    };
    const hist = lanes.lanes.find((l) => l.lane === "hist");
    assert.equal(hist?.state, "serving");
    assert.equal(hist?.deployment, "practice-c");
    assert.deepEqual(hist?.running?.map((d) => [d.deployment, d.status]), [["practice-c", "serving"]]);
    assert.deepEqual(hist?.swaps.map((s) => [s.to_deployment, s.mode, s.outcome]), [
      ["practice-oom", "disjoint", "failed"],
      ["practice-c", "overlap", "ok"],
      ["practice-2x", "first", "ok"],
    ]);

    const history = JSON.parse(ok(await launcher(["history", "--json"]), "history").stdout) as { boots: { recipe: string; outcome: string; seconds: number; failed_node?: string; head_phases: { phase: string; seconds: number }[] }[] };
    const oom = history.boots.find((b) => b.recipe === "practice-oom");
    assert.equal(oom?.outcome, "failed");
    assert.ok(oom?.failed_node?.startsWith("n"));
    const c = history.boots.find((b) => b.recipe === "practice-c");
    assert.equal(c?.outcome, "ready");
    // Every phase of the contract's list before serving, so a new phase does not break the check.
    assert.deepEqual(c?.head_phases.map((p) => p.phase), BOOT_PHASES.filter((p) => p !== "serving"));
    // PRACTICE_PHASE_DELAY_MS=400 between phases: the recorded times show it.
    assert.ok((c?.head_phases.find((p) => p.phase === "loading")?.seconds ?? 0) >= 0.35, JSON.stringify(c?.head_phases));
    const text = ok(await launcher(["history", "practice-c"]), "history text").stdout;
    assert.match(text, /practice-c \([0-9a-f]{12}\)  ready after [\d.]+ s  on n1, n2  lane hist/);
    const afterLoading = BOOT_PHASES[BOOT_PHASES.indexOf("loading") + 1] ?? "?";
    assert.match(text, new RegExp(`starting [\\d.]+ s -> loading [\\d.]+ s \\(model 84\\.12 GiB in [\\d.]+ s\\) -> ${afterLoading}`));
  });

  test("a deployment that dies turns to 503 (the time printed)", async (t) => {
    const main = await laneServes("main", "practice-2x", N12);
    const head = main.ranks.find((r) => r.rank === 0);
    assert.ok(head);
    onHost(Number(head.node.slice(1)), ["docker", "kill", head.container]);
    const e = await within(15_000, "main answers 503", async () => {
      const err = await apiError(() => chatModel("main")).catch(() => undefined);
      return err?.status === 503 ? err : undefined;
    });
    t.diagnostic(`503 ${e.ms} ms after the head was killed`);
    // Whichever rank the poll saw go first: the head, or the worker that lost it.
    assert.match(e.value.message, new RegExp(`model main \\(deployment ${main.deployment}\\) is not serving: missing rank [01] on n\\d`));
  });
});
