import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { launcher, launcherContainers, launcherUntil, onHost, slowLinks, variant, practiceSuite } from "../practice-cluster.js";

// `up` hardening (issue 9) on the wire: a signal heard at any step (push, preflight, a lane's
// drain), a hung boot left by a killed `up` (its claims taken over), and a hang blamed on the rank
// that holds the boot up, all rolled back. The decisions themselves (same name, another port, busy
// nodes, a rollback of only its own boot, blame) are test/unit/up-decisions.test.ts's, over a
// FakeCluster. 4 hosts: a second deployment on n3,n4.
const HOSTS = 4;
// Fresh hosts, not the shared ones (practiceSuite): the file slows n3's links and removes its practice image.
const dir = practiceSuite(HOSTS, "launcher-up-");

async function downAll(): Promise<void> {
  const r = await launcher(["down", "--all", "--grace", "1"]);
  assert.equal(r.code, 0, r.stderr);
}

/** Starts `up` and resolves once its stderr matches `ready`; the caller signals it. */
const upUntil = (args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}) => launcherUntil(["up", ...args], ready, env);

async function lastBoot(): Promise<{ outcome: string; deployment?: string; recipe: string }> {
  const r = await launcher(["history", "--json", "--limit", "1"]);
  assert.equal(r.code, 0, r.stderr);
  const { boots } = JSON.parse(r.stdout) as { boots: { outcome: string; recipe: string }[] };
  assert.ok(boots[0], r.stdout);
  return boots[0];
}

