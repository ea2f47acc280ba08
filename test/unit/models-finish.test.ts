import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { finishFile } from "../../src/transfer/models.js";
import { RESUMED_PARTIAL } from "../../src/plan/pull-space.js";
import { UNSAFE_EXIT } from "../../src/transfer/hf-cache.js";

// The end of every synced file, run for real on this machine (sh, stat, openssl, sha256sum;
// scripts/install-deps installs openssl): openssl's digest is taken when it matches, coreutils'
// decides everything else, and either way a wrong byte is refused.
const dir = mkdtempSync(path.join(tmpdir(), "launcher-finish-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const bytes = randomBytes(256 * 1024);
const sha = createHash("sha256").update(bytes).digest("hex");
const flipped = (at: number): Buffer => {
  const b = Buffer.from(bytes);
  b[at] = (b[at] as number) ^ 1;
  return b;
};
const which = (tool: string): string => spawnSync("sh", ["-c", 'command -v "$1"', "sh", tool], { encoding: "utf8" }).stdout.trim();
let n = 0;

/** Writes `content` as a partial copy and runs finishFile on it, with `PATH` when given. */
function finish(content: Buffer, size: number, digest: string, PATH?: string): { code: number | null; out: string; file: string } {
  const name = `blob ${n++}`;
  const file = path.join(dir, name);
  writeFileSync(`${file}${RESUMED_PARTIAL.sync}`, content);
  const [cmd, ...args] = finishFile(dir, name, size, digest);
  const r = spawnSync(cmd as string, args, { encoding: "utf8", env: { ...process.env, ...(PATH === undefined ? {} : { PATH }) } });
  return { code: r.status, out: r.stdout + r.stderr, file };
}

/** A PATH with the script's own tools, and `stand` (name to script text) in place of some: an absent openssl unless given. */
function tools(name: string, stand: Record<string, string> = {}): string {
  const bin = path.join(dir, name);
  mkdirSync(bin);
  for (const tool of ["sh", "perl", "stat", "sha256sum", "cut", "mv", "rm"]) if (stand[tool] === undefined) symlinkSync(which(tool), path.join(bin, tool));
  for (const [tool, text] of Object.entries(stand)) {
    writeFileSync(path.join(bin, tool), text);
    chmodSync(path.join(bin, tool), 0o755);
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
  const bad = flipped(1000);
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

test("where openssl runs, it hashes the file (on stdin) and coreutils is not asked", () => {
  const openssl = which("openssl");
  assert.ok(openssl !== "", "openssl is on this machine (scripts/install-deps)");
  const log = path.join(dir, "openssl.log");
  const PATH = tools("real-openssl", {
    openssl: `#!/bin/sh\necho "$@" >> '${log}'\nexec '${openssl}' "$@"\n`,
    sha256sum: "#!/bin/sh\nexit 1\n",
  });
  const r = finish(bytes, bytes.length, sha, PATH);
  assert.equal(r.code, 0, r.out);
  assert.deepEqual(readFileSync(r.file), bytes);
  assert.equal(readFileSync(log, "utf8"), "dgst -sha256 -r\n");
});

test("an openssl that answers otherwise never decides: coreutils does, both ways", () => {
  const cases = {
    absent: {},
    // Another output format, an error on stdout, another digest (a wrong build): none is a match.
    "other format": { openssl: `#!/bin/sh\ncat >/dev/null; echo "SHA2-256(stdin)= ${sha}"\n` },
    "an error": { openssl: "#!/bin/sh\necho 'dgst: unknown option'\n" },
    "another digest": { openssl: `#!/bin/sh\ncat >/dev/null; echo '${"0".repeat(64)} *stdin'\n` },
  };
  for (const [name, stand] of Object.entries(cases)) {
    const PATH = tools(name, stand);
    const good = finish(bytes, bytes.length, sha, PATH);
    assert.equal(good.code, 0, `${name}: ${good.out}`);
    assert.deepEqual(readFileSync(good.file), bytes);
    const r = finish(flipped(0), bytes.length, sha, PATH);
    assert.equal(r.code, 6, `${name}: ${r.out}`);
    assert.equal(existsSync(r.file), false);
  }
});

test("a small file too: its SHA-256 (computed on the source) decides, not its size alone", () => {
  const text = Buffer.from("{}\n");
  assert.equal(finish(text, 3, createHash("sha256").update(text).digest("hex")).code, 0);
  const r = finish(Buffer.from("[]\n"), 3, createHash("sha256").update(text).digest("hex"));
  assert.equal(r.code, 6, r.out);
});

test("a partial copy planted as a link (to a file outside) is refused before it is read or moved, and the file it points to stays", () => {
  const outside = path.join(dir, "authorized_keys");
  writeFileSync(outside, "ssh-ed25519 AAAA me\n");
  const name = `blob ${n++}`;
  symlinkSync(outside, path.join(dir, `${name}${RESUMED_PARTIAL.sync}`));
  const [cmd, ...args] = finishFile(dir, name, 20, sha);
  const r = spawnSync(cmd as string, args, { encoding: "utf8" });
  assert.equal(r.status, UNSAFE_EXIT, r.stdout + r.stderr);
  assert.match(r.stderr, /is a symbolic link/);
  assert.equal(existsSync(path.join(dir, name)), false);
  assert.equal(readFileSync(outside, "utf8"), "ssh-ed25519 AAAA me\n");
});
