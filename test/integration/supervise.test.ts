import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { launcher, launcherContainers, launcherProcess, ok, onHost, practiceSuite, within, storedRestarts } from "./practice-cluster.js";

// Supervision (`up --restart`, the daemon recreating a group that failed after it served), on 2
// practice hosts, end to end: docker's die event, heard over SSH, starts a restart that the
// client, attach and the store all see. The decisions (at most N restarts with each cause, a
// restart cancelled by down, a daemon started again counting on from the labels) are proved over
// fake nodes in test/unit/serve-decisions.test.ts, and the policy in test/unit/supervise.test.ts.
const HOSTS = 2;
practiceSuite(HOSTS, "launcher-supervise-");

interface Daemon {
  readonly url: string;
  readonly child: ChildProcess;
  log(): string;
  /** Its log, each line stamped with when it came (ms since `from`): what a failed assertion shows. */
  timed(from: number): string;
  /** SIGTERM, then SIGKILL after 15 s. */
  stop(): Promise<void>;
}

/** `launcher serve` (polling every 500 ms unless `args` say otherwise), on a free loopback port, once it listens. */
async function daemon(args: readonly string[] = ["--poll", "500ms"]): Promise<Daemon> {
  const child = launcherProcess(["serve", "--listen", "127.0.0.1:0", "--restart-backoff", "1s", ...args]);
  let stderr = "";
  const stamped: string[] = [];
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
    for (const line of d.toString().split("\n")) if (line !== "") stamped.push(`${Date.now()} ${line}`);
  });
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const { value: port } = await within(30_000, `launcher serve listening (${stderr})`, async () => {
    if (child.exitCode !== null) throw new Error(`launcher serve exited ${child.exitCode}: ${stderr}`);
    return /listening on http:\/\/[\d.]+:(\d+)\/v1/.exec(stderr)?.[1];
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    log: () => stderr,
    timed: (from) => stamped.map((l) => l.replace(/^(\d+)/, (ms) => `+${Number(ms) - from}`)).join("\n"),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

const client = (d: Daemon): OpenAI => new OpenAI({ baseURL: `${d.url}/v1`, apiKey: "none", maxRetries: 0, timeout: 20_000 });

/** "200 MODEL", or "STATUS CODE retry-after=N" for an API error. */
async function ask(c: OpenAI, model: string): Promise<string> {
  try {
    const r = await c.chat.completions.create({ model, max_tokens: 3, messages: [{ role: "user", content: "hi" }] });
    return `200 ${r.model}`;
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    return `${e.status ?? "?"} ${e.code ?? ""} retry-after=${e.headers?.get("retry-after") ?? ""}`;
  }
}

const containersOf = (deployment: string): string[] => launcherContainers(HOSTS).filter((c) => c.includes(`launcher-${deployment}-r`));

/** Asks every 100 ms until the answer is `want`; every answer seen, in order, without repeats. */
async function askUntil(c: OpenAI, model: string, want: (answer: string, seen: readonly string[]) => boolean, ms: number): Promise<string[]> {
  const seen: string[] = [];
  try {
    await within(ms, `${model} answering as wanted`, async () => {
      const a = await ask(c, model);
      if (seen.at(-1) !== a) seen.push(a);
      return want(a, seen) ? true : undefined;
    });
  } catch (e) {
    throw new Error(`${(e as Error).message}; answers seen: ${seen.join(" | ")}`);
  }
  return seen;
}

/** Served again after a 503 deployment_restarting. */
const servedAfterRestart = (a: string, seen: readonly string[]): boolean => a === "200 practice" && seen.some((s) => s.startsWith("503 deployment_restarting"));

describe("supervision: launcher serve recreates a group that fails after it served", { concurrency: false }, () => {
  test("a worker killed after ready under --restart on-failure, the daemon at its default poll: docker's die event starts the restart; the client sees 503 deployment_restarting with Retry-After, then 200; the restart is recorded, and attach shows it from its start", { timeout: 180_000 }, async (t) => {
    // The default --poll (2 s): the die event, not a poll, is what notices the death.
    const gw = await daemon(["--control"]);
    const here = { LAUNCHER_DAEMON: "none" };
    try {
      ok(await launcher(["up", "practice-2x", "--name", "sup-a", "--lane", "sup", "--restart", "on-failure:2"], 120_000, here), "up --restart");
      const c = client(gw);
      await askUntil(c, "sup", (a) => a === "200 practice", 10_000);
      const killedAt = Date.now();
      onHost(2, ["docker", "kill", "launcher-sup-a-r1"]);
      // 503 restarting (never 404 or lane_empty while the group is down), then served again.
      const seen = await askUntil(c, "sup", servedAfterRestart, 60_000);
      const restarting = seen.find((s) => s.startsWith("503 deployment_restarting"));
      assert.ok(restarting !== undefined, `a 503 deployment_restarting between the kill and the next 200: ${seen.join(" | ")}`);
      assert.ok(Number(/retry-after=(\d+)/.exec(restarting)?.[1]) >= 1, restarting);
      // Before the failure is confirmed the lane is degraded; a request the dying head took may be
      // cut (502). Never 404 or lane_empty while the group is down.
      const expected = ["503 deployment_restarting", "503 deployment_degraded", "502 upstream_failed"];
      const unexpected = seen.filter((s) => s !== "200 practice" && !expected.some((e) => s.startsWith(e)));
      assert.deepEqual(unexpected, [], `only 200, ${expected.join(", ")}: ${seen.join(" | ")}`);
      // Recorded as done once the boot's claims are given back, a moment after it serves.
      const { value: r } = await within(10_000, "the restart recorded as ready", async () => storedRestarts("sup-a").find((x) => x.outcome === "ready"));
      assert.equal(r.attempt, 1);
      // A diagnostic only (bench/restart.ts measures the 1 s figure): the kill to the restart recorded (settle and cause read, before the removal).
      t.diagnostic(`kill to restart issued: ${Date.parse(r.started_at) - killedAt} ms`);
      assert.equal(r.reason, "rank-exited");
      assert.equal(r.node, "n2", gw.timed(killedAt));
      assert.equal(r.rank, 1);
      assert.equal(r.outcome, "ready");
      assert.match(gw.log(), /supervise: sup-a: .*recreating the whole group \(restart 1 of at most 2\)/);
      // Noticed through the node's docker events (the supervisor logs each death docker reports).
      assert.match(gw.log(), /supervise: sup-a: docker on n2 says rank 1 on n2 exited \(exit 137\)/);
      // The restart was a boot of the daemon: attach shows it from its start to up's answer.
      const attached = ok(await launcher(["attach", "sup-a"], 30_000, { LAUNCHER_DAEMON: gw.url }), "attach sup-a");
      assert.match(attached.stderr, /recreating the whole group \(restart 1 of at most 2\)/);
      assert.match(attached.stderr, /removed 2 containers \(n1\/launcher-sup-a-r0, n2\/launcher-sup-a-r1\)/);
      assert.match(attached.stdout, /^sup-a is ready in [\d.]+ s: /m);
      // The whole group is new: both ranks run again, each started after the kill.
      const states = containersOf("sup-a");
      assert.deepEqual(states, ["n1:launcher-sup-a-r0:running", "n2:launcher-sup-a-r1:running"]);
      const started = onHost(1, ["docker", "inspect", "--format", "{{.State.StartedAt}}", "launcher-sup-a-r0"]).trim();
      assert.ok(Date.parse(started) > killedAt - 1000, `the head was recreated too (started ${started})`);
      // `launcher down` while the daemon watches: the ranks it removes are no failure; nothing is booted again.
      const recorded = storedRestarts("sup-a").length;
      ok(await launcher(["down", "deployment/sup-a", "--grace", "1"], 120_000, here), "down sup-a");
      await within(15_000, "the daemon forgets sup-a", async () => {
        const health = (await (await fetch(`${gw.url}/health`, { signal: AbortSignal.timeout(5000) })).json()) as { supervision?: Record<string, string> };
        return Object.keys(health.supervision ?? {}).some((k) => k.endsWith("/sup-a")) ? undefined : true;
      });
      assert.deepEqual(containersOf("sup-a"), []);
      // A failure the daemon saw mid-down is cancelled, never booted.
      assert.deepEqual(storedRestarts("sup-a").slice(0, storedRestarts("sup-a").length - recorded).filter((x) => x.outcome !== "cancelled"), []);
    } finally {
      await gw.stop();
      await launcher(["down", "deployment/sup-a", "--grace", "1"], 120_000, here);
    }
  });
});
