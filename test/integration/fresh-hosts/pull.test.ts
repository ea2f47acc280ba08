import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { launcher, launcherProcess, ok, onHost, PRACTICE_REVISION, practiceSuite, variant, within } from "../practice-cluster.js";

// `launcher models pull` on a 2-host practice cluster, from a Hub stand-in (test/rig/hub-standin.mjs)
// run in a container on n2: the endpoints huggingface_hub calls, a gated repo (token needed), and
// bodies sent at HUB_RATE so that a download can be interrupted half way. The download runs in the
// practice engine image, whose `hf` is a stand-in for huggingface_hub's (bin/hf).
const HOSTS = 2;
// The last test's small cache: a 16 MiB tmpfs, mounted BEFORE the rig is up. sshd runs in a mount
// namespace of its own (rig.sh starts it with `ip netns exec`, which unshares one: iproute2
// lib/namespace.c netns_switch), a copy of the mounts there are when it starts; this machine's
// mounts are private (no shared propagation), so one made later reaches dockerd (root namespace)
// but not the SSH sessions. Mounted first, both see the same tmpfs.
const small = mkdtempSync(path.join(tmpdir(), "launcher-pull-small-"));
before(() => {
  const m = spawnSync("mount", ["-t", "tmpfs", "-o", "size=16m,mode=0777", "launcher-pull-small", small], { encoding: "utf8" });
  assert.equal(m.status, 0, m.stderr);
});
after(() => {
  spawnSync("umount", [small]);
  rmSync(small, { recursive: true, force: true });
});
// Fresh hosts, not the shared ones (practiceSuite): its tmpfs must be mounted before the hosts' sshd starts (see above).
const dir = practiceSuite(HOSTS, "launcher-pull-");
const HUB = "launcher-test-hub";
const ENDPOINT = "http://10.231.0.12:8088";
const HUB_RATE = 16 << 20;
const TOKEN = `hf_practice${randomBytes(12).toString("hex")}`;
const CACHE = ".cache/practice/huggingface/hub";

/** The stand-in's repos: name -> file -> bytes. */
const REPOS: Record<string, Record<string, number>> = {
  "practice/pull-moe": { "config.json": 70, "model.safetensors": 12 << 20, "tokenizer/tokenizer.json": 2000 },
  "practice/pull-big": { "config.json": 70, "model-00001-of-00002.safetensors": 6 << 20, "model-00002-of-00002.safetensors": 64 << 20 },
};
/** SHA-256 of each file the stand-in serves: the name of its blob in the cache (an LFS file's ETag). */
const sums = new Map<string, string>();

interface HubRequest {
  method: string;
  path: string;
  range: string | null;
  auth: boolean;
  status: number;
  bytes: number;
}
const hubLog = (): HubRequest[] =>
  onHost(2, ["docker", "logs", HUB])
    .split("\n")
    .filter((l) => l.startsWith('{"method"'))
    .map((l) => JSON.parse(l) as HubRequest);
const fileGets = (repo: string, file: string): HubRequest[] => hubLog().filter((r) => r.method === "GET" && r.path === `/${repo}/resolve/${PRACTICE_REVISION}/${file}`);

/** Every file of the snapshot on host i as `SHA256  PATH`, links followed. */
const snapshotSums = (i: number, hub: string, repo: string): string =>
  onHost(i, ["sh", "-c", 'cd "$1/models--$2/snapshots/$3" && find -L . -type f | sort | xargs sha256sum', "sh", hub, repo.replace("/", "--"), PRACTICE_REVISION]);
const expectedSums = (repo: string): string =>
  Object.keys(REPOS[repo] ?? {})
    .map((f) => `./${f}`)
    .sort()
    .map((f) => `${sums.get(`${repo}/${f.slice(2)}`)}  ${f}\n`)
    .join("");
const home = (i: number): string => onHost(i, ["sh", "-c", 'printf %s "$HOME"']);

