import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { environmentOf, type Environment } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import type { DeploymentStatus } from "../../src/contract/deployment.js";
import { daemonConfig } from "../../src/daemon/config.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { readAnswer } from "../../src/daemon/read-client.js";
import { until } from "../support/until.js";
import { runPiped } from "../support/home-daemon.js";
import { cliArgs } from "../built-cli.js";

// `launcher top` as a user runs it, against a real `launcher serve --control` (src/daemon/daemon.ts)
// in this process: on a terminal (script(1) from util-linux gives it a pseudo-terminal; stty a
// size) it draws, redraws when discovery sees a deployment appear, says a closed stream and
// reconnects, and ends on `q` with the terminal given back; in a pipe it prints one frame. The
// daemon's discovery watcher is a stand-in that prints the status line in POLL_FILE every 200 ms
// (what `launcher status --watch --json` prints); the one node refuses SSH at once.

const ADMIN = "admin-key-0123456789";
const INFERENCE = "inference-key-0123456789";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-top-"));
const POLL_FILE = path.join(dir, "poll.json");
const WATCHER = `const fs = require("node:fs");
const poll = () => { try { process.stdout.write(fs.readFileSync(${JSON.stringify(POLL_FILE)}, "utf8")); } catch {} };
poll(); setInterval(poll, 200); process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`;

/** What discovery's next poll reads: these deployments on the cluster `home`. */
function poll(deployments: readonly DeploymentStatus[]): void {
  writeFileSync(`${POLL_FILE}.tmp`, `${JSON.stringify({ deployments, unreachable: [], at: new Date().toISOString() })}\n`);
  // Renamed into place: the watcher never reads half a line.
  renameSync(`${POLL_FILE}.tmp`, POLL_FILE);
}

const CHAT: DeploymentStatus = {
  deployment: "chat-a",
  recipe: "chat-a",
  recipe_hash: "abc123",
  served_model: "chat",
  endpoint: "http://127.0.0.1:1",
  status: "serving",
  phase: "serving",
  missing: [],
  unreachable: [],
  ranks: [{ rank: 0, node: "s1", container: "launcher-chat-a-r0", state: "running" }],
};

function folderEnvironment(lines: string[]): Environment {
  const said = (text: string): void => void lines.push(text);
  const console: Output = { out: said, err: said, warn: said, json: (v) => said(JSON.stringify(v)), diagnostics: () => undefined };
  const places = { vars: { XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_RECIPES: path.join(dir, "recipes") }, home: dir };
  return { ...environmentOf(places, console), selfArgv: () => [process.execPath, "-e", WATCHER] };
}

/** The daemon's event stream as the daemon holds it (a rename fails here loudly). */
interface Inside {
  readonly parts: { readonly feed: { readonly hub: { readonly size: number } } };
}

let daemon: Daemon | undefined;
let url = "";
const daemonLog: string[] = [];

before(async () => {
  const home = path.join(dir, "config", "launcher", "clusters", "home.toml");
  mkdirSync(path.dirname(home), { recursive: true });
  writeFileSync(home, 'name = "home"\n[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n');
  writeFileSync(path.join(dir, "config", "launcher", "default-cluster"), "home\n");
  poll([]);
  const env = folderEnvironment(daemonLog);
  const config = { ...daemonConfig({ listen: "127.0.0.1:0", control: true, poll: "200ms" }, env.vars, { readFile: () => "", clusterPath: env.clusterPath }), apiKeys: [INFERENCE], adminKeys: [ADMIN] };
  daemon = await Daemon.start(config, env);
  url = `http://127.0.0.1:${daemon.port}`;
});

after(async () => {
  await daemon?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The client's environment: an inference key only, its own folders (no local daemon record, no admin key). */
const clientEnv = (over: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  NODE_OPTIONS: "",
  LAUNCHER_API_KEY: INFERENCE,
  LAUNCHER_ADMIN_KEY: undefined,
  LAUNCHER_ADMIN_KEY_FILE: undefined,
  LAUNCHER_DAEMON: undefined,
  LAUNCHER_CLUSTER: undefined,
  XDG_CONFIG_HOME: path.join(dir, "config"),
  XDG_STATE_HOME: path.join(dir, "client-state"),
  NO_COLOR: "1",
  TERM: "xterm-256color",
  ...over,
});

const top = (args: string[]): string[] => [process.execPath, ...cliArgs(), "top", ...args];

/** `launcher top ARGS` in a pipe, to its end (bounded). Never spawnSync: the daemon answering it runs in this process. */
async function runTop(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runPiped(top(args), { cwd: dir, env: clientEnv(env) });
}

test("top in a pipe prints one frame and ends 0; --json prints the picture; another cluster is named; a daemon not there is said without a stack", { timeout: 90_000 }, async () => {
  // Asked here rather than by a top per look: each is a process start.
  let polled = false;
  const look = (): void => void readAnswer({ url, key: INFERENCE }, "clusters").then((a) => (polled = a.clusters[0]?.nodes[0]?.reachable === true));
  const looking = setInterval(look, 100);
  await until("the daemon's first poll", () => polled, 30_000).finally(() => clearInterval(looking));
  const frame = await runTop(["--daemon", url]);
  assert.equal(frame.code, 0, frame.stderr);
  assert.deepEqual(frame.stdout.split("\n").slice(1), ["NODES of home", "  s1  up  memory not read yet (launcher doctor reads it)", "LANES", "  no lanes", "DEPLOYMENTS", "  no deployments", "BOOTS", "  no boot in progress", ""]);
  assert.doesNotMatch(frame.stdout, /\x1b/, "no cursor or colour codes in a pipe");
  const json = await runTop(["--daemon", url, "-o", "json"]);
  assert.equal(json.code, 0, json.stderr);
  const picture = JSON.parse(json.stdout) as { daemon: string; clusters: { name: string }[]; deployments: unknown[]; boots: unknown[] };
  assert.equal(picture.daemon, url);
  assert.deepEqual(picture.clusters.map((c) => c.name), ["home"]);
  assert.deepEqual([picture.deployments, picture.boots], [[], []]);
  const other = await runTop(["--daemon", url, "--cluster", "lab"]);
  assert.equal(other.code, 1);
  assert.match(other.stderr, /the daemon at http:\/\/127\.0\.0\.1:\d+ watches no cluster lab: it watches home/);
  const wrongKey = await runTop(["--daemon", url], { LAUNCHER_API_KEY: "not-a-key-0123456789" });
  assert.equal(wrongKey.code, 1);
  assert.match(wrongKey.stderr, /refused: missing or wrong key/);
  // A port nothing listens on: the daemon is not there.
  const gone = await runTop(["--daemon", "http://127.0.0.1:1"]);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /cannot reach the daemon at http:\/\/127\.0\.0\.1:1/);
  assert.doesNotMatch(gone.stderr, /\n\s+at /, "no stack");
});

