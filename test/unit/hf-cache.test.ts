import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { parseInspection } from "../../src/plan/weights.js";
import { cacheArgv, UNSAFE_EXIT, type CacheOp } from "../../src/transfer/hf-cache.js";

// CACHE_PERL run for real on this machine (perl-base, as on every node), in a cache laid out as
// huggingface_hub leaves it, then with the links a container could plant in it.
const top = mkdtempSync(path.join(tmpdir(), "launcher-hf-cache-"));
after(() => rmSync(top, { recursive: true, force: true }));
const REV = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
const REPO = "hub/models--org--m";
const config = Buffer.from('{"model_type":"x"}\n');
const shard = Buffer.from("weights ".repeat(100));
const sha = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
const GIT_BLOB = "0123456789abcdef0123456789abcdef01234567";
let n = 0;

/** A fresh cache root holding one repo: a config (git blob), a shard (LFS, named by its SHA-256), a plain README; and an outside folder with a secret. */
function cache(): { root: string; repo: string; outside: string } {
  const dir = path.join(top, `c${n++}`);
  const root = path.join(dir, "huggingface");
  const repo = path.join(root, REPO);
  const outside = path.join(dir, "ssh");
  mkdirSync(path.join(repo, "blobs"), { recursive: true });
  mkdirSync(path.join(repo, "refs"));
  mkdirSync(path.join(repo, "snapshots", REV, "sub"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(outside, "authorized_keys"), "ssh-ed25519 AAAA me\n");
  writeFileSync(path.join(repo, "refs", "main"), REV);
  writeFileSync(path.join(repo, "blobs", GIT_BLOB), config);
  writeFileSync(path.join(repo, "blobs", sha(shard)), shard);
  symlinkSync(`../../blobs/${GIT_BLOB}`, path.join(repo, "snapshots", REV, "config.json"));
  symlinkSync(`../../../blobs/${sha(shard)}`, path.join(repo, "snapshots", REV, "sub", "model.safetensors"));
  writeFileSync(path.join(repo, "snapshots", REV, "README.md"), "plain\n");
  return { root, repo, outside };
}

function run(op: CacheOp, root: string, args: string[], input = ""): { code: number | null; stdout: string; stderr: string } {
  const [cmd, ...rest] = cacheArgv(op, root, ...args);
  const r = spawnSync(cmd as string, rest, { input, encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const refused = (r: { code: number | null; stderr: string }, what: RegExp): void => {
  assert.equal(r.code, UNSAFE_EXIT, r.stderr);
  assert.match(r.stderr, what);
};

test("inspect: the ref read, every entry of the snapshot with its blob's size, as parseInspection takes it", () => {
  const c = cache();
  const r = run("inspect", c.root, [REPO, ""]);
  assert.equal(r.code, 0, r.stderr);
  const seen = parseInspection("n1", c.repo, "", r.stdout);
  assert.equal(seen.kind, "snapshot");
  assert.ok(seen.kind === "snapshot");
  assert.equal(seen.revision, REV);
  assert.deepEqual(seen.ref, { name: "main", commit: REV });
  assert.deepEqual(
    [...seen.files].sort((a, b) => (a.path < b.path ? -1 : 1)),
    [
      { path: "README.md", size: 6 },
      { path: "config.json", size: config.length, blob: GIT_BLOB, link: `../../blobs/${GIT_BLOB}` },
      { path: "sub/model.safetensors", size: shard.length, blob: sha(shard), link: `../../../blobs/${sha(shard)}` },
    ],
  );
  assert.equal(run("inspect", path.join(top, "absent"), [REPO, ""]).stdout, "missing no folder\n");
});

test("inspect: a refs/main that names a path out of the repo is refused naming node and file, its content never shown", () => {
  const c = cache();
  writeFileSync(path.join(c.repo, "refs", "main"), "../../../../../ssh");
  const r = run("inspect", c.root, [REPO, ""]);
  assert.equal(r.code, 0, r.stderr);
  assert.throws(() => parseInspection("n1", c.repo, "", r.stdout), (e: Error & { node?: string }) => e.node === "n1" && e.message.includes(`${c.repo}/refs/main`) && !e.message.includes("ssh"));
  assert.doesNotMatch(r.stdout, /^[LF] /m, "nothing outside was listed");
});

test("inspect: links planted in the cache (the snapshot, blobs/, a blob, the ref) are refused, never followed", () => {
  const plants: [string, (c: ReturnType<typeof cache>) => void, RegExp][] = [
    ["snapshot", (c) => (rmSync(path.join(c.repo, "snapshots", REV), { recursive: true }), symlinkSync(c.outside, path.join(c.repo, "snapshots", REV))), new RegExp(`snapshots/${REV} is a symbolic link`)],
    ["blobs", (c) => (rmSync(path.join(c.repo, "blobs"), { recursive: true }), symlinkSync(c.outside, path.join(c.repo, "blobs"))), /blobs is a symbolic link/],
    ["a blob", (c) => (rmSync(path.join(c.repo, "blobs", GIT_BLOB)), symlinkSync(path.join(c.outside, "authorized_keys"), path.join(c.repo, "blobs", GIT_BLOB))), new RegExp(`blobs/${GIT_BLOB} is a symbolic link`)],
    ["refs/main", (c) => (rmSync(path.join(c.repo, "refs", "main")), symlinkSync(path.join(c.outside, "authorized_keys"), path.join(c.repo, "refs", "main"))), /refs\/main is a symbolic link/],
    ["the repo", (c) => (rmSync(c.repo, { recursive: true }), symlinkSync(c.outside, c.repo)), /models--org--m is a symbolic link/],
  ];
  for (const [name, plant, why] of plants) {
    const c = cache();
    plant(c);
    refused(run("inspect", c.root, [REPO, ""]), why);
    assert.ok(name);
  }
});

test("writes: a link planted where sync writes (a folder, the partial blob, the final file, refs/main) makes it refuse and leaves the outside untouched", () => {
  const keys = (c: ReturnType<typeof cache>): string => readFileSync(path.join(c.outside, "authorized_keys"), "utf8");
  const partial = `${REPO}/blobs/${GIT_BLOB}.launcher-partial`;
  {
    const c = cache();
    rmSync(path.join(c.repo, "snapshots", REV), { recursive: true });
    symlinkSync(c.outside, path.join(c.repo, "snapshots", REV));
    refused(run("prepare", c.root, [`${REPO}/blobs`, `${REPO}/snapshots/${REV}`]), /is a symbolic link/);
    refused(run("link", c.root, [`${REPO}/snapshots/${REV}`, "authorized_keys", `../../blobs/${GIT_BLOB}`]), /is a symbolic link/);
    assert.equal(lstatSync(path.join(c.outside, "authorized_keys")).isFile(), true);
  }
  {
    const c = cache();
    symlinkSync(path.join(c.outside, "authorized_keys"), path.join(c.root, partial));
    refused(run("append", c.root, [partial], "ssh-rsa EVIL\n"), /is a symbolic link/);
    refused(run("state", c.root, [`${REPO}/blobs`, ".launcher-partial", GIT_BLOB]), /is a symbolic link/);
    refused(run("check", c.root, [partial]), /is a symbolic link/);
    assert.equal(keys(c), "ssh-ed25519 AAAA me\n");
    // prepare removes the planted link itself, not what it points to.
    assert.equal(run("prepare", c.root, ["--", partial]).code, 0);
    assert.equal(existsSync(path.join(c.root, partial)), false);
    assert.equal(keys(c), "ssh-ed25519 AAAA me\n");
  }
  {
    const c = cache();
    rmSync(path.join(c.repo, "refs", "main"));
    symlinkSync(path.join(c.outside, "authorized_keys"), path.join(c.repo, "refs", "main"));
    assert.equal(run("ref", c.root, [`${REPO}/refs/main`, REV]).code, 0);
    assert.equal(lstatSync(path.join(c.repo, "refs", "main")).isFile(), true, "the link was replaced by a file");
    assert.equal(readFileSync(path.join(c.repo, "refs", "main"), "utf8"), REV);
    assert.equal(keys(c), "ssh-ed25519 AAAA me\n");
  }
  {
    const c = cache();
    refused(run("append", c.root, [`${REPO}/../../ssh/authorized_keys`], "x"), /not a plain relative path/);
    refused(run("read", c.root, [`${REPO}/blobs/../../../../ssh/authorized_keys`, "0"]), /not a plain relative path/);
    assert.equal(keys(c), "ssh-ed25519 AAAA me\n");
  }
});

test("writes and reads in a clean cache: append, read from an offset, hash, link and ref do what sync needs", () => {
  const c = cache();
  const rel = `${REPO}/blobs/new.launcher-partial`;
  assert.equal(run("append", c.root, [rel], "hello ").code, 0);
  assert.equal(run("append", c.root, [rel], "world").code, 0);
  assert.equal(readFileSync(path.join(c.root, rel), "utf8"), "hello world");
  assert.equal(run("read", c.root, [rel, "6"]).stdout, "world");
  assert.equal(run("hash", c.root, [rel, `${REPO}/blobs/${GIT_BLOB}`]).stdout, `${sha(Buffer.from("hello world"))}\n${sha(config)}\n`);
  assert.equal(run("state", c.root, [`${REPO}/blobs`, ".launcher-partial", "new", GIT_BLOB]).stdout, `new -1 11\n${GIT_BLOB} ${config.length} -1\n`);
  const fresh = path.join(top, `fresh${n++}`);
  assert.equal(run("prepare", fresh, [`${REPO}/blobs`, `${REPO}/snapshots/${REV}/a/b`]).code, 0, "the root and the folders are made");
  assert.equal(run("link", fresh, [`${REPO}/snapshots/${REV}`, "a/b/x.bin", `../../../../blobs/${GIT_BLOB}`]).code, 0);
  assert.equal(readlinkSync(path.join(fresh, REPO, "snapshots", REV, "a", "b", "x.bin")), `../../../../blobs/${GIT_BLOB}`);
});
