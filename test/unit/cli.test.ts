import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { cliArgs } from "../built-cli.js";

const run = (args: string[], cwd = process.cwd()) => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], { cwd, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const dir = mkdtempSync(path.join(tmpdir(), "launcher-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("validate: the seeds are clean", () => {
  const r = run(["validate", "dsv4-flash-vision", "recipes/dsv41-flash-4x-dcp2", "recipes/dsv4-flash-vision/recipe.toml"]);
  assert.equal(r.code, 0, r.stderr);
  // The one finding: the seeds' image folders are not in this repository (docker_image_dir warns).
  const findings = r.stderr.split("\n").filter((l) => /: (error|warning): /.test(l));
  assert.ok(findings.length > 0 && findings.every((l) => / warning: docker_image_dir "[^"]+" names no folder/.test(l)), r.stderr);
  assert.match(r.stdout, /recipes\/dsv41-flash-4x-dcp2\/recipe\.toml: ok/);
});

test("validate: a bad recipe gives every error as path:line:col, exit 1, no stack trace", () => {
  mkdirSync(path.join(dir, "recipes", "bad"), { recursive: true });
  const file = path.join(dir, "recipes", "bad", "recipe.toml");
  writeFileSync(file, `name = "x"\ndocker_image = "i"\nmodel = "m"\ntensor_paralel_size = 1\nargs = ["--port", "9", "--speculative-config", "'{bad'"]\n`);
  const r = run(["validate", "bad"], dir);
  assert.equal(r.code, 1);
  const lines = r.stderr.split("\n");
  assert.ok(lines.includes('recipes/bad/recipe.toml:4:1: error: unknown key "tensor_paralel_size"'), r.stderr);
  assert.ok(lines.includes("recipes/bad/recipe.toml:5:9: error: --port is managed by launcher and must not be in args"), r.stderr);
  assert.ok(lines.some((l) => /^recipes\/bad\/recipe\.toml:5:48: error: --speculative-config: value is not valid JSON/.test(l)), r.stderr);
  assert.match(r.stderr, /launcher: 1 of 1 recipe invalid: bad/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

test("validate: a recipe that does not exist is a clear error", () => {
  const r = run(["validate", "no-such-recipe"], dir);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /error: recipe "no-such-recipe" not found \(looked for /);
});

test("plan: --json prints the nodes' argv; a missing cluster file says how to give one", () => {
  const r = run(["plan", "dsv4-flash-vision", "--cluster", "examples/clusters/spark-2x.toml", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const plan = JSON.parse(r.stdout) as { nodes: { argv: string[]; role: string }[] };
  assert.deepEqual(plan.nodes.map((n) => n.role), ["head", "worker"]);
  assert.deepEqual(plan.nodes[0]?.argv.slice(0, 2), ["docker", "run"]);
  const missing = run(["plan", "dsv4-flash-vision"], dir);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no cluster file\n  hint: run `launcher cluster init HOST\.\.\.` to write one, pass --cluster FILE\|NAME, set LAUNCHER_CLUSTER/);
});

test("plan: a bad cluster file is reported with positions", () => {
  const file = path.join(dir, "cluster.toml");
  writeFileSync(file, `[[nodes]]\nname = "n1"\nhost = "h"\nfabric_ifnace = "x"\n`);
  const r = run(["plan", "dsv4-flash-vision", "--cluster", file]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /cluster\.toml:4:1: error: unknown key "fabric_ifnace" in nodes\[0\]\n  hint: did you mean "fabric_iface"\?/);
});

test("diff: two recipes compared flag by flag", () => {
  const r = run(["diff", "dsv4-flash-vision", "dsv41-flash-4x-dcp2", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const { changes } = JSON.parse(r.stdout) as { changes: { section: string; key: string; a?: string; b?: string }[] };
  assert.deepEqual(changes.find((c) => c.key === "--max-model-len"), { section: "args", key: "--max-model-len", a: "1048576", b: "524288" });
  assert.deepEqual(changes.find((c) => c.key === "required_nodes"), { section: "field", key: "required_nodes", a: "2", b: "4" });
  assert.equal(run(["diff", "dsv4-flash-vision", "dsv4-flash-vision", "--exit-code"]).code, 0);
  assert.equal(run(["diff", "dsv4-flash-vision", "dsv41-flash-4x-dcp2", "--exit-code"]).code, 1);
});

test("an unknown command or option is a usage error, not a crash", () => {
  const r = run(["plna"]);
  assert.notEqual(r.code, 0);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

test("a corrupt state store is set aside and a new one started; one that cannot be opened is gone without: commands go on and say so once", () => {
  const withState = (state: string, args: string[]) => {
    const r = spawnSync(process.execPath, [...cliArgs(), ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: state } });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const corrupt = path.join(dir, "state-corrupt");
  const db = path.join(corrupt, "launcher", "launcher.db");
  mkdirSync(path.dirname(db), { recursive: true });
  writeFileSync(db, "garbage, not SQLite ".repeat(100));
  const r = withState(corrupt, ["history"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "no boots recorded\n");
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0] ?? "", new RegExp(`^warning: the state store ${db} is corrupt \\(SQLITE_NOTADB.*\\); moved it to ${db}\\.corrupt-\\d{8}T\\d{6}Z for inspection and started a new one`));
  assert.equal(readdirSync(path.dirname(db)).filter((f) => f.startsWith("launcher.db.corrupt-")).length, 1);
  const again = withState(corrupt, ["lanes"]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stderr, "", "the new store is healthy");

  const unreadable = path.join(dir, "state-folder");
  mkdirSync(path.join(unreadable, "launcher", "launcher.db"), { recursive: true });
  for (const args of [["history"], ["lanes"]]) {
    const u = withState(unreadable, args);
    assert.equal(u.code, 0, u.stderr);
    assert.match(u.stderr, /^warning: cannot open the state store \S+launcher\.db \(SQLITE_CANTOPEN: unable to open database file\); going on without it: history and lane records are neither read nor written by this command/);
    assert.equal(u.stderr.trim().split("\n").length, 1, u.stderr);
  }
  assert.deepEqual(readdirSync(path.join(unreadable, "launcher")), ["launcher.db"], "nothing renamed");
});
