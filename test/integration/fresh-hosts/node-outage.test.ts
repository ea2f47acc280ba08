import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { NODE_GUARD_STALL_MS } from "../../../src/memory/node-guard.js";
import { launcher, ok, practiceSuite, QUICK_SILENCE_SSH, startGateway, within, type Daemon } from "../practice-cluster.js";

// A node that stops answering while it serves (issue 30): the head's management link is cut on
// this machine's side, so SSH and HTTP to it go silent, as a node that lost power or its switch
// port. The daemon says since when, which kind (vanished: nothing answers at its SSH port), its
// last memory sample and what ran there, in its log, in status and in the gateway's 503; when the
// link returns it says so, history keeps the outage with its end, and the gateway routes again
// only after a poll read the node anew. The rule is proved in test/unit/node-outage.test.ts.
const HOSTS = 2;
// Fresh hosts (the file cuts a link); ssh gives up on a silent host in seconds.
practiceSuite(HOSTS, "launcher-outage-", { sshOptions: QUICK_SILENCE_SSH });

const link = (i: number, state: "up" | "down"): void => {
  assert.equal(spawnSync("ip", ["link", "set", `lnchm${i}`, state], { encoding: "utf8" }).status, 0, `link n${i} ${state}`);
};

/** One chat request through the gateway, bounded: its status and body. */
async function ask(gateway: Daemon): Promise<{ status: number; body: string }> {
  const r = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "practice", messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: r.status, body: await r.text() };
}

const SINCE = /since (\d{4}-\d\d-\d\dT[\d:.]+Z) \(vanished\), last seen with [\d.]+ GiB available of [\d.]+ GiB \(at \S+\)/;

