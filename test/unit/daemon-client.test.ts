import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { buildProgram } from "../../src/cli/main.js";
import { packageVersion, PACKAGE_ROOT } from "../../src/cli/load.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "./memory-source.js";
import { within } from "../integration/practice-cluster.js";

const MAIN = path.resolve("src/cli/main.ts");

test("--version says package.json's version, read from the package (not a number written twice)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-version-"));
  try {
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "x", version: "9.8.7-rc.1" }));
    assert.equal(packageVersion(dir), "9.8.7-rc.1");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  let printed = "";
  const program = buildProgram({ writeOut: (s) => (printed += s), writeErr: () => undefined });
  assert.throws(() => program.parse(["--version"], { from: "user" }));
  assert.equal(printed.trim(), packageVersion(PACKAGE_ROOT));
});

test("a parallel-size flag that is not a positive integer is one error at the flag, whichever check reads it", () => {
  const withArgs = (args: string): string => BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);
  const errors = (args: string): string[] =>
    resolveRecipe("bad", memorySource({ "recipes/bad/recipe.toml": withArgs(args) })).diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
  // Counted in the world size (data parallel) and dividing tensor parallel (decode context parallel).
  for (const [flag, value] of [["--data-parallel-size", "0"], ["-dcp", "two"], ["-dcp", "1.5"]] as const) {
    const e = errors(`    "${flag}", "${value}",`);
    assert.equal(e.length, 1, e.join("\n"));
    assert.match(e[0] ?? "", new RegExp(`:12:5: error: ${flag} must be a positive integer, not "${value.replace(".", "\\.")}"`));
  }
  assert.match(errors('    "-dcp", "3",')[0] ?? "", /-dcp 3 does not divide tensor_parallel_size 2/);
});

test("launcher serve outlives its terminal: SIGHUP is ignored, and a log line to a stderr whose reader is gone does not stop it", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-hup-"));
  // A cluster whose one node refuses SSH at once: the daemon starts, its discovery says the node is unreachable.
  writeFileSync(path.join(dir, "cluster.toml"), '[[nodes]]\nname = "n1"\nhost = "127.0.0.1"\nport = 1\n');
  const child = spawn(process.execPath, ["--import", import.meta.resolve("tsx"), MAIN, "serve", "--listen", "127.0.0.1:0", "--poll", "1s", "--cluster", path.join(dir, "cluster.toml")], {
    cwd: dir,
    env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_DAEMON: "none" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code, signal) => resolve(code ?? (signal === null ? null : 128 + (signal === "SIGHUP" ? 1 : 99)))));
  let ended: number | null | undefined;
  void exited.then((c) => (ended = c));
  const alive = (): boolean => ended === undefined;
  try {
    const { value: port } = await within(60_000, "the daemon listens", async () => log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/v1/)?.[1]);
    const health = async (): Promise<number> => (await fetch(`http://127.0.0.1:${port}/health`)).status;
    child.kill("SIGHUP");
    await within(10_000, "the daemon says it ignores SIGHUP", async () => (!alive() ? Promise.reject(new Error(`it exited ${String(ended)}: ${log}`)) : log.includes("SIGHUP ignored") ? true : undefined));
    assert.equal(await health(), 200);
    // The terminal is gone: nothing reads its stderr any more; its next line meets EPIPE.
    child.stderr.destroy();
    child.kill("SIGHUP");
    for (let i = 0; i < 5; i++) assert.equal(await health(), 200, `request ${i} after the closed stderr`);
    assert.ok(alive(), `it exited ${String(ended)}`);
    // It still stops when asked, cleanly.
    child.kill("SIGTERM");
    assert.equal(await exited, 0);
  } finally {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
