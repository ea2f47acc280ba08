import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { launcher, launcherContainers, launcherProcess, onHost, within, type Run, practiceSuite } from "./practice-cluster.js";

// Node claims (src/claims/claims.ts) between launchers that share no store: each "machine" is its
// own XDG_STATE_HOME. Three hosts: enough for two overlapping node sets.
const HOSTS = 3;
const dir = practiceSuite(HOSTS, "launcher-claims-it-");
const machine = (name: string): NodeJS.ProcessEnv => ({ XDG_STATE_HOME: path.join(dir, name) });


/** What a started CLI printed and how it ended, killed if it outlives `ms`. */
function finished(child: ChildProcess, ms = 180_000): Promise<Run> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), ms);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const claimOn = (host: number): string | undefined => {
  const out = onHost(host, ["sh", "-c", 'cat "$HOME/.cache/launcher/claims/node" 2>/dev/null || true']);
  return out.trim() === "" ? undefined : out;
};

async function downAll(): Promise<void> {
  const r = await launcher(["down", "--all"], 120_000, machine("cleaner"));
  assert.equal(r.code, 0, r.stderr);
}

/** Two `up`s started at the same instant from two machines: the one that won and the one that lost. */
async function race(a: string[], b: string[]): Promise<{ winner: Run; loser: Run; winnerPid: number }> {
  const pa = launcherProcess(["up", ...a], machine("machine-a"));
  const pb = launcherProcess(["up", ...b], machine("machine-b"));
  const [ra, rb] = await Promise.all([finished(pa), finished(pb)]);
  const codes = [ra.code, rb.code].sort();
  assert.deepEqual(codes, [0, 1], `exactly one proceeds:\n--- a\n${ra.stderr}\n--- b\n${rb.stderr}`);
  return ra.code === 0 ? { winner: ra, loser: rb, winnerPid: pa.pid as number } : { winner: rb, loser: ra, winnerPid: pb.pid as number };
}

