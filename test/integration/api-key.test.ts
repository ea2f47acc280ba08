import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, ok, practiceSuite, startGateway, variant, within } from "./practice-cluster.js";

// A recipe whose engine demands a key (--api-key in args, or VLLM_API_KEY in env): vLLM then
// answers 401 on /v1 without `Authorization: Bearer KEY` (vllm/entrypoints/openai/api_server.py
// build_app), and so does the practice engine. `up`'s readiness check, the gateway's upstream
// requests and a lane switch must carry the key; no output of launcher may show it.
const dir = practiceSuite(2, "launcher-apikey-");
const FLAG_KEY = "sk-engine-flag-5d2a91";
const ENV_KEY = "sk-engine-env-88c3e0";
const ENDPOINT = "http://10.231.0.11:8000";

const leaks = (text: string): boolean => text.includes(FLAG_KEY) || text.includes(ENV_KEY);
const flagKeyed = (): string => variant(dir, "keyed-flag", "practice-2x", `args = ["--api-key", "${FLAG_KEY}"]\n`);

describe("an engine API key on the practice cluster", { concurrency: false }, () => {
  test("plan shows the key redacted; up is ready through the key; the engine refuses requests without it", async () => {
    const keyed = flagKeyed();
    const plan = ok(await launcher(["plan", keyed]), "plan");
    assert.ok(!leaks(plan.stdout + plan.stderr), plan.stdout);
    // The key reaches the engine in its env (on docker run's stdin), not as --api-key.
    assert.match(plan.stdout, /^VLLM_API_KEY=<redacted>$/m);
    const planJson = ok(await launcher(["plan", keyed, "--json"]), "plan --json");
    assert.ok(!leaks(planJson.stdout), "plan --json");

    // Before the fix the readiness check's chat completion got 401 and `up` never became ready.
    const up = ok(await launcher(["up", keyed, "--lane", "main", "--json"], 120_000), "up");
    assert.ok(!leaks(up.stdout + up.stderr), "up prints no key");
    assert.equal((await fetch(`${ENDPOINT}/v1/models`, { signal: AbortSignal.timeout(5000) })).status, 401);
    const withKey = await fetch(`${ENDPOINT}/v1/models`, { headers: { authorization: `Bearer ${FLAG_KEY}` }, signal: AbortSignal.timeout(5000) });
    assert.equal(withKey.status, 200);
    // The engine's arguments no longer hold the key (it is in its env): its log has none to hide.
    const logs = ok(await launcher(["logs", "keyed-flag"]), "logs");
    assert.doesNotMatch(logs.stdout, /'api_key'/);
    assert.ok(!leaks(logs.stdout + logs.stderr), "logs print no key");
  });

  test("the gateway sends the deployment's key upstream, also after a lane switch to a VLLM_API_KEY recipe", async () => {
    // On its own too: the lane holds the --api-key deployment (already running after the test above).
    const held = ok(await launcher(["up", flagKeyed(), "--lane", "main", "--json"], 120_000), "up");
    assert.ok(!leaks(held.stdout + held.stderr), "up prints no key");
    const gw = await startGateway();
    try {
      const chat = async (): Promise<Response> =>
        fetch(`${gw.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "main", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
          signal: AbortSignal.timeout(10_000),
        });
      const first = await within(10_000, "main answers through the gateway", async () => {
        const r = await chat();
        return r.status === 200 ? r : undefined;
      });
      assert.equal(((await first.value.json()) as { model: string }).model, "practice");

      const envKeyed = variant(dir, "keyed-env", "practice-2x", `[env]\nVLLM_API_KEY = "${ENV_KEY}"\n`);
      const swap = ok(await launcher(["up", envKeyed, "--lane", "main", "--json"], 120_000), "lane switch");
      assert.ok(!leaks(swap.stdout + swap.stderr), "the switch prints no key");
      assert.equal((await fetch(`${ENDPOINT}/v1/models`, { headers: { authorization: `Bearer ${FLAG_KEY}` }, signal: AbortSignal.timeout(5000) })).status, 401, "the new engine wants the env key");
      const after = await within(10_000, "main answers through the gateway after the switch", async () => {
        const r = await chat();
        return r.status === 200 ? r : undefined;
      });
      assert.equal(after.value.status, 200);
      assert.ok(!leaks(gw.log()), "the gateway logs no key");
    } finally {
      await gw.stop();
    }
  });
});