test("top --once on a terminal draws one frame, cut to the terminal's width, and ends 0 without taking the terminal", { timeout: 60_000 }, async () => {
  const inner = `stty rows 40 cols 40; ${top(["--daemon", url, "--once"]).map((w) => `'${w}'`).join(" ")}; echo "top exited $?"`;
  const child = spawn("script", ["-qfec", inner, "/dev/null"], { cwd: dir, env: clientEnv(), stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString("utf8")));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
  clearTimeout(timer);
  assert.equal(code, 0, out);
  assert.match(out, /top exited 0/);
  const lines = out.slice(0, out.indexOf("top exited")).split("\r\n").filter((l) => l !== "");
  assert.equal(lines[1], "NODES of home", out);
  for (const l of lines) assert.ok([...l].length <= 40, l);
  assert.doesNotMatch(out, /\x1b\[\?25l/, "the cursor is never hidden");
});

test("top on a terminal: draws the daemon's picture, redraws when a deployment appears, says a closed stream, and q ends it with the terminal given back", { timeout: 90_000 }, async () => {
  const inside = daemon as unknown as Inside;
  // After top: its exit status, then the terminal's modes as stty reads them.
  const inner = `stty rows 40 cols 150; ${top(["--daemon", url]).map((w) => `'${w}'`).join(" ")}; echo "top exited $?"; stty -a`;
  const child = spawn("script", ["-qfec", inner, "/dev/null"], { cwd: dir, env: clientEnv(), stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString("utf8")));
  child.stderr.on("data", (b: Buffer) => (out += b.toString("utf8")));
  // "close", not "exit": only then has everything the child wrote been read (top's status and stty's modes come last).
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const screen = (): string => `; the screen so far:\n${out}\nthe daemon logged:\n${daemonLog.join("\n")}`;
  try {
    await until("top's first frame", () => /live/.test(out) && /no deployments/.test(out), 30_000, screen);
    assert.match(out, /NODES of home/);
    assert.match(out, /\x1b\[\?25l/, "the cursor is hidden while top draws");
    // The stream is open (top reads the routes after opening it): a change now is an event.
    await until("top's event stream at the daemon", () => inside.parts.feed.hub.size === 1, 10_000, screen);
    const before = out.length;
    poll([CHAT]);
    await until("the deployment on top's screen", () => /chat-a\s+serving/.test(out.slice(before)), 30_000, screen);
    assert.match(out.slice(before), /\x1b\[\d*A|\x1b\[2K/, "redrawn in place");
    // The daemon's stream ends (as when it restarts): top says so and tries again.
    const cut = out.length;
    await daemon?.stop();
    await until("the closed stream on the screen", () => /stream closed: .*reconnecting in \d+s \(attempt \d+\)/.test(out.slice(cut)), 30_000, screen);
    child.stdin.write("q");
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<"hung">((r) => (timer = setTimeout(() => r("hung"), 20_000)))]);
    clearTimeout(timer);
    assert.notEqual(code, "hung", `top did not end on q${screen()}`);
    assert.match(out, /top exited 0/, screen());
    const after = out.slice(out.indexOf("top exited 0"));
    assert.match(after, /(^|\s)icanon(\s|$)/m, "raw mode is off: the terminal is canonical again");
    assert.match(after, /(^|\s)echo(\s|$)/m, "and echoes again");
    assert.ok(out.lastIndexOf("\x1b[?25h") > out.lastIndexOf("\x1b[?25l"), "the cursor is shown again");
    assert.doesNotMatch(out, /\n\s+at .*\(.*:\d+:\d+\)/, "no stack");
    assert.equal(code, 0, screen());
    if (process.env.TOP_SCREEN) writeFileSync(process.env.TOP_SCREEN, out);
  } finally {
    child.kill("SIGKILL");
  }
});
