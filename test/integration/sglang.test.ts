import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { launcher, launcherContainers, listed, ok, onHost, practiceSuite, startGateway, variant, within } from "./practice-cluster.js";

// SGLang on the practice cluster: the practice engine's SGLang persona (python3 -m
// sglang.launch_server on every node, rank 0 serving the API, the others SGLang's dummy health check), booted, failed, swapped with
// vLLM in one lane, and a recipe key it ignores refused. 4 hosts: the swap goes to free nodes.
const HOSTS = 4;
const dir = practiceSuite(HOSTS, "launcher-sglang-it-");
const BASE = "practice-sglang-2x";


describe("SGLang on the practice cluster", { concurrency: false }, () => {
  test("a 2-node SGLang boot to ready: the same launch on both nodes with the head's --dist-init-addr, the API on rank 0, the worker's health check on its loopback, serving chat", async () => {
    const recipe = variant(dir, "sg-ok", BASE, "");
    try {
      ok(await launcher(["up", recipe, "--nodes", "n1,n2"]), "up");
      const head = onHost(1, ["docker", "inspect", "--format", "{{json .Args}}", "--", "launcher-sg-ok-r0"]);
      const worker = onHost(2, ["docker", "inspect", "--format", "{{json .Args}}", "--", "launcher-sg-ok-r1"]);
      const dist = /"--dist-init-addr","([\d.]+:\d+)"/.exec(head)?.[1];
      assert.ok(dist, head);
      assert.match(worker, new RegExp(`"--dist-init-addr","${dist.replace(/\./g, "\\.")}"`), "the worker meets the head's address");
      assert.match(head, /"--nnodes","2","--node-rank","0"/);
      assert.match(worker, /"--nnodes","2","--node-rank","1"/);
      assert.match(head, /"--host"/);
      // A worker serves only SGLang's dummy health check, on its own loopback at the deployment's port.
      const apiPort = /"--port","(\d+)"/.exec(head)?.[1];
      assert.ok(apiPort, head);
      assert.match(worker, new RegExp(`"--host","127\\.0\\.0\\.1","--port","${apiPort}"`));
      assert.doesNotMatch(worker, /--enable-metrics/);
      assert.match(onHost(2, ["docker", "logs", "launcher-sg-ok-r1"]), /Starting dummy health check server at 127\.0\.0\.1:\d+/);
      const headLog = onHost(1, ["docker", "logs", "launcher-sg-ok-r0"]);
      assert.match(headLog, /The server is fired up and ready to roll!/);
      assert.match(onHost(2, ["docker", "logs", "launcher-sg-ok-r1"]), /^\[[\d :-]+ TP1\] Capture target decode CUDA graph end/m);
      const d = await listed("sg-ok");
      assert.equal(d?.engine, "sglang");
      assert.equal(d?.status, "serving");
      const client = new OpenAI({ baseURL: `${d?.endpoint ?? ""}/v1`, apiKey: "none", maxRetries: 0, timeout: 30_000 });
      const r = await client.chat.completions.create({ model: "practice-sglang", max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
      assert.equal(r.model, "practice-sglang");
    } finally {
      ok(await launcher(["down", "deployment/sg-ok", "--grace", "1"]), "down");
    }
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a failed SGLang boot is rolled back with its root cause named: the scheduler's exception, not its peer's lost-peer line", async () => {
    const recipe = variant(dir, "sg-oom", BASE, '[env]\nPRACTICE_FAULT = "cuda_oom"\nPRACTICE_FAULT_RANK = "1"\n');
    const up = await launcher(["up", recipe, "--nodes", "n1,n2", "--timeout", "90"]);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /boot of sg-oom failed/);
    assert.match(up.stderr, /\(rank 1\)/);
    assert.match(up.stderr, /cause: torch\.OutOfMemoryError: CUDA out of memory/);
    assert.match(up.stderr, /hint: the GPU ran out of memory: lower --mem-fraction-static/);
    // The scheduler's line names the cause; its process tree exits after it (SGLang's SIGQUIT
    // handler), and the head, which only lost its peer at the load barrier, is not blamed.
    assert.doesNotMatch(up.stderr, /\(rank 0\): boot of sg-oom failed/);
    assert.match(up.stderr, /rolled back/);
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a recipe key SGLang ignores is refused at validate, at its line", async () => {
    const recipe = variant(dir, "sg-ray", BASE, 'distributed_backend = "ray"\n[env]\nVLLM_USE_V1 = "1"\n');
    const r = await launcher(["validate", recipe]);
    assert.equal(r.code, 1, r.stdout);
    const out = `${r.stdout}${r.stderr}`;
    assert.match(out, /sg-ray\/recipe\.toml:2:\d+: error: distributed_backend is not read by SGLang: engine = "sglang" ignores it \(vLLM reads it\)/);
    assert.match(out, /sg-ray\/recipe\.toml:4:\d+: error: env VLLM_USE_V1 is read only by vLLM/);
  });

  test("a lane swapped vLLM -> SGLang -> vLLM while clients keep streaming: no request fails, each engine answers in turn", async (t) => {
    ok(await launcher(["down", "--all", "--grace", "1"]), "an empty cluster");
    const gw = await startGateway();
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "none", maxRetries: 0, timeout: 30_000 });
    try {
      ok(await launcher(["up", "practice-2x", "--lane", "mixed", "--nodes", "n1,n2", "--json"], 120_000), "up vLLM");
      await within(30_000, "lane mixed routable", async () => ((await client.models.list()).data.some((m) => m.id === "mixed" && (m as unknown as { status: string }).status === "serving") ? true : undefined));
      let swapping = true;
      let started = 0;
      const failures: string[] = [];
      const models: string[] = [];
      const loop = async (): Promise<void> => {
        // Bounded: at most 2000 requests or 240 s per loop.
        const deadline = Date.now() + 240_000;
        for (let i = 0; i < 2000 && Date.now() < deadline; i++) {
          const last = !swapping;
          started++;
          try {
            const s = await client.chat.completions.create({ model: "mixed", max_tokens: 20, stream: true, messages: [{ role: "user", content: `n${i}` }] });
            let model = "";
            let n = 0;
            for await (const c of s) {
              model = c.model;
              if (c.choices[0]?.delta.content) n++;
            }
            if (n !== 20) failures.push(`request ${i}: ${n} tokens`);
            if (models.at(-1) !== model) models.push(model);
          } catch (e) {
            failures.push(`request ${i}: ${(e as Error).message}`);
          }
          if (last) break;
        }
      };
      const loops = [loop(), loop()];
      await within(10_000, "both client loops sent a request", async () => (started >= 2 ? true : undefined));
      const toSglang = await launcher(["up", BASE, "--lane", "mixed", "--json"], 180_000);
      ok(toSglang, "swap to SGLang");
      await within(30_000, "a request answered by SGLang", async () => (models.includes("practice-sglang") ? true : undefined));
      const back = await launcher(["up", "practice-2x", "--lane", "mixed", "--json"], 180_000);
      swapping = false;
      await Promise.all(loops);
      ok(back, "swap back to vLLM");
      t.diagnostic(`models in order: ${models.join(" -> ")}; ${started} requests`);
      for (const [r, engine] of [[toSglang, "practice-sglang-2x"], [back, "practice-2x"]] as const) {
        const j = JSON.parse(r.stdout) as { mode: string; deployment: string };
        assert.deepEqual([j.mode, j.deployment], ["disjoint", engine]);
      }
      assert.deepEqual(failures, []);
      assert.deepEqual(models, ["practice", "practice-sglang", "practice"]);
      assert.deepEqual(launcherContainers(HOSTS).filter((c) => c.endsWith(":running")).length, 2);
    } finally {
      await gw.stop();
      await launcher(["down", "--all", "--grace", "1"]);
    }
  });
});
