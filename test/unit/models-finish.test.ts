import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { finishFile } from "../../src/deploy/models.js";
import { RESUMED_PARTIAL } from "../../src/plan/pull-space.js";

// The end of every synced file, run for real on this machine (sh, stat, openssl, sha256sum): the
// digest is openssl's where it runs, coreutils' otherwise, and either way a wrong byte is refused.
const dir = mkdtempSync(path.join(tmpdir(), "launcher-finish-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const bytes = randomBytes(256 * 1024);
const sha = createHash("sha256").update(bytes).digest("hex");
let n = 0;

/** Writes `content` as a partial copy and runs finishFile on it, with `PATH` when given. */
function finish(content: Buffer, size: number, digest: string | undefined, PATH?: string): { code: number | null; out: string; file: string } {
  const file = path.join(dir, `blob${n++}`);
  writeFileSync(`${file}${RESUMED_PARTIAL.sync}`, content);
  const [cmd, ...args] = finishFile(file, size, digest);
  const r = spawnSync(cmd as string, args, { encoding: "utf8", env: { ...process.env, ...(PATH === undefined ? {} : { PATH }) } });
  return { code: r.status, out: r.stdout + r.stderr, file };
}

/** A PATH with the script's tools but no openssl; `openssl` given: a stand-in of that text instead. */
function toolsWithout(name: string, openssl?: string): string {
  const bin = path.join(dir, name);
  mkdirSync(bin);
  for (const tool of ["sh", "stat", "sha256sum", "cut", "mv", "rm"]) {
    const where = spawnSync("sh", ["-c", 'command -v "$1"', "sh", tool], { encoding: "utf8" }).stdout.trim();
    symlinkSync(where, path.join(bin, tool));
  }
  if (openssl !== undefined) {
    writeFileSync(path.join(bin, "openssl"), openssl);
    chmodSync(path.join(bin, "openssl"), 0o755);
  }
  return bin;
}

test("the right bytes: moved into place", () => {
  const r = finish(bytes, bytes.length, sha);
  assert.equal(r.code, 0, r.out);
  assert.deepEqual(readFileSync(r.file), bytes);
  assert.equal(existsSync(`${r.file}${RESUMED_PARTIAL.sync}`), false);
});

test("one byte wrong: refused, naming both digests, and the partial copy removed", () => {
  const bad = Buffer.from(bytes);
  bad[1000] = (bad[1000] as number) ^ 1;
  const r = finish(bad, bytes.length, sha);
  assert.equal(r.code, 6);
  assert.match(r.out, new RegExp(`^sha256 ${createHash("sha256").update(bad).digest("hex")}, expected ${sha}$`, "m"));
  assert.equal(existsSync(r.file), false);
  assert.equal(existsSync(`${r.file}${RESUMED_PARTIAL.sync}`), false);
});

test("a short copy: refused by its size, and kept to resume", () => {
  const r = finish(bytes.subarray(0, 1000), bytes.length, sha);
  assert.equal(r.code, 5);
  assert.match(r.out, new RegExp(`^size 1000, expected ${bytes.length}$`, "m"));
  assert.equal(existsSync(`${r.file}${RESUMED_PARTIAL.sync}`), true);
});

test("a node without openssl, or whose openssl prints no digest: coreutils decides, as strictly", () => {
  for (const [name, openssl] of [["no-openssl", undefined], ["odd-openssl", "#!/bin/sh\necho 'dgst: unknown option'\n"]] as const) {
    const PATH = toolsWithout(name, openssl);
    const good = finish(bytes, bytes.length, sha, PATH);
    assert.equal(good.code, 0, `${name}: ${good.out}`);
    assert.deepEqual(readFileSync(good.file), bytes);
    const bad = Buffer.from(bytes);
    bad[0] = (bad[0] as number) ^ 1;
    const r = finish(bad, bytes.length, sha, PATH);
    assert.equal(r.code, 6, `${name}: ${r.out}`);
    assert.equal(existsSync(r.file), false);
  }
});

test("where openssl gives a digest, that digest decides (a stand-in that answers another refuses the file)", () => {
  const PATH = toolsWithout("lying-openssl", `#!/bin/sh\necho '${"0".repeat(64)} *stdin'\n`);
  const r = finish(bytes, bytes.length, sha, PATH);
  assert.equal(r.code, 6, r.out);
  assert.match(r.out, new RegExp(`^sha256 ${"0".repeat(64)}, expected ${sha}$`, "m"));
});

test("a file of unknown digest (not a blob): its size alone decides", () => {
  const r = finish(Buffer.from("{}\n"), 3, undefined);
  assert.equal(r.code, 0, r.out);
});
