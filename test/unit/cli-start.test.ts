import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

// Every command pays the CLI's start: `images push` and `models sync` are timed against each other
// (bench/push.ts), and a user waits for it on each call. The plot and statistics libraries of
// `compare` (vega, vega-lite, @stdlib: about 900 of the 1,200 files the start read) are loaded
// when compare runs, not when any command starts.
const HEAVY = /^(vega|vega-lite|@stdlib\/.*)$/;

test("the CLI's start loads none of compare's plot and statistics libraries", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-cli-start-"));
  try {
    const seen = path.join(dir, "seen");
    writeFileSync(seen, "");
    // A resolve hook (Node's module.register) that writes down every package the start asks for.
    const hook = path.join(dir, "hook.mjs");
    writeFileSync(
      hook,
      `import { appendFileSync } from "node:fs";\nexport async function resolve(s, c, next) { if (!s.startsWith(".") && !s.startsWith("/") && !s.includes(":")) appendFileSync(${JSON.stringify(seen)}, s + "\\n"); return next(s, c); }\n`,
    );
    const register = path.join(dir, "register.mjs");
    writeFileSync(register, `import { register } from "node:module";\nregister(${JSON.stringify(`file://${hook}`)});\n`);
    const r = spawnSync(process.execPath, ["--import", register, "--import", import.meta.resolve("tsx"), path.resolve("src/cli/main.ts"), "--version"], {
      encoding: "utf8",
      env: { ...process.env, NODE_OPTIONS: "" },
    });
    assert.equal(r.status, 0, r.stderr);
    const packages = new Set(readFileSync(seen, "utf8").split("\n").filter(Boolean));
    // The hook works: the start does need commander.
    assert.ok(packages.has("commander"), [...packages].join(", "));
    assert.deepEqual([...packages].filter((p) => HEAVY.test(p)), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
