import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { cliArgs } from "../built-cli.js";

// The CLI as users run it, on ordinary bad input: one line, the right exit status, no stack.
const dir = mkdtempSync(path.join(tmpdir(), "launcher-cli-input-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const env = { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_CLUSTER: "" };
const nodeArgs = (args: string[]): string[] => [...cliArgs(), ...args];
const run = (args: string[], cwd = process.cwd()) => {
  // The timeout turns a hang (--cluster /dev/zero used to read forever) into a failure.
  const r = spawnSync(process.execPath, nodeArgs(args), { cwd, encoding: "utf8", env, timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const STACK = /\n\s+at /;

/** Runs the CLI with a reader that has gone away before the first line: `launcher ... | head -0`. */
function runIntoClosedPipe(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs(args), { stdio: ["ignore", "pipe", "pipe"], env });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

for (const args of [["lanes"], ["schema", "recipe"], ["plan", "dsv4-flash-vision", "--cluster", "examples/clusters/spark-2x.toml"], ["validate", "--json", "dsv4-flash-vision"]]) {
  test(`EPIPE: \`launcher ${args.join(" ")} | head\` ends quietly with 141, no stack`, async () => {
    const r = await runIntoClosedPipe(args);
    assert.equal(r.code, 141, r.stderr);
    assert.equal(r.stderr, "");
  });
}

test("a folder, a device or a FIFO as the cluster file: one line, exit 1, no hang", () => {
  const fifo = path.join(dir, "cluster.fifo");
  execFileSync("mkfifo", [fifo]);
  for (const [file, what] of [[dir, "a folder"], ["/dev/zero", "a character device"], [fifo, "a FIFO"]] as const) {
    const r = run(["status", "--cluster", file]);
    assert.equal(r.code, 1, `${file}: ${r.stderr}`);
    assert.equal(r.stderr, `launcher: cluster file ${file} is ${what}, not a file\n  hint: give the path of the cluster file itself\n`);
    assert.equal(r.stdout, "");
  }
});

test("a recipe.toml that is a folder: a diagnostic, exit 1", () => {
  mkdirSync(path.join(dir, "recipes", "folder", "recipe.toml"), { recursive: true });
  const r = run(["validate", "folder"], dir);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /error: recipe recipes\/folder\/recipe\.toml is a folder, not a file/);
  assert.doesNotMatch(r.stderr, STACK);
});

test("a docker_image like --privileged fails validate at its line", () => {
  mkdirSync(path.join(dir, "recipes", "priv"), { recursive: true });
  writeFileSync(path.join(dir, "recipes", "priv", "recipe.toml"), `name = "x"\ndocker_image = "--privileged"\nmodel = "m"\n`);
  const r = run(["validate", "priv"], dir);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^recipes\/priv\/recipe\.toml:2:16: error: docker_image "--privileged" is not a Docker image reference: it starts with '-'/);
});

test("--json: a failure prints the error object on stdout, the text on stderr, same exit status", () => {
  const r = run(["status", "--cluster", dir, "--json"]);
  assert.equal(r.code, 1);
  assert.deepEqual(JSON.parse(r.stdout), { error: { message: `cluster file ${dir} is a folder, not a file`, hint: "give the path of the cluster file itself", diagnostics: [] } });
  assert.match(r.stderr, /^launcher: cluster file .* is a folder/);
  const plan = run(["plan", "dsv4-flash-vision", "--cluster", "examples/clusters/spark-2x.toml", "--name", "--privileged", "--json"]);
  assert.equal(plan.code, 1, plan.stderr);
  const body = JSON.parse(plan.stdout) as { error: { message: string; diagnostics: { file: string; line: number; message: string }[] } };
  assert.match(body.error.message, /cannot plan dsv4-flash-vision/);
  assert.match(body.error.diagnostics[0]?.message ?? "", /deployment name \(--name\) "--privileged" is not a deployment or lane name/);
  // Without --json nothing goes to stdout.
  assert.equal(run(["status", "--cluster", dir]).stdout, "");
});

test("validate --json with an invalid recipe: one JSON object and exit 1", () => {
  const r = run(["validate", "--json", "priv"], dir);
  assert.equal(r.code, 1);
  const answer = JSON.parse(r.stdout) as { ok: boolean; recipes: { ok: boolean }[]; warnings: string[] };
  assert.equal(answer.ok, false);
  assert.deepEqual(answer.recipes.map((x) => x.ok), [false]);
  assert.deepEqual(answer.warnings, []);
});
