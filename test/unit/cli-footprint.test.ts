import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";

// What every process of the CLI loads before it knows its command: `launcher serve` (the
// long-lived gateway) among them. A package here only one command needs costs every other one its
// start and its memory (vega, vega-lite and @stdlib were about 900 of the 1,200 files the start
// read: seconds of every `images push` bench/push.ts times); in the daemon, also the GC's time
// marking a larger heap.

const MAIN = path.resolve("src/cli/main.ts");

/** A resolve hook that names each npm package the process loads, once, on stderr. */
const HOOK = `data:text/javascript,${encodeURIComponent(`
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(\`
const seen = new Set();
export async function resolve(s, c, next) {
  const r = await next(s, c);
  const m = /node_modules\\\\/((?:@[^/]+\\\\/)?[^/]+)/.exec(r.url);
  if (m && !seen.has(m[1])) { seen.add(m[1]); process.stderr.write("loaded " + m[1] + "\\\\n"); }
  return r;
}\`));
`)}`;

function packagesLoadedBy(args: string[]): string[] {
  const r = spawnSync(process.execPath, ["--import", HOOK, "--import", import.meta.resolve("tsx"), MAIN, ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  assert.equal(r.status, 0, r.stderr);
  return [...r.stderr.matchAll(/^loaded (\S+)$/gm)].map((m) => m[1] ?? "");
}

test("the CLI loads compare's plotting (vega) and statistics (@stdlib) only for compare", () => {
  const loaded = packagesLoadedBy(["serve", "--help"]);
  // The hook works: commander parses every command line.
  assert.ok(loaded.includes("commander"), loaded.join(" "));
  const heavy = loaded.filter((p) => p.startsWith("vega") || p.startsWith("@stdlib/") || p.startsWith("d3-"));
  assert.deepEqual(heavy, []);
});