describe("a node that stops answering while it serves", { concurrency: false }, () => {
  test("its head's node cut: vanished since when, its memory and what ran there in the log, status and the 503; back: said, in history with its end, routed again", async () => {
    ok(await launcher(["up", "practice-2x"], 240_000), "up");
    const gateway = await startGateway();
    let cut = false;
    let passed = false;
    try {
      await within(60_000, "the gateway routes practice", async () => ((await ask(gateway)).status === 200 ? true : undefined));
      // The daemon's guard watches the node's memory: its last sample is what the outage shows.
      await within(60_000, "the daemon's guard sampled n1", async () => {
        const s = JSON.parse((await launcher(["status", "--json"])).stdout) as { memory: Record<string, unknown> };
        return s.memory.n1 === undefined ? undefined : true;
      });
      link(1, "down");
      cut = true;

      const { value: began } = await within(60_000, "the daemon logs n1's outage", async () => new RegExp(`! node \\S+/n1 ${SINCE.source}: it stopped answering while it ran practice-2x rank 0`).exec(gateway.log()) ?? undefined);
      const since = began[1] as string;
      assert.equal(gateway.log().match(/! node \S+\/n1 since/g)?.length, 1, "one line when it begins");

      const refused = await ask(gateway);
      assert.equal(refused.status, 503, refused.body);
      const error = (JSON.parse(refused.body) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, "deployment_unreachable");
      assert.match(error.message, new RegExp(`n1 unreachable and its head does not answer /health; n1 since ${since} \\(vanished\\), last seen with [\\d.]+ GiB available`));

      const text = await launcher(["status"], 120_000);
      assert.equal(text.code, 1, "a node could not be read");
      assert.match(text.stdout, new RegExp(`node vanished: n1 since ${since} \\(vanished\\), last seen with [\\d.]+ GiB available of [\\d.]+ GiB \\(at \\S+\\); it ran practice-2x rank 0`));
      const json = JSON.parse((await launcher(["status", "--json"], 120_000)).stdout) as { ssh_port: Record<string, string>; node_outages: { node: string; kind: string; since: string; deployments: unknown; memory?: { available_kib: number } }[] };
      assert.deepEqual(json.ssh_port, { n1: "silent" });
      assert.deepEqual(json.node_outages.map((o) => [o.node, o.kind, o.since, o.deployments]), [["n1", "vanished", since, [{ deployment: "practice-2x", ranks: [0] }]]]);
      assert.ok((json.node_outages[0]?.memory?.available_kib ?? 0) > 0);

      link(1, "up");
      cut = false;
      const { value: back } = await within(60_000, "the daemon logs n1 back", async () => /\+ node \S+\/n1 answers again at (\S+), after \d+ s vanished \(since (\S+)\); its containers were read again in this poll/.exec(gateway.log()) ?? undefined);
      assert.equal(back[2], since);
      // n1's own guard ran on through it: the node lived, its link was down.
      await within(30_000, "the daemon says what n1's guard saw", async () => (new RegExp(`\\+ node \\S+/n1 \\(vanished since ${since.replace(/[.]/g, "\\.")}\\): its guard kept beating \\(last at \\S+\\): the node ran, its link was down`).test(gateway.log()) ? true : undefined));
      await within(60_000, "the gateway routes practice again", async () => ((await ask(gateway)).status === 200 ? true : undefined));

      const after = ok(await launcher(["status"], 120_000), "status with n1 back");
      assert.match(after.stdout, new RegExp(`node n1 answers again since ${(back[1] as string).replace(/[.]/g, "\\.")} \\(vanished for \\d+ s from ${since.replace(/[.]/g, "\\.")}\\); what runs there was read again`));
      assert.match(after.stdout, /practice-2x\s+serving/);
      const history = JSON.parse(ok(await launcher(["history", "--json"]), "history").stdout) as { node_outages: { node: string; kind: string; since: string; ended_at?: string; deployments: unknown; cause?: { kind: string } }[] };
      assert.equal(history.node_outages[0]?.cause?.kind, "ran");
      assert.deepEqual(history.node_outages.map((o) => [o.node, o.kind, o.since, o.ended_at, o.deployments]), [["n1", "vanished", since, back[1], [{ deployment: "practice-2x", ranks: [0] }]]]);
      assert.match(ok(await launcher(["history"]), "history").stdout, new RegExp(`node outages \\(launcher serve\\):\\n${since.replace(/[.]/g, "\\.")}  \\S+/n1 vanished: answered again at`));
      passed = true;
    } finally {
      // What the daemon said is what a failure here is about.
      if (!passed) console.error(gateway.log());
      if (cut) link(1, "up");
      await gateway.stop();
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });

  test("a worker whose kernel answers at its SSH port but whose SSH does not complete: frozen, its deployment still serves, and back", async () => {
    ok(await launcher(["up", "practice-2x"], 240_000), "up");
    const gateway = await startGateway();
    let refused = false;
    let passed = false;
    try {
      await within(60_000, "the gateway routes practice", async () => ((await ask(gateway)).status === 200 ? true : undefined));
      // sshd's port answers every packet with a RST, as a node whose kernel lives and whose sshd
      // is gone; the engine's HTTP port still answers.
      sshRefused(2, true);
      refused = true;
      await within(60_000, "the daemon logs n2 frozen", async () => (/! node \S+\/n2 since \S+ \(frozen\), .*: it stopped answering while it ran practice-2x rank 1/.test(gateway.log()) ? true : undefined));
      const text = await launcher(["status"], 120_000);
      assert.match(text.stdout, /practice-2x\s+serving/, "its head answers /health: it serves");
      assert.match(text.stdout, /node frozen: n2 since \S+ \(frozen\), .*; it ran practice-2x rank 1/);
      assert.equal((await ask(gateway)).status, 200, "still routed");
      sshRefused(2, false);
      refused = false;
      await within(60_000, "the daemon logs n2 back", async () => (/\+ node \S+\/n2 answers again at \S+, after \d+ s frozen/.test(gateway.log()) ? true : undefined));
      passed = true;
    } finally {
      if (!passed) console.error(gateway.log());
      if (refused) sshRefused(2, false);
      await gateway.stop();
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });

  test("a worker whose host stops whole (every process of it stopped, its kernel still answering): frozen, and once back its own guard says the node itself stalled", async () => {
    ok(await launcher(["up", "practice-2x"], 240_000), "up");
    const gateway = await startGateway();
    let frozen = false;
    let passed = false;
    try {
      await within(60_000, "the gateway routes practice", async () => ((await ask(gateway)).status === 200 ? true : undefined));
      signalHost(2, "SIGSTOP");
      frozen = true;
      const stoppedAt = Date.now();
      const { value: began } = await within(60_000, "the daemon logs n2 frozen", async () => /! node \S+\/n2 since (\S+) \(frozen\), .*: it stopped answering while it ran practice-2x rank 1/.exec(gateway.log()) ?? undefined);
      // Stopped past what the guard takes for a stall, however soon the outage was seen.
      await within(30_000, "the host stopped past a stall", async () => (Date.now() - stoppedAt > NODE_GUARD_STALL_MS + 2000 ? true : undefined));
      signalHost(2, "SIGCONT");
      frozen = false;
      const since = began[1] as string;
      await within(90_000, "the daemon says n2 stalled itself", async () => (new RegExp(`\\+ node \\S+/n2 \\(frozen since ${since.replace(/[.]/g, "\\.")}\\): the node itself stalled: its guard did not run for \\d+ s`).test(gateway.log()) ? true : undefined));
      const history = JSON.parse(ok(await launcher(["history", "--json"]), "history").stdout) as { node_outages: { node: string; since: string; cause?: { kind: string; gap_ms: number } }[] };
      const outage = history.node_outages.find((o) => o.node === "n2" && o.since === since);
      assert.equal(outage?.cause?.kind, "stalled");
      assert.ok((outage?.cause?.gap_ms ?? 0) > NODE_GUARD_STALL_MS, JSON.stringify(outage));
      assert.match(ok(await launcher(["status"], 120_000), "status").stdout, /node n2 answers again since \S+ \(frozen for \d+ s from \S+\); what runs there was read again; the node itself stalled/);
      passed = true;
    } finally {
      if (!passed) console.error(gateway.log());
      if (frozen) signalHost(2, "SIGCONT");
      await gateway.stop();
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });
});

/** Every process of practice host i (its network namespace's: sshd, dockerd, its containers, the node guard). */
function hostPids(i: number): number[] {
  const r = spawnSync("ip", ["netns", "pids", `lnch-n${i}`], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split("\n").filter((l) => /^\d+$/.test(l)).map(Number);
}

/** Sends every process of host i `signal`: SIGSTOP freezes the host whole (its kernel still answers TCP), SIGCONT thaws it. */
function signalHost(i: number, signal: "SIGSTOP" | "SIGCONT"): void {
  for (const pid of hostPids(i)) {
    try {
      process.kill(pid, signal);
    } catch {
      // Ended meanwhile.
    }
  }
}

/** Makes host i's sshd port answer with a RST (on) or accept again (off), in the host's own network namespace. */
function sshRefused(i: number, on: boolean): void {
  const r = spawnSync("ip", ["netns", "exec", `lnch-n${i}`, "iptables", on ? "-I" : "-D", "INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"], { encoding: "utf8" });
  assert.equal(r.status, 0, `iptables on n${i}: ${r.stderr}`);
}
