import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { buildProgram } from "../../src/cli/main.js";
import { packageVersion, PACKAGE_ROOT } from "../../src/config/package-info.js";
import { recipeHash, resolveRecipe, type RecipeSource } from "../../src/recipe/resolve.js";
import { recordingSource, uploadedSource } from "../../src/recipe/uploaded-source.js";
import { forTheDaemon } from "../../src/cli/up.js";
import { prepareUp } from "../../src/app/prepare-up.js";
import { processEnvironment } from "../../src/app/environment.js";
import { UpSubmissionSchema } from "../../src/app/up-submission.js";
import { UserError } from "../../src/config/errors.js";
import type { Output } from "../../src/app/output.js";
import type { Diagnostic } from "../../src/config/diagnostic.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { controlApi } from "../../src/daemon/control.js";
import { askDaemon, daemonBootLines } from "../../src/cli/status.js";
import { DAEMON_BOOT_STATES } from "../../src/daemon/protocol.js";
import { RemoteError } from "../../src/config/errors.js";
import { BASE, memorySource } from "../support/memory-source.js";
import { within } from "../integration/practice-cluster.js";
import { cliArgs } from "../built-cli.js";


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
  const child = spawn(process.execPath, [...cliArgs(), "serve", "--listen", "127.0.0.1:0", "--poll", "1s", "--cluster", path.join(dir, "cluster.toml")], {
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
    clusterPath: (option: string) => (option === "spark.toml" ? "/home/me/spark.toml" : undefined),
  };
  const tcp = {};
  // The file goes in place of its name: a `cluster` sent names one of the daemon's own.
  assert.deepEqual(forTheDaemon({ ref: "mine", cluster: "spark.toml", lane: "chat" }, tcp, here), {
    ref: "mine",
    lane: "chat",
    recipes: [{ ref: "mine", file: "mine/recipe.toml", id: "mine", text: "name = 1" }],
    cluster_file: { file: "spark.toml", text: "name = \"spark\"" },
  });
  assert.deepEqual(forTheDaemon({ ref: "practice-2x", cluster: "home" }, tcp, here), { ref: "practice-2x", cluster: "home" });
  assert.deepEqual(forTheDaemon({ ref: "practice-2x" }, tcp, here), { ref: "practice-2x" });
});

const quiet: Output = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };
const CLUSTER_TEXT = 'name = "laptop-cluster"\n\n[[nodes]]\nname = "s1"\nhost = "spark1"\nfabric_ip = "10.0.0.1"\nfabric_iface = "enp1"\n';

test("the daemon plans a submission from the files it carries (recipe chain and cluster), none of which exist on its disk", () => {
  const { source, lookups } = recordingSource(clientSource);
  resolveRecipe("mine/chat", source);
  const s = UpSubmissionSchema.parse({ ref: "mine/chat", cluster: "laptop.toml", recipes: lookups, cluster_file: { file: "/home/me/laptop.toml", text: CLUSTER_TEXT } });
  const prepared = prepareUp(s, quiet, { env: processEnvironment() });
  assert.equal(prepared.cluster.name, "laptop-cluster");
  assert.equal(prepared.first.deployment, "chat");
  assert.deepEqual(prepared.first.nodes.map((n) => n.node), ["s1"]);
  // Errors name the client's file and line: the parent's broken line, and the client's cluster file.
  const broken = lookups.map((l) => (l.file === "mine/base/recipe.toml" ? { ...l, text: l.text.replace("pipeline_parallel_size = 1", "pipeline_parallel_size = 0") } : l));
  let said: readonly Diagnostic[] = [];
  assert.throws(
    () => prepareUp({ ...s, recipes: broken }, quiet, { env: processEnvironment() }),
    (e: unknown) => e instanceof UserError && (said = e.diagnostics ?? []).length > 0,
  );
  assert.match(said.map(formatDiagnostic).join("\n"), /^mine\/base\/recipe\.toml:8:26: error: pipeline_parallel_size must be at least 1$/m);
  assert.throws(
    () => prepareUp({ ...s, cluster_file: { file: "/home/me/laptop.toml", text: "name = 3\n" } }, quiet, { env: processEnvironment() }),
    (e: unknown) => e instanceof UserError && e.message === "cluster file /home/me/laptop.toml has errors",
  );
});

