import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { RemoteError } from "../../src/config/errors.js";
import { checkPullSpace } from "../../src/transfer/pull-space.js";
import { localTransport } from "../../src/remote/local.js";

// checkPullSpace's node scripts for real, with this machine as the node (sh, curl, find, flock, df),
// asking the Hub stand-in (test/rig/hub-standin.mjs) on loopback.
const COMMIT = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
const TOKEN = `hf_unit${randomBytes(8).toString("hex")}`;
const MiB = 1 << 20;
const dir = mkdtempSync(path.join(tmpdir(), "launcher-pull-space-"));
const hub = path.join(dir, "cache", "hub");
const repo = "models--org--m";
const blobs = path.join(hub, repo, "blobs");
const shard = randomBytes(3 * MiB);
const shardSha = createHash("sha256").update(shard).digest("hex");
let server: ChildProcess | undefined;
let holder: ChildProcess | undefined;
let endpoint = "";

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

before(async () => {
  mkdirSync(path.join(dir, "repos", "org", "m"), { recursive: true });
  writeFileSync(path.join(dir, "repos", "org", "m", "config.json"), '{"model_type":"x"}');
  writeFileSync(path.join(dir, "repos", "org", "m", "model.safetensors"), shard);
  writeFileSync(path.join(dir, "token"), TOKEN);
  const port = await freePort();
  endpoint = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, [path.resolve("test/rig/hub-standin.mjs"), "--root", path.join(dir, "repos"), "--listen", `127.0.0.1:${port}`, "--commit", COMMIT, "--token-file", path.join(dir, "token")], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the Hub stand-in did not start")), 10_000);
    server?.stdout?.on("data", (d: Buffer) => d.toString().includes('"listening"') && (clearTimeout(timer), resolve()));
  });
});
after(() => {
  server?.kill();
  try {
    if (holder?.pid !== undefined) process.kill(-holder.pid, "SIGTERM");
  } catch {
    // already gone
  }
  rmSync(dir, { recursive: true, force: true });
});

test("pull space on a real shell: the Hub's sizes less a resumed partial; an unlocked stale partial is removed, one a live download locks is kept", async () => {
  mkdirSync(blobs, { recursive: true });
  mkdirSync(path.join(hub, ".locks", repo), { recursive: true });
  writeFileSync(path.join(blobs, `${shardSha}.incomplete`), shard.subarray(0, MiB));
  writeFileSync(path.join(blobs, `${shardSha}.0123abcd.incomplete`), randomBytes(1000));
  writeFileSync(path.join(blobs, `${shardSha}.89abcdef.incomplete`), randomBytes(2000));
  // A live download of that blob: huggingface_hub holds an flock on .locks/REPO/ETAG.lock while it writes.
  const lock = path.join(hub, ".locks", repo, `${shardSha}.lock`);
  // Its own process group: flock(1) runs `sleep` with the locked descriptor, so both must end.
  holder = spawn("flock", [lock, "sleep", "60"], { stdio: "ignore", detached: true });
  const locked = async (): Promise<boolean> => (await localTransport().exec(["flock", "-n", lock, "true"])).code !== 0;
  for (let i = 0; i < 100 && !(await locked()); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(await locked(), "the lock is held");

  const space = await checkPullSpace(localTransport("n1"), { hub, repo }, { endpoint, token: TOKEN, model: "org/m" }, new AbortController().signal);
  assert.equal(space.commit, COMMIT);
  assert.deepEqual([space.bytes, space.blobs, space.resumed], [2 * MiB + 18, 2, MiB]);
  // Both stale partials belong to the locked blob: kept while it is locked.
  assert.deepEqual(space.cleaned, { files: 0, bytes: 0 });
  assert.ok(existsSync(path.join(blobs, `${shardSha}.0123abcd.incomplete`)));
  assert.ok(typeof space.free === "number" && space.free > 0);

  process.kill(-(holder.pid as number), "SIGTERM");
  for (let i = 0; i < 100 && (await locked()); i++) await new Promise((r) => setTimeout(r, 50));
  const again = await checkPullSpace(localTransport("n1"), { hub, repo }, { endpoint, token: TOKEN, model: "org/m" }, new AbortController().signal);
  assert.deepEqual(again.cleaned, { files: 2, bytes: 3000 });
  assert.ok(!existsSync(path.join(blobs, `${shardSha}.0123abcd.incomplete`)) && !existsSync(path.join(blobs, `${shardSha}.89abcdef.incomplete`)));
  assert.ok(existsSync(path.join(blobs, `${shardSha}.incomplete`)), "the resumed partial stays");
});

test("pull space on a real shell: a wrong token is the Hub's 401, named with the node, the token in no message", async () => {
  await assert.rejects(
    checkPullSpace(localTransport("n1"), { hub, repo }, { endpoint, token: "hf_wrong", model: "org/m" }, new AbortController().signal),
    (e: unknown) => e instanceof RemoteError && e.node === "n1" && /HTTP 401/.test(e.message) && /restricted/.test(e.detail ?? "") && !JSON.stringify(e).includes("hf_wrong"),
  );
});
