import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { checkFolder, ensureFolder, folderProblem, foundFileProblem, foundFileTrust, MAX_RUNTIME_DIR, parentProblem, runtimeDirFor, type PathFacts } from "../../src/config/private-dir.js";

const ME = 1000;
const NOBODY = 65534;
const dir = (uid: number, mode: number): PathFacts => ({ kind: "dir", uid, mode });
const file = (uid: number, mode: number): PathFacts => ({ kind: "file", uid, mode });
const link = (uid: number): PathFacts => ({ kind: "symlink", uid, mode: 0o777 });

describe("a folder launcher makes is its own", () => {
  test("private: a real folder, owned by this uid, no group or other bits (each failure named)", () => {
    assert.equal(folderProblem(dir(ME, 0o700), ME, "private"), undefined);
    assert.match(folderProblem(dir(NOBODY, 0o700), ME, "private") ?? "", /owned by uid 65534, not by you \(uid 1000\)/);
    assert.match(folderProblem(dir(ME, 0o750), ME, "private") ?? "", /mode 0750/);
    assert.match(folderProblem(dir(ME, 0o701), ME, "private") ?? "", /mode 0701/);
    assert.match(folderProblem(link(ME), ME, "private") ?? "", /symbolic link/);
    assert.match(folderProblem(file(ME, 0o600), ME, "private") ?? "", /not a folder/);
    assert.match(folderProblem(undefined, ME, "private") ?? "", /does not exist/);
  });

  test("readable (the demo's): others may read and enter, never write", () => {
    assert.equal(folderProblem(dir(0, 0o755), 0, "readable"), undefined);
    assert.match(folderProblem(dir(0, 0o775), 0, "readable") ?? "", /mode 0775/);
    assert.match(folderProblem(dir(0, 0o1777), 0, "readable") ?? "", /mode 1777/);
    assert.match(folderProblem(dir(NOBODY, 0o755), 0, "readable") ?? "", /owned by uid 65534/);
  });

  test("its parent lets nobody else swap it: ours or root's, and others' write only with the sticky bit", () => {
    assert.equal(parentProblem(dir(0, 0o1777), ME), undefined, "/tmp");
    assert.equal(parentProblem(dir(ME, 0o700), ME), undefined, "$XDG_RUNTIME_DIR");
    assert.match(parentProblem(dir(0, 0o777), ME) ?? "", /no sticky bit/);
    assert.match(parentProblem(dir(NOBODY, 0o1777), ME) ?? "", /owned by uid 65534/);
  });

  test("the runtime folder: $XDG_RUNTIME_DIR when it is absolute and private, else per uid in tmp, /tmp when too long for ssh's sockets", () => {
    const base = { tmp: "/tmp", uid: ME };
    assert.equal(runtimeDirFor("ssh", { ...base, xdg: "/run/user/1000", xdgFacts: dir(ME, 0o700) }), "/run/user/1000/launcher-ssh");
    assert.equal(runtimeDirFor("ssh", { ...base, xdg: "/run/user/1000", xdgFacts: dir(NOBODY, 0o700) }), "/tmp/launcher-ssh-1000", "not ours");
    assert.equal(runtimeDirFor("ssh", { ...base, xdg: "/run/user/1000", xdgFacts: dir(ME, 0o755) }), "/tmp/launcher-ssh-1000", "not private");
    assert.equal(runtimeDirFor("ssh", { ...base, xdg: "/run/user/1000" }), "/tmp/launcher-ssh-1000", "not there");
    assert.equal(runtimeDirFor("ssh", { ...base, xdg: "run/user", xdgFacts: dir(ME, 0o700) }), "/tmp/launcher-ssh-1000", "relative");
    const long = `/var/${"x".repeat(60)}`;
    assert.equal(runtimeDirFor("ssh", { tmp: long, uid: ME }), "/tmp/launcher-ssh-1000");
    assert.equal(runtimeDirFor("ssh", { tmp: "/var/tmp", uid: ME }), "/var/tmp/launcher-ssh-1000");
    // ssh binds DIR/%C (40) + "." + 16 while it starts; 103 bytes is the portable sun_path.
    assert.ok(MAX_RUNTIME_DIR + 1 + 40 + 17 <= 103);
  });
});

