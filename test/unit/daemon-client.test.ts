import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { buildProgram } from "../../src/cli/main.js";
import { packageVersion, PACKAGE_ROOT } from "../../src/cli/load.js";
import { recipeHash, resolveRecipe, type RecipeSource } from "../../src/recipe/resolve.js";
import { recordingSource, uploadedSource } from "../../src/recipe/uploaded-source.js";
import { forTheDaemon, prepareUp } from "../../src/cli/up.js";
import { UpSubmissionSchema } from "../../src/daemon/protocol.js";
import { UserError } from "../../src/config/errors.js";
import type { Output } from "../../src/cli/output.js";
import type { Diagnostic } from "../../src/config/diagnostic.js";
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

/** The client's machine: a recipe that extends a sibling by relative path, as files a daemon elsewhere cannot read. */
const CLIENT_FILES: Record<string, string> = {
  "mine/base/recipe.toml": BASE.replace('name = "base"', 'name = "my base"').replace("required_nodes = 2", "required_nodes = 1").replace("tensor_parallel_size = 2", "tensor_parallel_size = 1"),
  "mine/chat/recipe.toml": 'extends = "../base"\nname = "chat"\n[env]\nCHAT = "1"\n',
};

/** Finds `mine/...` files by path (relative to the referring file), as the file source does. */
const clientSource: RecipeSource = {
  find(ref, from) {
    const file = path.normalize(path.join(from === undefined ? "." : path.dirname(from), ref, "recipe.toml"));
    const text = CLIENT_FILES[file];
    return text === undefined ? { error: `recipe "${ref}" not found` } : { file, id: path.basename(path.dirname(file)), text };
  },
};
const nothing: RecipeSource = { find: (ref) => ({ error: `recipe "${ref}" not found (looked in the daemon's folders)` }) };

test("a recipe and its extends parents, read by the client, resolve in a daemon that has none of them: the same recipe, the client's file names", () => {
  const here = resolveRecipe("mine/chat", clientSource);
  assert.ok(here.recipe !== undefined, here.diagnostics.map(formatDiagnostic).join("\n"));
  const { source, lookups } = recordingSource(clientSource);
  resolveRecipe("mine/chat", source);
  assert.deepEqual(lookups.map((l) => [l.ref, l.from, l.file]), [["mine/chat", undefined, "mine/chat/recipe.toml"], ["../base", "mine/chat/recipe.toml", "mine/base/recipe.toml"]]);
  // Over the wire (JSON, the submission's schema), then resolved in the daemon with no folder of its own.
  const wire = UpSubmissionSchema.parse(JSON.parse(JSON.stringify({ ref: "mine/chat", recipes: lookups })));
  const there = resolveRecipe("mine/chat", uploadedSource(wire.recipes ?? [], nothing));
  assert.ok(there.recipe !== undefined);
  assert.equal(recipeHash(there.recipe), recipeHash(here.recipe));
  assert.deepEqual(there.recipe.chain, ["mine/chat/recipe.toml", "mine/base/recipe.toml"]);
  // A name the client did not have is the daemon's to find.
  assert.match(JSON.stringify(resolveRecipe("other", uploadedSource(lookups, nothing)).diagnostics), /looked in the daemon's folders/);
});

test("what goes to the daemon: the recipe's files and a cluster file named with --cluster, as this machine reads them; names it does not know go as they are", () => {
  const here = {
    recipes: (ref: string) => (ref === "mine" ? [{ ref, file: "mine/recipe.toml", id: "mine", text: "name = 1" }] : []),
    cluster: (option: string) => (option === "spark.toml" ? { file: "spark.toml", text: "name = \"spark\"" } : undefined),
  };
  assert.deepEqual(forTheDaemon({ ref: "mine", cluster: "spark.toml", lane: "chat" }, here), {
    ref: "mine",
    cluster: "spark.toml",
    lane: "chat",
    recipes: [{ ref: "mine", file: "mine/recipe.toml", id: "mine", text: "name = 1" }],
    cluster_file: { file: "spark.toml", text: "name = \"spark\"" },
  });
  assert.deepEqual(forTheDaemon({ ref: "practice-2x", cluster: "home" }, here), { ref: "practice-2x", cluster: "home" });
  assert.deepEqual(forTheDaemon({ ref: "practice-2x" }, here), { ref: "practice-2x" });
});

const quiet: Output = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };
const CLUSTER_TEXT = 'name = "laptop-cluster"\n\n[[nodes]]\nname = "s1"\nhost = "spark1"\nfabric_ip = "10.0.0.1"\nfabric_iface = "enp1"\n';

test("the daemon plans a submission from the files it carries (recipe chain and cluster), none of which exist on its disk", () => {
  const { source, lookups } = recordingSource(clientSource);
  resolveRecipe("mine/chat", source);
  const s = UpSubmissionSchema.parse({ ref: "mine/chat", cluster: "laptop.toml", recipes: lookups, cluster_file: { file: "/home/me/laptop.toml", text: CLUSTER_TEXT } });
  const prepared = prepareUp(s, quiet);
  assert.equal(prepared.cluster.name, "laptop-cluster");
  assert.equal(prepared.first.deployment, "chat");
  assert.deepEqual(prepared.first.nodes.map((n) => n.node), ["s1"]);
  // Errors name the client's file and line: the parent's broken line, and the client's cluster file.
  const broken = lookups.map((l) => (l.file === "mine/base/recipe.toml" ? { ...l, text: l.text.replace("pipeline_parallel_size = 1", "pipeline_parallel_size = 0") } : l));
  let said: readonly Diagnostic[] = [];
  assert.throws(
    () => prepareUp({ ...s, recipes: broken }, quiet),
    (e: unknown) => e instanceof UserError && (said = e.diagnostics ?? []).length > 0,
  );
  assert.match(said.map(formatDiagnostic).join("\n"), /^mine\/base\/recipe\.toml:8:26: error: pipeline_parallel_size must be at least 1$/m);
  assert.throws(
    () => prepareUp({ ...s, cluster_file: { file: "/home/me/laptop.toml", text: "name = 3\n" } }, quiet),
    (e: unknown) => e instanceof UserError && e.message === "cluster file /home/me/laptop.toml has errors",
  );
});
