import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadOnly } from "../../src/transfer/images.js";

const WANT = `sha256:${"a".repeat(64)}`;
const OTHER = `sha256:${"b".repeat(64)}`;

/** Runs loadOnly(WANT) with a stand-in `docker`: `load` prints `loaded`, `inspect` answers from `ids`, `rm` is logged. */
function run(loaded: string, ids: Record<string, string>): { code: number | null; stderr: string; removed: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-load-"));
  try {
    const docker = path.join(dir, "docker");
    const table = Object.entries(ids).map(([t, id]) => `"${t}") echo ${id} ;;`).join("\n");
    writeFileSync(docker, `#!/bin/sh
case "$1 $2" in
  "load --quiet") cat >/dev/null; printf '%s\\n' "$LOADED" ;;
  "image inspect") for t; do :; done; case "$t" in\n${table}\n*) exit 1 ;; esac ;;
  "image rm") echo "$@" >> "${path.join(dir, "rm.log")}" ;;
esac
`);
    chmodSync(docker, 0o755);
    const [cmd, ...args] = loadOnly(WANT);
    const r = spawnSync(cmd as string, args, { input: "archive", encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH ?? ""}`, LOADED: loaded } });
    let removed = "";
    try {
      removed = readFileSync(path.join(dir, "rm.log"), "utf8");
    } catch {
      removed = "";
    }
    return { code: r.status, stderr: r.stderr, removed };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the image that was sent loads as before", () => {
  assert.equal(run("Loaded image: engine:1", { "engine:1": WANT }).code, 0);
  assert.equal(run(`Loaded image ID: ${WANT}`, {}).code, 0);
});

test("an archive that also names another image fails, says which, and that name is taken off again", () => {
  const r = run("Loaded image: engine:1\nThe image ubuntu:22.04 already exists, renaming the old one with ID x to empty string\nLoaded image: ubuntu:22.04", { "engine:1": WANT, "ubuntu:22.04": OTHER });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /loaded other images than sha256:a+: ubuntu:22\.04;/);
  assert.equal(r.removed.trim(), "image rm --no-prune -- ubuntu:22.04");
});

test("an archive of another image only fails too", () => {
  assert.equal(run(`Loaded image ID: ${OTHER}`, {}).code, 1);
  assert.equal(run("Loaded image: engine:1", { "engine:1": OTHER }).code, 1);
  assert.equal(run("", {}).code, 1);
});

test("a store kept by containerd that could not unpack the image (it only says so): the load fails and the image's name is taken off", () => {
  const r = run("Error unpacking image engine:1: failed to extract layer: content digest sha256:cc: not found\nLoaded image: engine:1", { "engine:1": WANT });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /could not unpack the image/);
  assert.equal(r.removed.trim(), "image rm --no-prune -- engine:1");
});