describe("a cluster file found in the current folder (ssh's rule for ~/.ssh/config)", () => {
  test("owned by you or root and not writable by group or others; a link is judged with what it names", () => {
    assert.equal(foundFileProblem(file(ME, 0o644), file(ME, 0o644), ME), undefined);
    assert.equal(foundFileProblem(file(0, 0o644), file(0, 0o644), ME), undefined, "root's, as ssh allows");
    assert.match(foundFileProblem(file(NOBODY, 0o644), file(NOBODY, 0o644), ME) ?? "", /owned by uid 65534, neither you \(uid 1000\) nor root/);
    assert.match(foundFileProblem(file(ME, 0o664), file(ME, 0o664), ME) ?? "", /writable by group or others \(mode 0664\)/);
    assert.match(foundFileProblem(file(ME, 0o646), file(ME, 0o646), ME) ?? "", /mode 0646/);
    assert.equal(foundFileProblem(link(ME), file(ME, 0o600), ME), undefined, "your link to your file");
    assert.match(foundFileProblem(link(NOBODY), file(ME, 0o600), ME) ?? "", /symbolic link owned by uid 65534/);
    assert.match(foundFileProblem(link(ME), file(NOBODY, 0o600), ME) ?? "", /owned by uid 65534/);
    assert.match(foundFileProblem(link(ME), undefined, ME) ?? "", /to nothing/);
  });
});

const asRoot = { skip: process.getuid?.() !== 0 ? "needs root to make files of another uid" : false };

/** A folder like /tmp (root's, sticky, writable by all) in which nobody plants things. */
function stickyTmp(): { root: string; done: () => void } {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-pd-"));
  chmodSync(root, 0o1777);
  return { root, done: () => rmSync(root, { recursive: true, force: true }) };
}
const asNobody = (argv: string[]): void => {
  const r = spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", ...argv], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
};

describe("the shell: folders on disk", () => {
  test("ensureFolder makes a missing folder with the rule's mode, and takes one it made before", () => {
    const t = stickyTmp();
    try {
      const d = path.join(t.root, "mine");
      assert.equal(ensureFolder(d, "test", "private"), d);
      assert.equal(lstatSync(d).mode & 0o777, 0o700);
      assert.equal(ensureFolder(d, "test", "private"), d);
    } finally {
      t.done();
    }
  });

  test("a folder another uid made first, or a link in its place, is refused, named, and left unused (fails before: mkdir -p took it)", asRoot, () => {
    const t = stickyTmp();
    try {
      const theirs = path.join(t.root, "theirs");
      asNobody(["mkdir", "-m", "700", theirs]);
      assert.throws(() => ensureFolder(theirs, "ssh's folder", "private"), (e: unknown) => e instanceof UserError && e.message.includes(theirs) && /owned by uid 65534/.test(e.message) && /rm -r/.test(e.hint ?? ""));
      const target = path.join(t.root, "target");
      asNobody(["mkdir", "-m", "777", target]);
      const linked = path.join(t.root, "linked");
      asNobody(["ln", "-s", target, linked]);
      assert.throws(() => ensureFolder(linked, "ssh's folder", "private"), (e: unknown) => e instanceof UserError && /symbolic link/.test(e.message));
      assert.deepEqual(readdirSync(target), []);
      const open = path.join(t.root, "open");
      mkdirSync(open);
      chmodSync(open, 0o777);
      assert.throws(() => ensureFolder(open, "ssh's folder", "private"), (e: unknown) => e instanceof UserError && /mode 0777/.test(e.message));
      assert.equal(checkFolder(path.join(t.root, "absent"), "x", "private"), undefined);
    } finally {
      t.done();
    }
  });

  test("a folder whose parent others may write without a sticky bit is refused", asRoot, () => {
    const t = stickyTmp();
    try {
      const loose = path.join(t.root, "loose");
      mkdirSync(loose);
      chmodSync(loose, 0o777);
      assert.throws(() => ensureFolder(path.join(loose, "d"), "x", "private"), (e: unknown) => e instanceof UserError && /no sticky bit/.test(e.message));
    } finally {
      t.done();
    }
  });

  test("foundFileTrust asks the disk: another uid's file, a world-writable one, a link of another uid", asRoot, () => {
    const t = stickyTmp();
    try {
      const mine = path.join(t.root, "mine.toml");
      writeFileSync(mine, "x");
      chmodSync(mine, 0o644);
      assert.equal(foundFileTrust(mine), undefined);
      chmodSync(mine, 0o666);
      assert.match(foundFileTrust(mine) ?? "", /mode 0666/);
      chmodSync(mine, 0o644);
      const theirs = path.join(t.root, "theirs.toml");
      writeFileSync(theirs, "x");
      chownSync(theirs, NOBODY, NOBODY);
      assert.match(foundFileTrust(theirs) ?? "", /owned by uid 65534/);
      const l = path.join(t.root, "l.toml");
      symlinkSync(mine, l);
      assert.equal(foundFileTrust(l), undefined);
      const theirLink = path.join(t.root, "tl.toml");
      asNobody(["ln", "-s", mine, theirLink]);
      assert.match(foundFileTrust(theirLink) ?? "", /symbolic link owned by uid 65534/);
    } finally {
      t.done();
    }
  });
});