/** A daemon's control API on a loopback port, holding one boot in progress (a node loading) and one that failed. */
async function daemonWithBoots(): Promise<{ server: Server; url: string; release: () => void }> {
  const registry = new BootRegistry(() => Date.parse("2026-01-01T10:00:00Z"));
  let release = (): void => undefined;
  const held = new Promise<void>((r) => (release = r));
  registry.start({ deployment: "chat", cluster: "practice", lane: "main" }, async (emit) => {
    emit({ type: "node", node: "n1", state: { phase: "starting", figures: {}, ready: false, lastLines: [] }, t: 1 });
    emit({ type: "node", node: "n1", state: { phase: "loading", figures: {}, ready: false, lastLines: [] }, t: 2 });
    await held;
    throw new RemoteError("n1", "boot of chat failed: released", "rolled back");
  });
  const failed = registry.start({ deployment: "old", cluster: "practice" }, () => Promise.reject(new RemoteError("n2", "boot of old failed: out of memory")));
  await failed.ended;
  const handler = controlApi({ ownerSocket: true, registry, submit: () => [], maxBodyBytes: 4096 });
  const server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, release };
}

test("status asks the daemon for its boots: each one's state, nodes' phases, start and failure cross the wire, and show below the deployments", async () => {
  const { server, url, release } = await daemonWithBoots();
  try {
    const view = await askDaemon({ url });
    assert.ok(!("error" in view));
    assert.deepEqual(view.boots, [
      { deployment: "chat", cluster: "practice", lane: "main", running: true, state: "booting", started_at: "2026-01-01T10:00:00.000Z", nodes: { n1: "loading" } },
      { deployment: "old", cluster: "practice", running: false, state: "failed", started_at: "2026-01-01T10:00:00.000Z", nodes: {}, error: "boot of old failed: out of memory" },
    ]);
    for (const b of view.boots) assert.ok(DAEMON_BOOT_STATES.includes(b.state));
    assert.deepEqual(daemonBootLines(view, new Date("2026-01-01T10:02:05Z")), [
      `boots in progress in the daemon at ${url}:`,
      "  chat  booting  cluster practice  lane main  for 2m5s  n1 loading",
      "  and 1 finished boot (launcher attach NAME shows how one ended)",
    ]);
    assert.deepEqual(daemonBootLines({ url, boots: [] }, new Date()), [`no boot in progress in the daemon at ${url}`]);
  } finally {
    release();
    server.close();
  }
});

/** A loopback port nobody listens on (taken, then freed). */
async function closedUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
  await new Promise<void>((r) => probe.close(() => r()));
  return url;
}

test("a daemon that cannot be reached, or does not answer, is a view with the reason, not a failure of status", async () => {
  const refused = await askDaemon({ url: await closedUrl() });
  assert.ok("error" in refused);
  assert.match(refused.error, /^cannot reach the daemon at http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED$/);
  assert.deepEqual(daemonBootLines(refused, new Date()), []);
  // One that accepts and never answers: bounded by the wait.
  const mute = createServer(() => undefined);
  await new Promise<void>((r) => mute.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${(mute.address() as AddressInfo).port}`;
    const started = Date.now();
    const silent = await askDaemon({ url }, 300);
    assert.ok("error" in silent);
    assert.equal(silent.error, `the daemon at ${url} did not answer within 0.3 s`);
    assert.ok(Date.now() - started < 5000);
  } finally {
    mute.closeAllConnections();
    mute.close();
  }
});

test("launcher status --json is one object holding the daemon's boots; an unreachable daemon is a warning in it, and status answers all the same", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-status-"));
  writeFileSync(path.join(dir, "cluster.toml"), '[[nodes]]\nname = "n1"\nhost = "127.0.0.1"\nport = 1\n');
  const { server, url, release } = await daemonWithBoots();
  const status = (daemon: string): Promise<{ code: number | null; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, [...cliArgs(), "status", "--json", "--cluster", path.join(dir, "cluster.toml"), "--daemon", daemon], {
        env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: path.join(dir, "state"), CI: "true" },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill("SIGKILL"), 50_000);
      child.on("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  try {
    const closed = await closedUrl();
    const [asked, gone] = await Promise.all([status(url), status(closed)]);
    const a = JSON.parse(asked.stdout) as { deployments: unknown[]; daemon: { url: string; boots: { deployment: string; state: string }[] }; warnings: string[] };
    assert.deepEqual(a.daemon.boots.map((b) => [b.deployment, b.state]), [["chat", "booting"], ["old", "failed"]]);
    assert.equal(a.daemon.url, url);
    assert.deepEqual(a.deployments, []);
    const g = JSON.parse(gone.stdout) as { daemon: { url: string; error: string }; warnings: string[] };
    assert.equal(g.daemon.error, `cannot reach the daemon at ${closed}: ECONNREFUSED`);
    assert.ok(g.warnings.some((w) => w.startsWith(`cannot reach the daemon at ${closed}: ECONNREFUSED; its boots in progress are not shown`)), g.warnings.join("\n"));
    // The exit status is the nodes' (n1 cannot be read here), whatever the daemon did.
    assert.equal(gone.code, asked.code);
  } finally {
    release();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