describe("node claims on the practice cluster", { concurrency: false }, () => {
  test("two ups of one recipe on the same nodes from two machines at once: one is ready, the other busy naming it", async () => {
    try {
      const { winner, loser, winnerPid } = await race(["practice-2x", "--nodes", "n1,n2"], ["practice-2x", "--nodes", "n1,n2"]);
      assert.match(winner.stdout, /practice-2x is ready in/);
      assert.match(loser.stderr, new RegExp(`launcher: busy: node n1 is claimed by \`launcher up practice-2x\` \\(pid ${winnerPid} on \\S+, since \\S+, deployment practice-2x\\)`));
      assert.doesNotMatch(loser.stderr, /starting practice-2x/, "the loser started nothing");
      assert.deepEqual(launcherContainers(HOSTS), ["n1:launcher-practice-2x-r0:running", "n2:launcher-practice-2x-r1:running"]);
      assert.deepEqual([claimOn(1), claimOn(2)], [undefined, undefined], "the winner gave its claims back when it ended");
    } finally {
      await downAll();
    }
  });

  test("overlapping node sets (n1,n2 and n2,n3) at once: exactly one proceeds, and the loser holds nothing", async () => {
    try {
      const { winner, loser, winnerPid } = await race(["practice-2x", "--nodes", "n1,n2"], ["practice-2x", "--name", "other", "--nodes", "n2,n3"]);
      const won = /^(\S+) is ready in/m.exec(winner.stdout)?.[1];
      assert.ok(won === "practice-2x" || won === "other", winner.stdout);
      assert.match(loser.stderr, new RegExp(`busy: node n2 is claimed by \`launcher up practice-2x\` \\(pid ${winnerPid} on \\S+, since \\S+, deployment ${won}\\)`));
      const expected = won === "practice-2x" ? ["n1:launcher-practice-2x-r0:running", "n2:launcher-practice-2x-r1:running"] : ["n2:launcher-other-r0:running", "n3:launcher-other-r1:running"];
      assert.deepEqual(launcherContainers(HOSTS), expected);
      assert.deepEqual([claimOn(1), claimOn(2), claimOn(3)], [undefined, undefined, undefined]);
    } finally {
      await downAll();
    }
  });

  test("an up killed with SIGKILL keeps its nodes claimed until its lease expires; then another machine takes them over", async () => {
    // A short lease, as $LAUNCHER_CLAIM_LEASE allows: the dead holder's claim expires in seconds.
    // 20 s: renewed every quarter lease, the claim may be 5 s old at the kill, and the blocked
    // `up` below (a CLI start, SSH, the fabric probe, planning: up to about 9 s on a busy 2-core
    // machine) must reach it before the lease ends. The takeover after it waits for the expiry, so each second here is one
    // of the test's.
    const lease = { LAUNCHER_CLAIM_LEASE: "20s" };
    // On another machine: a holder on this one whose pid is gone is taken over at once (up-hardening).
    const killed = launcherProcess(["up", "practice-2x"], { ...machine("machine-a"), ...lease }, "machine-a");
    const done = finished(killed);
    let stderr = "";
    killed.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    try {
      await within(60_000, "the first up claims its nodes and starts", async () => (/starting practice-2x/.test(stderr) ? true : undefined));
      killed.kill("SIGKILL");
      await done;
      assert.match(claimOn(1) ?? "", new RegExp(`"host":"machine-a".*"pid":${killed.pid}`), "the claim outlives its launcher");
      const blocked = await launcher(["up", "practice-2x"], 120_000, machine("machine-b"));
      assert.equal(blocked.code, 1, blocked.stderr);
      assert.match(blocked.stderr, new RegExp(`busy: node n1 is claimed by \`launcher up practice-2x\` \\(pid ${killed.pid} on machine-a, `));
      assert.match(blocked.stderr, /a claim whose launcher died expires 20 s after its last renewal/);
      // What the killed up started is still there: stop it (down needs no claim).
      await downAll();
      // Each node's claim was renewed on its own, so n2's may expire a moment after n1's: an up
      // between the two takes n1's over, meets n2 busy and gives n1 back. What every try said is kept.
      let said = "";
      const { value: taken } = await within(60_000, "another machine's up takes the expired claims over", async () => {
        const r = await launcher(["up", "practice-2x"], 120_000, machine("machine-b"));
        said += r.stderr;
        if (r.code === 1 && /busy: node n[12] /.test(r.stderr)) return undefined;
        return r;
      });
      assert.equal(taken.code, 0, taken.stderr);
      assert.match(said, new RegExp(`n1: taking over the expired claim of \`launcher up practice-2x\` \\(pid ${killed.pid} on `));
      assert.match(taken.stdout, /practice-2x is ready in/);
      assert.deepEqual([claimOn(1), claimOn(2)], [undefined, undefined]);
    } finally {
      killed.kill("SIGKILL");
      await downAll();
      // down does not touch claims: if a check above failed, the dead holder's claims would make the
      // next test's up busy until the lease ran out.
      for (const i of [1, 2]) onHost(i, ["sh", "-c", 'rm -f "$HOME/.cache/launcher/claims/node"']);
    }
  });

  test("a corrupt state store does not block down: it is set aside, down stops the deployment and says what it did", async () => {
    const env = machine("corrupt-store");
    try {
      const up = await launcher(["up", "practice-2x"], 120_000, env);
      assert.equal(up.code, 0, up.stderr);
      const db = path.join(env.XDG_STATE_HOME as string, "launcher", "launcher.db");
      writeFileSync(db, "garbage, not SQLite ".repeat(100));
      const down = await launcher(["down", "practice-2x"], 120_000, env);
      assert.equal(down.code, 0, down.stderr);
      assert.match(down.stdout, /stopped practice-2x: n1 launcher-practice-2x-r0/);
      assert.match(down.stderr, new RegExp(`warning: the state store ${db} is corrupt \\(SQLITE_NOTADB.*\\); moved it to ${db}\\.corrupt-\\d{8}T\\d{6}Z for inspection`));
      assert.equal(readdirSync(path.dirname(db)).filter((f) => /^launcher\.db\.corrupt-\d{8}T\d{6}Z$/.test(f)).length, 1);
      assert.deepEqual(launcherContainers(HOSTS), []);

      // A store that cannot be opened (a folder in its place): up and down go on without it and say so.
      const folder = machine("unusable-store");
      mkdirSync(path.join(folder.XDG_STATE_HOME as string, "launcher", "launcher.db"), { recursive: true });
      const up2 = await launcher(["up", "practice-2x"], 120_000, folder);
      assert.equal(up2.code, 0, up2.stderr);
      assert.match(up2.stderr, /warning: cannot open the state store \S+ \(SQLITE_CANTOPEN[^)]*\); going on without it/);
      const down2 = await launcher(["down", "practice-2x"], 120_000, folder);
      assert.equal(down2.code, 0, down2.stderr);
      assert.match(down2.stdout, /stopped practice-2x: n1 launcher-practice-2x-r0/);
      assert.match(down2.stderr, /warning: cannot open the state store/);
    } finally {
      await downAll();
    }
  });
});
