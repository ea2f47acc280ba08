import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { test } from "node:test";
import type { RawProcess } from "../../src/remote/transport.js";
import { Hop } from "../../src/transfer/chain.js";
import { cacheArgv } from "../../src/transfer/hf-cache.js";
import { endWhy, NO_SPACE_EXIT } from "../../src/transfer/hop.js";

// Every transfer failure names the node and the reason (issue 25: a full disk during `models
// sync` said "Broken pipe", a lost receiver only "exit 255").

/** A hop's SSH session as launcher sees it: the report lines it printed, then its end. */
function session(lines: readonly string[], code: number, stderr: string): RawProcess {
  return { stdin: new PassThrough(), stdout: Readable.from(lines.map((l) => `${l}\n`)), done: Promise.resolve({ code, stderr }), kill: () => undefined };
}

const ended = async (hop: Hop): Promise<Hop> => {
  await hop.done;
  // The report lines are read as they come; the end is heard after them.
  await new Promise((resolve) => setImmediate(resolve));
  return hop;
};

test("a receiver whose SSH connection was lost: said so, not 'exit 255'", async () => {
  const hop = await ended(new Hop("n2", session(["port 40001", "accepted 10.0.0.1"], 255, "Connection to n2 closed by remote host.\n"), "s".repeat(64), () => undefined));
  assert.equal(hop.silence(), "SSH connection lost (ssh exit 255: Connection to n2 closed by remote host.)");
});

test("a receiver whose sink found the disk full: 'no space on NODE:PATH', not the hop's broken pipe", async () => {
  const hop = await ended(new Hop("n2", session(["port 40001", "error writing the payload: Broken pipe"], NO_SPACE_EXIT, "hub/blobs/abc.partial: No space left on device\n"), "s".repeat(64), () => undefined, "n2:/cache/hub/blobs/abc.partial"));
  assert.equal(hop.silence(), "no space on n2:/cache/hub/blobs/abc.partial (hub/blobs/abc.partial: No space left on device)");
  // Any other end: the hop's own report first, as before.
  const other = await ended(new Hop("n2", session(["error writing the payload: Broken pipe"], 1, "docker: something\n"), "s".repeat(64), () => undefined));
  assert.equal(other.silence(), "writing the payload: Broken pipe");
  assert.equal(endWhy(3, "", "n2"), "exit 3");
});

test("CACHE_PERL append on a full disk exits NO_SPACE_EXIT, saying which file (a tmpfs of 64 KiB, in a mount namespace of its own)", (t) => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-nospace-"));
  try {
    const [perl, ...args] = cacheArgv("append", root, "blob.partial");
    // The payload (256 KiB) is more than the filesystem holds.
    const script = 'root=$1; shift; mount -t tmpfs -o size=64k tmpfs "$root" || exit 200; head -c 262144 /dev/zero | "$@"';
    const r = spawnSync("unshare", ["-rm", "sh", "-c", script, "sh", root, perl as string, ...args], { encoding: "utf8" });
    if (r.error !== undefined || r.status === 200) {
      t.skip(`no mount namespace here to make a full disk in (${r.error?.message ?? r.stderr.trim()})`);
      return;
    }
    assert.equal(r.status, NO_SPACE_EXIT, r.stderr);
    assert.match(r.stderr, /^blob\.partial: /);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("CACHE_PERL append still appends its whole input", () => {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-append-"));
  try {
    const [perl, ...args] = cacheArgv("append", root, "blob.partial");
    const input = Buffer.alloc(3 << 20, 7);
    for (let i = 0; i < 2; i++) assert.equal(spawnSync(perl as string, args, { input }).status, 0);
    const size = spawnSync("stat", ["-c", "%s", path.join(root, "blob.partial")], { encoding: "utf8" }).stdout.trim();
    assert.equal(size, String(2 * input.length));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