describe("up hardening on the practice cluster", { concurrency: false }, () => {
  test("Ctrl-C while the image is pushed: the push stops, nothing starts, history says interrupted", async () => {
    onHost(3, ["docker", "image", "rm", "--force", "practice-engine:local"]);
    // Slow enough that the push is still going when the signal comes.
    // Both links: an image goes node to node over the fabric.
    const unshape = slowLinks(3, ["m", "f"], ["tbf", "rate", "16mbit", "burst", "64kb", "latency", "500ms"]);
    try {
      const boot = await upUntil(["practice-2x", "--nodes", "n3,n4", "--name", "pushed"], /image practice-engine:local: sending it from n4 to n3[^]*\n +n3 +[\d.]+ MiB/);
      boot.child.kill("SIGINT");
      assert.equal(await boot.closed, 130, boot.stderr());
      assert.match(boot.stderr(), /interrupted \(SIGINT\): the push of practice-engine:local was stopped/);
      assert.doesNotMatch(boot.stderr(), /\n\s+at .*\.ts:\d+/);
      assert.deepEqual(launcherContainers(HOSTS), []);
      // The load was cut short: n3 has no image under the name, not half of one.
      assert.equal(onHost(3, ["docker", "images", "--quiet", "practice-engine:local"]).trim(), "");
      const last = await lastBoot();
      assert.equal(last.outcome, "interrupted");
    } finally {
      unshape();
      await downAll();
    }
  });

  test("Ctrl-C during preflight: nothing starts, exit 130 at once, history says interrupted", async () => {
    // A node that stops answering in the middle of the preflight, as on a hung network filesystem:
    // this machine's ssh is wrapped so that the weights check of n2 (the cache's `inspect`, which
    // only the preflight runs) never returns, so the preflight lasts until the signal comes. A
    // FIFO at refs/main cannot hold it: the cache check refuses anything but a regular file.
    const shim = mkdtempSync(path.join(tmpdir(), "launcher-ssh-shim-"));
    const real = execFileSync("sh", ["-c", "command -v ssh"], { encoding: "utf8" }).trim();
    // The cache program's operation follows its `--` (hf-cache.ts cacheArgv); `docker inspect` has none.
    writeFileSync(path.join(shim, "ssh"), `#!/bin/sh\ncase "$*" in *lnch-n2*"-- inspect "*) exec sleep 120 ;; esac\nexec ${real} "$@"\n`, { mode: 0o755 });
    try {
      const boot = await upUntil(["practice-2x", "--name", "preflown"], /preflight of preflown on n1, n2/, { PATH: `${shim}:${process.env.PATH ?? ""}` });
      const signalled = Date.now();
      boot.child.kill("SIGINT");
      assert.equal(await boot.closed, 130, boot.stderr());
      assert.ok(Date.now() - signalled < 10_000, `exited ${Date.now() - signalled} ms after the signal:\n${boot.stderr()}`);
      assert.match(boot.stderr(), /interrupted \(SIGINT\): during the preflight of preflown; no container was started/);
      assert.deepEqual(launcherContainers(HOSTS), []);
      assert.equal((await lastBoot()).outcome, "interrupted");
    } finally {
      rmSync(shim, { recursive: true, force: true });
      await downAll();
    }
  });

  test("a hung boot left by a killed up is not 'already running': up names its state and the fix", async () => {
    const recipe = variant(dir, "hung", "practice-2x", `[env]\nPRACTICE_FAULT = "hang"\n`);
    try {
      const boot = await upUntil([recipe], /n1 +loading/);
      boot.child.kill("SIGKILL");
      await boot.closed;
      assert.equal(launcherContainers(HOSTS).length, 2, "the killed up could not roll back");
      const r = await launcher(["up", recipe]);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.doesNotMatch(r.stdout, /already running/);
      assert.match(r.stderr, /deployment hung exists on n1, n2 but does not serve \(status booting, phase loading\)/);
      assert.match(r.stderr, /launcher down hung/);
      // The killed up's claims are not waited out: its pid is gone from this machine.
      assert.match(r.stderr, new RegExp(`n1: taking over the claim of \`launcher up ${recipe}\` \\(pid ${boot.child.pid} on [^)]*\\): that process no longer runs on this machine`));
      assert.equal(launcherContainers(HOSTS).length, 2, "nothing started, nothing removed");
    } finally {
      await downAll();
    }
  });

  test("Ctrl-C while a lane swap drains the old deployment: the new one is removed, the lane serves the old one", async () => {
    const next = variant(dir, "next", "practice-2x", `[env]\nPRACTICE_KV_TOKENS = "1000000"\n`);
    const stream = new AbortController();
    try {
      const first = await launcher(["up", "practice-2x", "--lane", "chat", "--json"]);
      assert.equal(first.code, 0, first.stderr);
      const { endpoint } = JSON.parse(first.stdout) as { endpoint: string };
      // A long answer in flight keeps the old deployment draining.
      const res = await fetch(`${endpoint}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "practice", stream: true, max_tokens: 4096, messages: [{ role: "user", content: "a long answer" }] }),
        signal: stream.signal,
      });
      assert.equal(res.status, 200);
      const swap = await upUntil([next, "--lane", "chat", "--drain", "60s"], /lane chat: draining practice-2x/);
      swap.child.kill("SIGINT");
      assert.equal(await swap.closed, 130, swap.stderr());
      assert.match(swap.stderr(), /interrupted \(SIGINT\): the swap of lane chat was undone \(the new next: removed 2 containers \(n3\/launcher-next-r0, n4\/launcher-next-r1\)\); lane chat serves practice-2x again; nothing was stopped/);
      assert.deepEqual(launcherContainers(HOSTS), ["n1:launcher-practice-2x-r0:running", "n2:launcher-practice-2x-r1:running"]);
      const lanes = await launcher(["lanes", "--json"]);
      const chat = (JSON.parse(lanes.stdout) as { lanes: { lane: string; state: string; deployment?: string; swaps: { outcome: string }[] }[] }).lanes.find((l) => l.lane === "chat");
      assert.equal(chat?.state, "serving");
      assert.equal(chat?.deployment, "practice-2x");
      assert.equal(chat?.swaps[0]?.outcome, "interrupted");
    } finally {
      stream.abort();
      await downAll();
    }
  });

  test("a worker that hangs is blamed, not the head that waits for it", async () => {
    const recipe = variant(dir, "worker-hang", "practice-2x", `[env]\nPRACTICE_FAULT = "hang"\nPRACTICE_FAULT_RANK = "1"\n`);
    try {
      // 12 s: both ranks must reach their phase (the head the rendezvous) before the timer ends, on a busy machine too.
      const r = await launcher(["up", recipe, "--timeout", "12s"]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n2 \(rank 1\): boot of worker-hang failed: never joined the other ranks: timed out after 12 s \(phase loading\) while n1 waited at the rendezvous/);
      assert.match(r.stderr, /last lines of n2's log/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await downAll();
    }
  });
});
