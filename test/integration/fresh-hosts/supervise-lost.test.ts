import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { launcher, launcherContainers, ok, onHost, practiceSuite, QUICK_SILENCE_SSH, startGateway, supervisorPhase, within, storedRestarts } from "../practice-cluster.js";

// A node that stops answering after its deployment served, under `up --restart on-failure`, and
// what the daemon then does: on 2 practice hosts, the management link of one host cut on this
// machine's side (as test/integration/fresh-hosts/unreachable.test.ts does), then restored.
const HOSTS = 2;
// Fresh hosts, not the shared ones (practiceSuite): the file cuts management links; ssh gives up on
// a silent host in seconds (QUICK_SILENCE_SSH), as a user may set in a cluster file.
practiceSuite(HOSTS, "launcher-supervise-lost-", { sshOptions: QUICK_SILENCE_SSH });

/** Cuts (or restores) host i's management link on this machine's side: SSH and HTTP to it go silent. */
const link = (i: number, state: "up" | "down"): void => {
  assert.equal(spawnSync("ip", ["link", "set", `lnchm${i}`, state], { encoding: "utf8" }).status, 0, `link n${i} ${state}`);
};

/** The lane's answer through the daemon: "200", or "STATUS CODE". */
async function ask(url: string, model: string): Promise<string> {
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 3 }),
    signal: AbortSignal.timeout(20_000),
  }).catch((e: unknown) => ({ status: 0, text: async () => (e as Error).message }));
  if (r.status === 200) return "200";
  const body = await r.text();
  return `${r.status} ${/"code":"([^"]+)"/.exec(body)?.[1] ?? body.slice(0, 80)}`;
}

/** What the daemon's /health says its supervisor does with `deployment` ("ready", "backoff (1 restart)", ...). */
async function supervision(url: string, deployment: string): Promise<string | undefined> {
  const health = (await (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) })).json()) as { supervision?: Record<string, string> };
  return Object.entries(health.supervision ?? {}).find(([k]) => k.endsWith(`/${deployment}`))?.[1];
}

describe("supervision: a node that stops answering after ready", { concurrency: false }, () => {
  test("the worker's node silent: the head still serves over the fabric, so nothing is restarted; the head's node silent: each restart fails while it does not answer (said why, nothing booted on the other node), and the next one after it answers again serves", { timeout: 480_000 }, async () => {
    const gw = await startGateway(["--poll", "500ms", "--restart-backoff", "1s"]);
    const here = { LAUNCHER_DAEMON: "none" };
    const cut = new Set<number>();
    const silence = (i: number): void => {
      link(i, "down");
      cut.add(i);
    };
    const answerAgain = async (i: number): Promise<void> => {
      link(i, "up");
      cut.delete(i);
      await within(60_000, `n${i} answers again`, async () => (onHost(i, ["true"]) === "" ? true : undefined));
    };
    try {
      ok(await launcher(["up", "practice-2x", "--name", "lost-a", "--lane", "lost", "--restart", "on-failure"], 120_000, here), "up --restart");
      await within(30_000, "the lane serves", async () => ((await ask(gw.url, "lost")) === "200" ? true : undefined));
      await within(30_000, "the daemon supervises lost-a as ready", async () => ((await supervision(gw.url, "lost-a")) === "ready" ? true : undefined));

      // 1. The worker's node goes silent. Its rank still runs and talks to the head over the
      // fabric, and the head answers /health: by design no failure (src/supervise/supervise.ts failureOf).
      silence(2);
      await within(60_000, "discovery notices n2", async () => (/n2 unreachable/.test(gw.log()) ? true : undefined));
      for (let i = 0; i < 3; i++) assert.equal(await ask(gw.url, "lost"), "200", `served while n2 is silent (ask ${i + 1})`);
      assert.equal(await supervision(gw.url, "lost-a"), "ready");
      assert.deepEqual(storedRestarts("lost-a"), [], "no restart for a silent node whose group still serves");
      await answerAgain(2);

      // 2. The head's node goes silent: the deployment no longer answers, a failure once confirmed.
      silence(1);
      const { value: failed } = await within(180_000, "a restart tried and failed while n1 does not answer", async () => storedRestarts("lost-a").find((r) => r.outcome === "failed"));
      assert.equal(failed.reason, "node-unreachable", JSON.stringify(failed));
      assert.equal(failed.node, "n1");
      assert.match(failed.error ?? "", /n1/, "the error names the silent node");
      assert.match(gw.log(), /supervise: lost-a: restart 1 failed: /);
      // Meanwhile: nothing of lost-a was booted on the node that answers (the old worker was removed there).
      assert.equal(onHost(2, ["docker", "ps", "--all", "--quiet", "--filter", "label=launcher.deployment=lost-a"]).trim(), "", "nothing of lost-a on n2 while n1 is silent");
      const during = await supervision(gw.url, "lost-a");
      const phase = supervisorPhase(during);
      assert.ok(phase === "backoff" || phase === "restarting", `tried again after its backoff: ${during ?? "?"}`);

      // 3. n1 answers again: the next try removes what is left of the old group and boots it whole.
      const back = Date.now();
      await answerAgain(1);
      await within(180_000, "the lane serves again", async () => ((await ask(gw.url, "lost")) === "200" ? true : undefined));
      // The row ends once the restart's boot has returned, a moment after the lane answers.
      const { value: rows } = await within(30_000, "the last restart recorded ready", async () => {
        const all = storedRestarts("lost-a");
        return all[0]?.outcome === "ready" ? all : undefined;
      });
      assert.ok(rows.slice(1).every((r) => r.outcome === "failed"), JSON.stringify(rows));
      const started = onHost(1, ["docker", "inspect", "--format", "{{.State.StartedAt}}", "launcher-lost-a-r0"]).trim();
      assert.ok(Date.parse(started) > back - 1000, `the head was recreated once n1 answered (started ${started})`);
      assert.deepEqual(launcherContainers(HOSTS).filter((c) => c.includes("lost-a")), ["n1:launcher-lost-a-r0:running", "n2:launcher-lost-a-r1:running"]);
    } finally {
      for (const i of cut) link(i, "up");
      await launcher(["down", "deployment/lost-a", "--grace", "1"], 120_000, here);
      await gw.stop();
    }
  });
});
