import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { sourceArgs } from "../built-cli.js";
import { LOADED_HOOK, loadedPackages } from "./loaded-packages.js";

// What every process of the CLI loads before it knows its command: `launcher serve` (the
// long-lived gateway) among them. A package here only one command needs costs every other one its
// start and its memory (vega, vega-lite and @stdlib were about 900 of the 1,200 files the start
// read: seconds of every `images push` bench/push.ts times); in the daemon, also the GC's time
// marking a larger heap.

function packagesLoadedBy(args: string[]): string[] {
  const r = spawnSync(process.execPath, ["--import", LOADED_HOOK, ...sourceArgs(), ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  assert.equal(r.status, 0, r.stderr);
  return loadedPackages(r.stderr);
}

test("the CLI loads compare's plotting (vega) and statistics (@stdlib) only for compare", () => {
  const loaded = packagesLoadedBy(["serve", "--help"]);
  // The hook works: commander parses every command line.
  assert.ok(loaded.includes("commander"), loaded.join(" "));
  const heavy = loaded.filter((p) => p.startsWith("vega") || p.startsWith("@stdlib/") || p.startsWith("d3-"));
  assert.deepEqual(heavy, []);
});