/** The token must be in no process's argv, here or on a node (the hosts share this machine's process table). */
function tokenInPs(): boolean {
  const r = spawnSync("ps", ["-eww", "-o", "args="], { encoding: "utf8" });
  return r.stdout.includes(TOKEN);
}

/**
 * `docker inspect` of the download containers running on n1: what anyone in the node's docker group
 * reads (Config.Env, Args, ...). Undefined while none runs; a container gone between `ps` and
 * `inspect` throws, which within() counts as "not yet".
 */
function inspectDownloads(): string | undefined {
  const names = onHost(1, ["docker", "ps", "--filter", "name=launcher-pull-", "--format", "{{.Names}}"]).trim();
  return names === "" ? undefined : onHost(1, ["docker", "inspect", "--", ...names.split("\n")]);
}

describe("models pull on the practice cluster", { concurrency: false }, () => {
  before(() => {
    const root = path.join(dir, "hub");
    for (const [repo, files] of Object.entries(REPOS)) {
      for (const [file, bytes] of Object.entries(files)) {
        const data = file.endsWith(".json") ? Buffer.from(JSON.stringify({ model_type: "practice", pad: "x".repeat(Math.max(0, bytes - 34)) })) : randomBytes(bytes);
        mkdirSync(path.dirname(path.join(root, repo, file)), { recursive: true });
        writeFileSync(path.join(root, repo, file), data);
        sums.set(`${repo}/${file}`, createHash("sha256").update(data).digest("hex"));
      }
    }
    writeFileSync(path.join(dir, "token"), `${TOKEN}\n`, { mode: 0o600 });
    // The shared "NAS" below is written by the hosts' own users.
    chmodSync(dir, 0o755);
    mkdirSync(path.join(dir, "nas"), { mode: 0o777 });
    chmodSync(path.join(dir, "nas"), 0o777);
    onHost(2, [
      "docker", "run", "--detach", "--name", HUB, "--network", "host",
      "--volume", `${root}:/hub:ro`, "--volume", `${path.resolve("test/rig/hub-standin.mjs")}:/hub-standin.mjs:ro`, "--volume", `${path.join(dir, "token")}:/token:ro`,
      "--entrypoint", "/usr/local/bin/node", "--", "practice-engine:local",
      "/hub-standin.mjs", "--root", "/hub", "--listen", "10.231.0.12:8088", "--commit", PRACTICE_REVISION, "--token-file", "/token", "--rate", String(HUB_RATE),
    ]);
    return within(15_000, "the Hub stand-in listening", async () => (onHost(2, ["docker", "logs", HUB]).includes('"listening"') ? true : undefined));
  });
  after(() => {
    spawnSync("ssh", ["-F", path.join(process.env.LAUNCHER_TEST_RIG_DIR ?? "/tmp/launcher-test-rig", "ssh_config"), "lnch-n2", "--", "docker", "rm", "-f", HUB], { timeout: 30_000 });
  });

  test("pull: downloads on n1 from the Hub with HF_TOKEN, syncs to n2, and the token is printed nowhere", async (t) => {
    const recipe = variant(dir, "pull-moe", "practice-2x", `model = "practice/pull-moe"\n`);
    const denied = await launcher(["models", "pull", recipe], 120_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: "" });
    assert.equal(denied.code, 1, denied.stderr);
    // The node asks the Hub for the files' sizes before anything runs: a gated repo says so there.
    assert.match(denied.stderr, /n1: the Hub answered HTTP 401 to http:\/\/10\.231\.0\.12:8088\/api\/models\/practice\/pull-moe\/revision\/main\?blobs=true/);
    assert.match(denied.stderr, /Access to this model is restricted/);
    assert.doesNotMatch(denied.stderr, /at .*\.ts:\d+/, "no stack trace");

    const began = Date.now();
    const r = ok(await launcher(["models", "pull", recipe, "--json"], 240_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: TOKEN }), "pull");
    const result = JSON.parse(r.stdout) as { download?: { node: string; downloader: string; revision: string; seconds: number }; sync: { source: string; nodes: { node: string; action: string; bytes: number }[] } };
    t.diagnostic(`pull of ${Object.values(REPOS["practice/pull-moe"] ?? {}).reduce((a, b) => a + b, 0)} bytes: ${(Date.now() - began) / 1000}s in all, the download ${result.download?.seconds}s (Hub stand-in at ${HUB_RATE} B/s), synced to n2: ${result.sync.nodes[1]?.bytes} bytes`);
    assert.deepEqual([result.download?.node, result.download?.downloader, result.download?.revision], ["n1", "hf", PRACTICE_REVISION]);
    assert.equal(result.sync.source, "n1");
    assert.deepEqual(result.sync.nodes.map((n) => [n.node, n.action]), [["n1", "had"], ["n2", "copied"]]);
    for (const i of [1, 2]) assert.equal(snapshotSums(i, `${home(i)}/${CACHE}`, "practice/pull-moe"), expectedSums("practice/pull-moe"), `n${i}: every file, by SHA-256`);
    assert.equal(onHost(2, ["cat", `${home(2)}/${CACHE}/models--practice--pull-moe/refs/main`]), PRACTICE_REVISION);
    // Every request carried the token (the repo is gated), and the big file crossed the Hub once.
    assert.equal(fileGets("practice/pull-moe", "model.safetensors").filter((g) => g.status === 200).length, 1);
    assert.ok(hubLog().filter((q) => q.status !== 401).every((q) => q.auth));
    assert.ok(!`${r.stdout}${r.stderr}${denied.stdout}${denied.stderr}`.includes(TOKEN), "the token is not printed");

    // Again: the snapshot is there, so nothing is downloaded and nothing synced.
    const again = JSON.parse(ok(await launcher(["models", "pull", recipe, "--json"], 120_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: TOKEN }), "pull again").stdout) as { download?: unknown; already?: string; sync: { nodes: { action: string }[] } };
    assert.equal(again.download, undefined);
    assert.equal(again.already, "n1");
    assert.deepEqual(again.sync.nodes.map((n) => n.action), ["had", "had"]);
  });

  test("pull: interrupted half way, resumed where it stopped (finished files kept, the partial one by Range); token from a file, in no argv and not in docker inspect", async (t) => {
    const recipe = variant(dir, "pull-big", "practice-2x", `model = "practice/pull-big"\n`);
    const big = `${CACHE}/models--practice--pull-big/blobs/${sums.get("practice/pull-big/model-00002-of-00002.safetensors") ?? "?"}.incomplete`;
    const partial = (): number => Number(onHost(1, ["sh", "-c", 'stat -c %s "$HOME/$1" 2>/dev/null || echo 0', "sh", big]).trim());
    const args = ["models", "pull", recipe, "--token-file", path.join(dir, "token")];
    const first = launcherProcess(args, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: "" });
    let output = "";
    first.stdout.on("data", (d: Buffer) => (output += d.toString()));
    first.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => first.on("close", resolve));
    // A failed assertion below must not leave the download running (SIGTERM: launcher removes its container).
    t.after(() => void (first.exitCode === null && first.signalCode === null && first.kill("SIGTERM")));
    let seenInPs = false;
    // The Hub stand-in is throttled, so the download container runs for seconds: long enough to read.
    const inspected = (await within(60_000, "the download container running on n1", async () => {
      seenInPs ||= tokenInPs();
      return inspectDownloads();
    })).value;
    assert.match(inspected, /"HF_HUB_CACHE=\/launcher-hf\/hub"/, "the container's config was read");
    assert.ok(!inspected.includes(TOKEN), "the token is not in `docker inspect` of the download container");
    await within(60_000, "part of the second shard on n1", async () => {
      seenInPs ||= tokenInPs();
      return partial() > 4 << 20 ? true : undefined;
    });
    first.kill("SIGTERM");
    assert.equal(await exited, 143, output);
    assert.match(output, /interrupted: the partial download stays .* a new `launcher models pull` resumes it/);
    assert.equal(onHost(1, ["docker", "ps", "-a", "--filter", "name=launcher-pull-", "--format", "{{.Names}}"]).trim(), "", "the download's container is gone");
    const kept = partial();
    assert.ok(kept > 4 << 20 && kept < 64 << 20, `a partial blob of ${kept} bytes stays`);
    // The Hub logs a request when its answer ends: the cut one must end there too, not hang.
    const cut = (await within(30_000, "the Hub's log of the interrupted request", async () => fileGets("practice/pull-big", "model-00002-of-00002.safetensors")[0])).value;
    assert.deepEqual([cut.range, cut.status], [null, 200], "the first request asked for the whole shard");

    const began = Date.now();
    const r = ok(await launcher(args, 240_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: "" }), "resumed pull");
    t.diagnostic(`interrupted with ${kept} of ${64 << 20} bytes of the second shard on disk; the resumed pull took ${(Date.now() - began) / 1000}s: ${r.stdout.trim()}`);
    assert.match(r.stdout, /practice\/pull-big 5e1f0c4a9b8d: downloaded on n1 with hf in [\d.]+s; synced to n2 /);
    assert.equal(fileGets("practice/pull-big", "model-00001-of-00002.safetensors").length, 1, "the finished shard was not fetched again");
    const shard = fileGets("practice/pull-big", "model-00002-of-00002.safetensors");
    assert.equal(shard.length, 2, "the interrupted request and the resumed one");
    assert.deepEqual(shard.filter((g) => g.range !== null).map((g) => [g.range, g.status, g.bytes]), [[`bytes=${kept}-`, 206, (64 << 20) - kept]], "resumed from the bytes on disk");
    for (const i of [1, 2]) assert.equal(snapshotSums(i, `${home(i)}/${CACHE}`, "practice/pull-big"), expectedSums("practice/pull-big"), `n${i}`);
    assert.equal(seenInPs, false, "the token was in no process's argv");
    assert.ok(!`${output}${r.stdout}${r.stderr}`.includes(TOKEN), "the token is not printed");
  });

  test("pull: on a hub mount the nodes share, it downloads once and syncs nothing", async () => {
    const nas = path.join(dir, "nas", "huggingface");
    const recipe = variant(dir, "pull-nas", "practice-2x", `model = "practice/pull-moe"\n[[extra_mounts]]\nhost = "${nas}"\ncontainer = "/root/.cache/huggingface"\nenv = "HF_HOME"\n`);
    const before = fileGets("practice/pull-moe", "model.safetensors").length;
    const r = ok(await launcher(["models", "pull", recipe, "--json"], 240_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: TOKEN }), "pull to the NAS");
    const result = JSON.parse(r.stdout) as { download?: { node: string }; sync: { nodes: { node: string; action: string; bytes: number }[] } };
    assert.equal(result.download?.node, "n1");
    assert.deepEqual(result.sync.nodes.map((n) => [n.node, n.action, n.bytes]), [["n1", "had", 0], ["n2", "had", 0]]);
    // The Hub logs a request after its answer's last byte: waited for, then counted.
    await within(30_000, "the Hub's log of the download", async () => (fileGets("practice/pull-moe", "model.safetensors").length > before ? true : undefined));
    assert.equal(fileGets("practice/pull-moe", "model.safetensors").length, before + 1, "one download");
    assert.equal(snapshotSums(2, `${nas}/hub`, "practice/pull-moe"), expectedSums("practice/pull-moe"), "n2 reads it from the NAS");
  });

  test("pull: a node whose cache lacks room is an error naming node and path before any container runs; a resumed partial counts, and a killed huggingface_hub's stale partial is removed", async (t) => {
    // HF_HOME on the 16 MiB tmpfs `small` (n2 sees it too, like a NAS). The model is 12 MiB + 2 KiB.
    t.after(() => void spawnSync("sh", ["-c", 'rm -rf -- "$1"/* "$1"/.[!.]*', "sh", small]));
    const recipe = variant(dir, "pull-small", "practice-2x", `model = "practice/pull-moe"\n[[extra_mounts]]\nhost = "${small}"\ncontainer = "/root/.cache/huggingface"\nenv = "HF_HOME"\n`);
    const repo = `${small}/hub/models--practice--pull-moe`;
    const blob = `${repo}/blobs/${sums.get("practice/pull-moe/model.safetensors") ?? "?"}`;
    mkdirSync(`${repo}/blobs`, { recursive: true });
    const shareAll = (): void => void spawnSync("chmod", ["-R", "a+rwX", small]);
    const env = { HF_ENDPOINT: ENDPOINT, HF_TOKEN: TOKEN };
    const creates = (since: string): string =>
      onHost(1, ["docker", "events", "--since", since, "--until", (Date.now() / 1000 + 1).toFixed(3), "--filter", "type=container", "--filter", "event=create", "--format", "{{.Actor.Attributes.name}}"]).trim();
    const resolves = (): number => hubLog().filter((q) => q.path.startsWith("/practice/pull-moe/resolve/")).length;

    // 10 MiB of something else: 6 MiB free, 12 MiB needed.
    writeFileSync(`${small}/other-model.bin`, randomBytes(10 << 20));
    shareAll();
    const since = (Date.now() / 1000).toFixed(3);
    const resolvesBefore = resolves();
    const full = await launcher(["models", "pull", recipe], 120_000, env);
    assert.equal(full.code, 1, full.stderr);
    assert.match(full.stderr, new RegExp(`not enough free space for practice/pull-moe at ${PRACTICE_REVISION.slice(0, 12)}`));
    assert.ok(full.stderr.includes(`n1: ${repo} has `), full.stderr);
    assert.match(full.stderr, / MiB free, needs 12\.0 MiB/);
    assert.match(full.stderr, /hint: .*--node.*nothing was downloaded/);
    assert.equal(creates(since), "", "no container was created on n1");
    assert.equal(resolves(), resolvesBefore, "no file was asked of the Hub");
    assert.ok(!`${full.stdout}${full.stderr}`.includes(TOKEN));

    // Instead: the first 6 MiB of the model as the partial blob the downloader resumes, and 8 MiB a
    // killed huggingface_hub >= 1.33 left (ETAG.<8 hex>.incomplete, never resumed). 2 MiB free: only
    // with that litter removed (10 MiB free) and the partial counted (6 MiB needed) does it fit.
    rmSync(`${small}/other-model.bin`);
    writeFileSync(`${blob}.incomplete`, readFileSync(path.join(dir, "hub", "practice/pull-moe/model.safetensors")).subarray(0, 6 << 20));
    writeFileSync(`${blob}.0123abcd.incomplete`, randomBytes(8 << 20));
    shareAll();
    const r = ok(await launcher(["models", "pull", recipe], 240_000, env), "pull into the small cache");
    assert.match(r.stderr, /n1: removed 1 partial file\(s\) \(8\.0 MiB\) that a killed huggingface_hub left and never resumes/);
    const ranged = (): HubRequest[] => fileGets("practice/pull-moe", "model.safetensors").filter((g) => g.range !== null);
    await within(30_000, "the Hub's log of the resumed download", async () => (ranged().length > 0 ? true : undefined));
    assert.deepEqual(ranged().map((g) => [g.range, g.status]), [[`bytes=${6 << 20}-`, 206]], "the partial blob was resumed");
    assert.equal(snapshotSums(1, `${small}/hub`, "practice/pull-moe"), expectedSums("practice/pull-moe"));
    assert.equal(spawnSync("test", ["-e", `${blob}.0123abcd.incomplete`]).status, 1, "the stale partial is gone");
  });
});
