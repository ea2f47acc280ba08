import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { BOOT_PHASES } from "../../src/contract/deployment.js";
import { Store, type BootInProgress, type BootRecord } from "../../src/store/store.js";
import { launcher, launcherContainers, ok, onHost, practiceSuite, STATE_HOME, startGateway, supervisorPhase, variant, within, type Daemon } from "./practice-cluster.js";

// Two practice hosts: a boot of two ranks, slowed down (each phase waits) so that the daemon can be
// killed while it is in progress, end to end: a real process killed with SIGKILL, its boot's
// containers read again over SSH by the next daemon. The decisions (a daemon stopped with SIGTERM
// leaves its boot, the next adopts it and rolls it back when it fails; one that becomes ready is
// recorded once and routed) are proved over fake nodes in test/unit/serve-decisions.test.ts and
// test/unit/adopt.test.ts.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-adopt-");

const containersOf = (name: string): string[] => launcherContainers(HOSTS).filter((c) => c.includes(`launcher-${name}-r`));

/** What the daemons' store says of a deployment's boots, and the boots kept in progress. */
function stored(deployment: string): { boots: BootRecord[]; inProgress: BootInProgress[] } {
  const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
  try {
    return { boots: store.history(undefined, 50).filter((b) => b.deployment === deployment), inProgress: store.bootsInProgress().filter((b) => b.deployment === deployment) };
  } finally {
    store.close();
  }
}

const startedAt = (host: number, container: string): string => onHost(host, ["docker", "inspect", "--format", "{{.State.StartedAt}}", container]).trim();

/** Submits a detached boot to `daemon` and waits until every rank's container runs. */
async function bootInProgress(daemon: Daemon, recipe: string, name: string, extra: string[] = []): Promise<void> {
  ok(await launcher(["up", recipe, "--name", name, "--detach", "--timeout", "3m", ...extra], 60_000, { LAUNCHER_DAEMON: daemon.url }), "up --detach");
  await within(90_000, `both ranks of ${name} run`, async () => (containersOf(name).filter((c) => c.endsWith(":running")).length === HOSTS ? true : undefined));
}

describe("a daemon started again adopts the boots in progress of the one that died", { concurrency: false }, () => {
  test("killed with SIGKILL mid-boot: the next daemon watches the boot again, it becomes ready (booted once), is recorded, serves through the gateway and is supervised", { timeout: 240_000 }, async () => {
    // Each of the practice engine's 10 phase waits (docker-images/practice-engine/serve) is 700 ms:
    // the head serves about 7 s after the worker starts, and the SIGKILL comes one listing after
    // both run. A boot that was ready before the next daemon started is adopted all the same (its
    // logs are read again from the start), so only the kill must come first.
    const recipe = variant(dir, "adopt-ok", "practice-2x", `[env]\nPRACTICE_PHASE_DELAY_MS = "700"\n`);
    let first: Daemon | undefined = await startGateway(["--control"]);
    let second: Daemon | undefined;
    try {
      await bootInProgress(first, recipe, "adopt-ok", ["--lane", "adopt-lane", "--restart", "on-failure"]);
      const before = containersOf("adopt-ok");
      const started = [startedAt(1, "launcher-adopt-ok-r0"), startedAt(2, "launcher-adopt-ok-r1")];
      await first.stop("SIGKILL");
      first = undefined;
      assert.deepEqual(stored("adopt-ok").inProgress.length, 1, "the dead daemon's boot is kept in the store");
      second = await startGateway(["--control"]);
      assert.match(second.log(), /adopted the boot of adopt-ok \([0-9a-f]{12}\) left by launcher serve pid \d+/);
      // attach follows the adopted boot to its end, with up's answer and exit status.
      const attached = ok(await launcher(["attach", "adopt-ok"], 180_000, { LAUNCHER_DAEMON: second.url }), "attach");
      assert.match(attached.stdout, /^adopt-ok is ready in \d+\.\d s: http:\/\/[\d.]+:8000\/v1 \(model "practice"\)/);
      assert.match(attached.stderr, /the daemon that started this boot of adopt-ok .* stopped; this one watches it again/);
      assert.match(attached.stderr, new RegExp(`\\] n1 +${BOOT_PHASES.at(-1) as string}\\b`));
      // Nothing booted twice: the same containers, started once.
      assert.deepEqual(containersOf("adopt-ok"), before);
      assert.deepEqual([startedAt(1, "launcher-adopt-ok-r0"), startedAt(2, "launcher-adopt-ok-r1")], started);
      // Recorded as up records it: one boot, ready, and nothing left in progress.
      const s = stored("adopt-ok");
      assert.deepEqual(s.boots.map((b) => b.outcome), ["ready"]);
      assert.deepEqual(s.inProgress, []);
      // Routed by the new daemon's gateway through its lane.
      const daemon = second;
      const answer = await within(30_000, "the lane answers through the gateway", async () => {
        const r = await fetch(`${daemon.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "adopt-lane", max_tokens: 3, messages: [{ role: "user", content: "hi" }] }) });
        return r.status === 200 ? ((await r.json()) as { model: string }) : undefined;
      });
      assert.equal(answer.value.model, "practice");
      // Supervised under its --restart by the daemon that adopted it (its plan kept for a restart).
      await within(10_000, "the adopted deployment supervised as ready", async () => {
        const health = (await (await fetch(`${daemon.url}/health`)).json()) as { supervision?: Record<string, string> };
        return Object.entries(health.supervision ?? {}).some(([k, v]) => k.endsWith("/adopt-ok") && supervisorPhase(v) === "ready") ? true : undefined;
      });
    } finally {
      await first?.stop("SIGKILL");
      await second?.stop();
      await launcher(["down", "deployment/adopt-ok", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
    }
  });
});
