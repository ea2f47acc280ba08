import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { cliArgs } from "../built-cli.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const run = (args: string[]) => {
  // No cluster is needed for what is refused before the nodes are asked.
  const r = spawnSync(process.execPath, [...cliArgs(), "bench", ...args], { cwd: dir, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", LAUNCHER_CLUSTER: path.join(dir, "none.toml") } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe("launcher bench's flags, refused before any request", () => {
  test("a bad --concurrency, --prompts beside --input-len, a bad prompts line: one message each, exit 1, no stack", () => {
    const conc = run(["x", "--concurrency", "1,0"]);
    assert.equal(conc.code, 1);
    assert.match(conc.stderr, /--concurrency "1,0": "0" is not a whole number from 1/);
    const file = path.join(dir, "p.jsonl");
    writeFileSync(file, '{"prompt": "hi"}\n{"prompt": 3}\n');
    const both = run(["x", "--prompts", file, "--input-len", "5"]);
    assert.equal(both.code, 1);
    assert.match(both.stderr, /--prompts gives the prompts: --input-len and --depth make synthetic ones/);
    const bad = run(["x", "--prompts", file, "--json"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /p\.jsonl:2:2: error: `prompt`: /);
    const answer = JSON.parse(bad.stdout) as { error: { diagnostics: { line: number }[] } };
    assert.deepEqual(answer.error.diagnostics.map((d) => d.line), [2]);
    for (const r of [conc, both, bad]) assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
});
