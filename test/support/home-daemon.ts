import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { environmentOf, type Environment } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import { daemonConfig } from "../../src/daemon/config.js";
import { Daemon } from "../../src/daemon/daemon.js";

// A real `launcher serve --control` in this process, on a folder of its own: a default cluster of
// one node that refuses SSH at once, and discovery's watcher a stand-in that prints an empty poll
// a second. For the tests of what the daemon mounts (read API, sessions, top).

export const HOME_ADMIN_KEY = "admin-key-0123456789";
export const HOME_INFERENCE_KEY = "inference-key-0123456789";

const WATCHER = `const poll = () => console.log(JSON.stringify({ deployments: [], unreachable: [], at: new Date().toISOString() }));
poll(); setInterval(poll, 1000); process.stdin.on("end", () => process.exit(0)); process.stdin.resume();`;

/** The daemon's environment on `dir`: what it says goes to `lines`. */
export function folderEnvironment(dir: string, lines: string[]): Environment {
  const said = (text: string): void => void lines.push(text);
  const console: Output = { out: said, err: said, warn: said, json: (v) => said(JSON.stringify(v)), diagnostics: () => undefined };
  const places = { vars: { XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "state"), LAUNCHER_RECIPES: path.join(dir, "recipes") }, home: dir };
  return { ...environmentOf(places, console), selfArgv: () => [process.execPath, "-e", WATCHER] };
}

/** The daemon started on `dir` with the admin and inference keys above; the caller stops it. */
export async function startHomeDaemon(dir: string, lines: string[]): Promise<Daemon> {
  const home = path.join(dir, "config", "launcher", "clusters", "home.toml");
  mkdirSync(path.dirname(home), { recursive: true });
  writeFileSync(home, 'name = "home"\n[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n');
  writeFileSync(path.join(dir, "config", "launcher", "default-cluster"), "home\n");
  const env = folderEnvironment(dir, lines);
  const config = { ...daemonConfig({ listen: "127.0.0.1:0", control: true, poll: "1s" }, env.vars, { readFile: () => "", clusterPath: env.clusterPath }), apiKeys: [HOME_INFERENCE_KEY], adminKeys: [HOME_ADMIN_KEY] };
  return Daemon.start(config, env);
}

/**
 * `argv` run in a pipe to its end, killed after 30 s (a bound, not a wait). Never spawnSync: the
 * daemon answering it runs in this process.
 */
export async function runPiped(argv: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [program, ...rest] = argv;
  const child = spawn(program as string, rest, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => (stdout += b.toString("utf8")));
  child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}
