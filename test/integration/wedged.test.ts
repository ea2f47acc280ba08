import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, ok, practiceSuite, startGateway, variant, within, type Daemon, storedRestarts } from "./practice-cluster.js";

// A wedged engine (issue 30): the practice engine's PRACTICE_WEDGE_AFTER_MS keeps /health at 200
// and stops every generation, as an EngineCore in a decode hang does. The daemon's probe finds it
// within its bound; the gateway stops routing to it (503 deployment_wedged, since when), /health
// and /metrics say so, and under --restart on-failure its group is recreated with the reason
// `wedged`. The rule and the watch are proved over fakes in test/unit/generation.test.ts.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-wedged-");

/** Wedged 3 s after its API listens: time for `up` to see it ready, then nothing generates. */
const WEDGE = variant(dir, "practice-wedge", "practice-2x", `args = ["--served-model-name", "wedge"]\n[env]\nPRACTICE_WEDGE_AFTER_MS = "3000"\n`);

/** A probe after 1 s without a generation, failed after 2 s: a wedge is found within about 3 s of its start. */
const PROBE = ["--probe-every", "1s", "--probe-bound", "2s"];

/** The daemon, its polls and restarts quick, its probe as PROBE says. */
const daemon = (args: readonly string[]): Promise<Daemon> => startGateway(["--poll", "500ms", "--restart-backoff", "1s", ...PROBE, ...args]);

/** One chat request through the gateway, given up after 3 s (a wedged engine never answers): "STATUS CODE MESSAGE" or "no answer". */
async function ask(d: Daemon, model: string): Promise<string> {
  try {
    const r = await fetch(`${d.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
      signal: AbortSignal.timeout(3000),
    });
    const body = (await r.json()) as { error?: { code?: string; message?: string } };
    return `${r.status} ${body.error?.code ?? ""} ${body.error?.message ?? ""}`.trim();
  } catch (e) {
    if ((e as Error).name === "TimeoutError") return "no answer";
    throw e;
  }
}

async function health(d: Daemon): Promise<Record<string, string>> {
  const h = (await (await fetch(`${d.url}/health`, { signal: AbortSignal.timeout(5000) })).json()) as { supervision?: Record<string, string> };
  return h.supervision ?? {};
}

const here = { LAUNCHER_DAEMON: "none" };

describe("a wedged engine: /health answers, nothing generates", { concurrency: false }, () => {
  test("reported wedged within its bound (/health, /metrics), and taken out of its lane: 503 deployment_wedged that says since when", { timeout: 180_000 }, async (t) => {
    const gw = await daemon([]);
    try {
      ok(await launcher(["up", WEDGE, "--name", "wedge-a", "--lane", "stuck"], 120_000, here), "up wedge-a");
      // Asked until the gateway refuses it; a request the engine took after its wedge never ends (3 s each).
      const seen: string[] = [];
      const { value: refused } = await within(60_000, "503 deployment_wedged", async () => {
        const a = await ask(gw, "stuck");
        if (seen.at(-1) !== a) seen.push(a);
        return a.startsWith("503 deployment_wedged") ? a : undefined;
      }).catch((e: Error) => assert.fail(`${e.message}; answers: ${seen.join(" | ")}\n${gw.log()}`));
      assert.match(refused, /^503 deployment_wedged model stuck: deployment wedge-a is wedged since \d{4}-\d\d-\d\dT[\d:.]+Z: \/health answers but (no generation completed since then|it completed no generation since it was first seen serving then) /);
      assert.match(refused, /\(its probe of one token got no answer within 2 s\)$/);
      // A diagnostic only: from its last generation to the gateway's refusal (about the probe period plus its bound, and a poll of the answers).
      t.diagnostic(`last generation to 503 deployment_wedged: ${Date.now() - Date.parse(/wedged since (\S+):/.exec(refused)?.[1] ?? "")} ms`);
      // Only answers, no answer (a request the wedged engine holds) or the refusal: never a 404.
      assert.deepEqual(seen.filter((s) => !/^(200|no answer|503 deployment_wedged)/.test(s)), [], seen.join(" | "));
      const key = Object.keys(await health(gw)).find((k) => k.endsWith("/wedge-a"));
      assert.match((await health(gw))[key ?? ""] ?? "", /^wedged since \d{4}-/);
      const metrics = await (await fetch(`${gw.url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
      assert.match(metrics, /^launcher_gateway_deployment_wedged\{cluster="[^"]+",deployment="wedge-a"\} 1$/m);
      assert.match(gw.log(), /generation: deployment wedge-a is wedged since /);
      // `launcher status` reads the nodes and the store the daemon keeps the wedge in.
      const shown = ok(await launcher(["status"], 60_000, here), "status");
      assert.match(shown.stdout, /^ {2}wedged: deployment wedge-a is wedged since \S+: \/health answers but .* \(found by the daemon at \S+\)$/m);
      const json = JSON.parse(ok(await launcher(["status", "--json"], 60_000, here), "status --json").stdout) as { wedged?: Record<string, { since: string; message: string }> };
      assert.match(json.wedged?.["wedge-a"]?.since ?? "", /^\d{4}-\d\d-\d\dT/);
      // Not supervised (no --restart): it is left as it is, only not routed to.
      assert.deepEqual(storedRestarts("wedge-a"), []);
    } finally {
      await gw.stop();
      await launcher(["down", "deployment/wedge-a", "--grace", "1"], 120_000, here);
    }
  });

  test("under --restart on-failure its group is recreated, the restart recorded with the reason wedged", { timeout: 240_000 }, async () => {
    const gw = await daemon([]);
    try {
      ok(await launcher(["up", WEDGE, "--name", "wedge-b", "--restart", "on-failure:1"], 120_000, here), "up wedge-b --restart");
      const { value: r } = await within(90_000, "a restart recorded with the reason wedged, its boot served", async () => storedRestarts("wedge-b").find((x) => x.reason === "wedged" && x.outcome === "ready")).catch((e: Error) =>
        assert.fail(`${e.message}: ${JSON.stringify(storedRestarts("wedge-b"))}\n${gw.log()}`),
      );
      assert.equal(r.attempt, 1);
      assert.match(r.message ?? "", /^deployment wedge-b is wedged since .*\(its probe of one token got no answer within 2 s\)$/);
      assert.match(gw.log(), /supervise: wedge-b: deployment wedge-b is wedged since .*; recreating the whole group \(restart 1 of at most 1\)/);
      // The restart's record is ended as its boot serves; the supervisor says so once its poll sees it serve.
      await within(30_000, "the daemon saying wedge-b serves again", async () => (/supervise: wedge-b: wedge-b serves again \(restart 1 of at most 1\)/.test(gw.log()) ? true : undefined));
      const history = ok(await launcher(["history"], 60_000, here), "history");
      assert.match(history.stdout, /wedge-b restart 1: deployment wedge-b is wedged since /);
    } finally {
      await gw.stop();
      await launcher(["down", "deployment/wedge-b", "--grace", "1"], 120_000, here);
    }
  });
});
