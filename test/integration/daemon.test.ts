import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import type { ReadEvent } from "../../src/contract/read-api.js";
import { followEvents, readAnswer, readLogs } from "../../src/daemon/read-client.js";
import { cliArgs } from "../built-cli.js";
import { CLUSTER, launcher, launcherContainers, launcherProcess, ok, practiceSuite, STATE_HOME, variant, within, type Run } from "./practice-cluster.js";

// One practice host: a one-node variant whose boot takes a few seconds (each boot phase waits), so
// that a client can be signalled while it runs. Detach (--detach, SIGHUP), attach and down's cancel
// through a daemon are test/unit/daemon-detach.test.ts's, against the control API in process.
const dir = practiceSuite(1, "launcher-daemon-");
const slow = (name: string): string => variant(dir, name, "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_PHASE_DELAY_MS = "1500"\n`);

/** The process's exit, with what it printed. */
function exited(child: ReturnType<typeof launcherProcess>): { done: Promise<Run>; stderr: () => string } {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Run>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
  return { done, stderr: () => stderr };
}

const containersOf = (name: string): string[] => launcherContainers(1).filter((c) => c.includes(`launcher-${name}-`));

describe("launcher serve --control: boots that outlive their client", { concurrency: false }, () => {
  test("without a daemon today's behaviour stays: Ctrl-C rolls the boot back, and the message says how to run a daemon", async () => {
    const recipe = slow("here");
    const client = launcherProcess(["up", recipe, "--timeout", "2m"], { LAUNCHER_DAEMON: "none" });
    const run = exited(client);
    try {
      await within(60_000, "the boot's container runs", async () => (containersOf("here").length > 0 ? true : undefined));
      client.kill("SIGINT");
      const r = await run.done;
      assert.equal(r.code, 130, r.stderr);
      assert.match(r.stderr, /interrupted \(SIGINT\)/);
      assert.match(r.stderr, /hint: a boot run by a daemon outlives the terminal: run `launcher serve --control`/);
      assert.deepEqual(containersOf("here"), []);
    } finally {
      client.kill("SIGKILL");
      await launcher(["down", "deployment/here", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
    }
  });

  test("the daemon on a practice host, driven over the management network: the admin key, never an inference key; the client's own recipe and cluster file go with the boot", async () => {
    // The client's own folder, which the daemon's machine cannot read (a laptop's disk is not a
    // Spark's): a recipe extending a sibling by relative path, a broken one, and a cluster file.
    const mine = mkdtempSync(path.join(tmpdir(), "launcher-client-only-"));
    mkdirSync(path.join(mine, "parent"));
    writeFileSync(path.join(mine, "parent", "recipe.toml"), readFileSync(path.resolve("recipes/practice-2x/recipe.toml"), "utf8"));
    const recipe = path.join(mine, "remote");
    mkdirSync(recipe);
    // The daemon's gateway has API keys: it boots only recipes whose engine demands a key of its own.
    writeFileSync(path.join(recipe, "recipe.toml"), 'extends = "../parent"\nrequired_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_PHASE_DELAY_MS = "1500"\nVLLM_API_KEY = "engine-key-remote-9b2e"\n');
    mkdirSync(path.join(mine, "broken"));
    writeFileSync(path.join(mine, "broken", "recipe.toml"), 'extends = "../parent"\nrequired_nodes = 1\ntensor_parallel_size = 0\n');
    // The client's copy of the cluster: its facts only, under a name of its own. How SSH and
    // Docker run is the daemon's to say: its own cluster file's [ssh] and [docker] apply.
    const cluster = path.join(mine, "cluster.toml");
    const facts = readFileSync(CLUSTER, "utf8").replace(/^name = .*$/m, 'name = "client-copy"').replace(/^\[ssh\][\s\S]*?(?=^\[\[nodes\]\])/m, "");
    writeFileSync(cluster, facts);
    // One that sets how the daemon's SSH runs is refused, naming the key.
    const withSsh = path.join(mine, "with-ssh.toml");
    writeFileSync(withSsh, `${facts.replace('name = "client-copy"', 'name = "with-ssh"')}\n[ssh]\noptions = ["ProxyCommand=sh -c 'touch /tmp/launcher-proxy-ran'"]\n`);
    const ADMIN = "admin-key-7f3a9c";
    const INFERENCE = "inference-key-41d2";
    const port = 18187;
    const url = `http://10.231.0.11:${port}`;
    // In n1's network namespace, as on a Spark: it reaches the nodes over SSH as any launcher does.
    // In its own mount namespace an empty tmpfs covers the client's folder: the daemon cannot read
    // it (unshare(1) and sh's exec keep the pid the daemon's, so signals reach it).
    const hidden = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs "$1" && shift && exec "$@"', "sh", mine];
    const child = spawn("ip", ["netns", "exec", "lnch-n1", ...hidden, process.execPath, ...cliArgs(), "serve", "--control", "--listen", `10.231.0.11:${port}`, "--poll", "1s", "--cluster", CLUSTER], {
      env: { ...process.env, XDG_STATE_HOME: path.join(STATE_HOME, "n1-daemon"), LAUNCHER_ADMIN_KEY: ADMIN, LAUNCHER_API_KEY: INFERENCE, NODE_OPTIONS: "", CI: "true" },
    });
    let log = "";
    child.stderr.on("data", (d: Buffer) => (log += d.toString()));
    const stopped = new Promise<void>((resolve) => child.on("close", () => resolve()));
    try {
      await within(60_000, "the daemon listens on the management network", async () => (log.includes("control API on") ? true : undefined));
      const refused = await launcher(["up", recipe, "--daemon", url], 60_000, { LAUNCHER_ADMIN_KEY: "" });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /the daemon at http:\/\/10\.231\.0\.11:18187 refused: missing or wrong admin key/);
      const inference = await launcher(["up", recipe, "--daemon", url], 60_000, { LAUNCHER_ADMIN_KEY: INFERENCE });
      assert.equal(inference.code, 1);
      assert.match(inference.stderr, /refused: missing or wrong admin key \(an inference key is not one\)/);
      assert.doesNotMatch(inference.stderr, new RegExp(INFERENCE));
      assert.deepEqual(containersOf("remote"), [], "nothing was started for a refused client");
      // A recipe error is found by the daemon in the client's file, and named as the client names it.
      const broken = await launcher(["up", path.join(mine, "broken"), "--daemon", url, "--cluster", cluster], 60_000, { LAUNCHER_ADMIN_KEY: ADMIN });
      assert.equal(broken.code, 1, broken.stderr);
      assert.match(broken.stderr, /launcher-client-only-\w+\/broken\/recipe\.toml:3:\d+: error: tensor_parallel_size/);
      rmSync("/tmp/launcher-proxy-ran", { force: true });
      const proxy = await launcher(["up", recipe, "--daemon", url, "--cluster", withSsh], 60_000, { LAUNCHER_ADMIN_KEY: ADMIN });
      assert.equal(proxy.code, 1, proxy.stderr);
      assert.match(proxy.stderr, /with-ssh\.toml:\d+:1: error: ssh\.options is not accepted in a cluster file sent to a daemon/);
      assert.equal(existsSync("/tmp/launcher-proxy-ran"), false, "ProxyCommand never ran");
      // The read API's stream, open with an inference key while the boot runs (src/daemon/read-api.ts).
      const seen: ReadEvent[] = [];
      const watching = new AbortController();
      const following = followEvents({ url, key: INFERENCE }, (e) => void seen.push(e), watching.signal);
      const up = ok(await launcher(["up", recipe, "--daemon", url, "--cluster", cluster, "--timeout", "2m"], 120_000, { LAUNCHER_ADMIN_KEY: ADMIN }), "up through the remote daemon");
      assert.match(up.stdout, /^remote is ready in/);
      assert.deepEqual(containersOf("remote"), ["n1:launcher-remote-r0:running"]);
      // Both of the daemon's clusters (its own and the client's copy) name n1: each lists the deployment.
      const serving = (e: ReadEvent): boolean => e.event === "deployment" && e.data.cluster === "client-copy" && e.data.deployment === "remote" && e.data.status === "serving";
      await within(30_000, "the stream brings the boot's end and the deployment serving", async () => (seen.some((e) => e.event === "boot" && e.data.event.type === "result") && seen.some(serving) ? true : undefined));
      const read = { url, key: INFERENCE };
      const listed = (await readAnswer(read, "deployments")).deployments.filter((d) => d.deployment === "remote").map((d) => `${d.cluster} ${d.status} ${d.ranks.map((r) => r.node).join(",")}`);
      assert.ok(listed.includes("client-copy serving n1"), listed.join("; "));
      const logs = await readLogs(read, "remote", { cluster: "client-copy" });
      assert.ok(logs.lines.some((l) => l.node === "n1" && l.rank === 0), JSON.stringify(logs).slice(0, 500));
      assert.doesNotMatch(JSON.stringify(logs), /engine-key-remote-9b2e/, "the engine's key is redacted from its log");
      // A request through the gateway is in the activity log (a key id, never the key), and the
      // engine's /metrics, scraped every 5 s, give the deployment a window.
      const model = (await readAnswer(read, "deployments")).deployments.find((d) => d.deployment === "remote")?.served_model;
      assert.ok(model);
      // Its status is not what this proves: the deployment is listed by both cluster files, and the
      // gateway may route the listing whose engine key the store lacks (503 engine_key_missing).
      const chat = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${INFERENCE}`, "content-type": "application/json" }, body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }) });
      await chat.text();
      const { value: live } = await within(30_000, "the request in the activity log and a metrics point of remote", async () => {
        const request = (await readAnswer(read, "activity")).requests.find((r) => r.model === model && r.status === chat.status);
        const window = (await readAnswer(read, "metrics")).windows.find((w) => w.deployment === "remote" && w.points.length > 0);
        return request !== undefined && window !== undefined ? { request, window } : undefined;
      });
      assert.match(live.request.key_id ?? "", /^[0-9a-f]{8}$/);
      assert.equal(typeof live.window.points[0]?.requests_running, "number");
      assert.doesNotMatch(JSON.stringify(await readAnswer(read, "activity")), new RegExp(INFERENCE), "no key in the activity log");
      watching.abort();
      await following;
      assert.match(log, /boot of remote \(.*launcher-client-only-\w+\/remote\) accepted/);
      assert.doesNotMatch(log, new RegExp(`${ADMIN}|${INFERENCE}`), "keys never in the daemon's log");
    } finally {
      child.kill("SIGTERM");
      await Promise.race([stopped, new Promise((r) => setTimeout(r, 20_000))]);
      child.kill("SIGKILL");
      await launcher(["down", "deployment/remote", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
      rmSync(mine, { recursive: true, force: true });
    }
  });
});
