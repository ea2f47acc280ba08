import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { RANK_STATES, type StatusLine } from "../../../src/contract/deployment.js";
import { launcher, launcherContainers, launcherProcess, onHost, startGateway, within, ok, practiceSuite, QUICK_SILENCE_SSH } from "../practice-cluster.js";

// Unreachable nodes and what launcher leaves running on the nodes, on a 2-host practice cluster.
// How down resolves a name that fits several deployments is test/unit/down-targets.test.ts's.
const HOSTS = 2;
// Fresh hosts, not the shared ones (practiceSuite): the file cuts management links; ssh gives up on
// a silent host in seconds (QUICK_SILENCE_SSH), as a user may set in a cluster file.
practiceSuite(HOSTS, "launcher-unreach-", { sshOptions: QUICK_SILENCE_SSH });

/** Cuts (or restores) host i's management link on this machine's side: SSH and HTTP to it go silent. */
const link = (i: number, state: "up" | "down"): void => {
  assert.equal(spawnSync("ip", ["link", "set", `lnchm${i}`, state], { encoding: "utf8" }).status, 0, `link n${i} ${state}`);
};

/** `docker logs` processes of host i's user (the bracket keeps the login shell's own command line out). */
const followers = (i: number): number => Number(onHost(i, ["sh", "-c", "pgrep -c -u \"$(id -u)\" -f 'docker log[s]' || true"]).trim());
const noFollowers = (what: string) => within(15_000, what, async () => ([1, 2].every((i) => followers(i) === 0) ? true : undefined));

describe("unreachable nodes, nothing left behind", { concurrency: false }, () => {
  test("neither up nor an interrupted logs --follow leaves a docker logs process on the nodes", async () => {
    ok(await launcher(["up", "practice-2x"], 240_000), "up");
    try {
      await noFollowers("no docker logs left by up");
      const logs = launcherProcess(["logs", "practice-2x", "--follow", "--tail", "1"]);
      const exited = new Promise<number | null>((resolve) => logs.on("close", resolve));
      let out = "";
      logs.stdout.on("data", (d: Buffer) => (out += d.toString()));
      await within(30_000, "the follow prints both nodes", async () => (/\[n1\]/.test(out) && /\[n2\]/.test(out) ? true : undefined));
      assert.ok(followers(1) >= 1 && followers(2) >= 1, "while following, each node runs a follower (the count sees them)");
      logs.kill("SIGINT");
      assert.equal(await exited, 130);
      await noFollowers("no docker logs left by an interrupted logs --follow");
    } finally {
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });

  test("a node that cannot be reached: status says unreachable and still serving, the gateway routes, down says it did not finish and a later down does", async () => {
    ok(await launcher(["up", "practice-2x"], 240_000), "up");
    try {
      await cutAndRestore();
    } finally {
      // Whatever failed above, the next test starts on empty nodes.
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });

  /** The part of the test above that runs with n2's link cut, then with it back. */
  async function cutAndRestore(): Promise<void> {
    const gateway = await startGateway();
    let cut = false;
    try {
      await within(30_000, "the gateway routes practice", async () => {
        const models = (await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: { id: string; status: string }[] };
        return models.data.some((m) => m.id === "practice" && m.status === "serving") ? true : undefined;
      });
      link(2, "down");
      cut = true;

      const status = await launcher(["status", "--json"], 120_000);
      assert.equal(status.code, 1, "a node could not be read: the answer is incomplete");
      const line = JSON.parse(status.stdout) as StatusLine;
      assert.deepEqual(line.unreachable, ["n2"]);
      const d = line.deployments.find((x) => x.deployment === "practice-2x");
      assert.equal(d?.status, "serving", "its head answers /health: it serves");
      assert.deepEqual(d?.missing, [], "not 'no container'");
      assert.deepEqual(d?.unreachable, ["n2"]);
      assert.deepEqual(d?.ranks.map((r) => [r.rank, r.node, r.state]), [[0, "n1", "running"], [1, "n2", "unreachable"]]);
      assert.ok(d?.ranks.every((r) => RANK_STATES.includes(r.state)));
      assert.match(status.stderr, /n2 could not be read/);

      // The gateway's discovery sees the same and keeps routing.
      await within(60_000, "discovery notices n2", async () => (/n2 unreachable/.test(gateway.log()) ? true : undefined));
      const chat = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "practice", messages: [{ role: "user", content: "hi" }], max_tokens: 3 }),
      });
      assert.equal(chat.status, 200, await chat.text());
      const models = (await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: { id: string; status: string; nodes: string[] }[] };
      const entry = models.data.find((m) => m.id === "practice");
      assert.equal(entry?.status, "serving");
      assert.deepEqual(entry?.nodes, ["n1", "n2"]);

      const down = await launcher(["down", "practice-2x", "--json", "--grace", "1"], 120_000);
      assert.equal(down.code, 1, "down could not do its job on n2");
      const result = JSON.parse(down.stdout) as { removed: { node: string; container: string }[]; unreachable: { node: string; reason: string }[]; complete: boolean };
      assert.deepEqual(result.removed.map((r) => `${r.node}/${r.container}`), ["n1/launcher-practice-2x-r0"]);
      assert.deepEqual(result.unreachable.map((u) => u.node), ["n2"]);
      assert.equal(result.complete, false);
      assert.match(down.stderr, /n2 could not be reached: what runs there was not stopped; once it answers, `launcher down practice-2x` finishes the job/);
    } finally {
      if (cut) link(2, "up");
      await gateway.stop();
    }
    await within(60_000, "n2 answers again", async () => ((await launcher(["status", "--json"])).code === 0 ? true : undefined));
    // (The worker may have exited when its head was removed: it is there all the same.)
    assert.deepEqual(launcherContainers(HOSTS).map((c) => c.split(":").slice(0, 2).join(":")), ["n2:launcher-practice-2x-r1"], "what n2 ran is still there: down did not claim it");
    const again = ok(await launcher(["down", "practice-2x", "--grace", "1"]), "the later down");
    assert.match(again.stdout, /stopped practice-2x: n2 launcher-practice-2x-r1/);
    assert.deepEqual(launcherContainers(HOSTS), []);
  }
});
