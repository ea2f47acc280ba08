import { UserError } from "../config/errors.js";

/**
 * One word of an Exec*= line, as systemd reads it back: double-quoted with C-style escapes for
 * `\` and `"`, `%` doubled (specifiers expand even inside quotes) and `$` doubled (variables
 * expand too). systemd.service(5), "Command lines"; systemd.unit(5), "Specifiers" (%%).
 * A newline cannot be written in a unit's value at all: refused.
 */
export function systemdWord(word: string): string {
  return quoted(word).replace(/\$/g, "$$$$");
}

/** An Environment= assignment: quoted as a word, but `$` is literal there (no variables expand). */
export const systemdAssignment = (name: string, value: string): string => quoted(`${name}=${value}`);

const quoted = (word: string): string => `"${systemdValue(word).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/** A plain value (a path, a user name): taken as it is, but for specifiers (`%` doubled); no line breaks. */
export function systemdValue(value: string): string {
  if (/[\n\r\0]/.test(value)) throw new UserError(`${JSON.stringify(value)} holds a line break or NUL, which a systemd unit cannot carry`);
  return value.replace(/%/g, "%%");
}

/**
 * npm exec (npx) installs a package it does not find into a folder of its own cache,
 * `<npm cache>/_npx/<hash>/node_modules` (npm/cli workspaces/libnpmexec), which `npm cache clean`
 * and npm's own pruning remove: a unit must never name a path in there.
 */
export const inNpxCache = (realPath: string): boolean => realPath.split(/[\\/]/).includes("_npx");

/** How this launcher runs, as the unit's ExecStart would run it again. */
export interface RunningLauncher {
  readonly execPath: string;
  readonly execArgv: readonly string[];
  /** The running main script, symlinks resolved. */
  readonly script: string;
  /** The `launcher` commands on PATH, in PATH's order, each as its real path, and only those of this package. */
  readonly onPath: readonly string[];
}

/**
 * The command line a unit runs this launcher with: the running script where it stays (a global
 * or local install, the sources), else a `launcher` on PATH that is this package and is not in
 * npx's cache; none: refused, saying to install it first (npx's copy would vanish with its cache).
 */
export function stableLauncherArgv(r: RunningLauncher, args: readonly string[]): string[] {
  if (!inNpxCache(r.script)) return [r.execPath, ...r.execArgv, r.script, ...args];
  const installed = r.onPath.find((p) => !inNpxCache(p));
  if (installed !== undefined) return [r.execPath, installed, ...args];
  throw new UserError(
    `launcher runs from npx's cache (${r.script}), which npm removes when it cleans its cache: a unit naming it would stop starting`,
    "install launcher first (npm install -g dgx-spark-launcher), then run `launcher export systemd` again",
  );
}

export type UnitScope = "user" | "system";

export interface DaemonUnit {
  readonly scope: UnitScope;
  /** The command that runs the daemon: node, launcher's main script, `serve ...`; absolute paths. */
  readonly argv: readonly string[];
  /** The folder it runs in (recipes/ there are found by name). */
  readonly workingDirectory: string;
  /** For a system unit: the user it runs as (its SSH keys and state store). */
  readonly user?: string;
  /** Variables it needs (LAUNCHER_RECIPES, XDG_STATE_HOME, ...): never a key. */
  readonly environment: Readonly<Record<string, string>>;
}

/**
 * A unit that keeps the daemon running and brings it back after a reboot. Keys are never in it:
 * the daemon reads them from the files its flags name (--api-key-file, --admin-key-file).
 */
export function daemonUnitText(u: DaemonUnit): string {
  const env = Object.entries(u.environment).map(([k, v]) => `Environment=${systemdAssignment(k, v)}`);
  return [
    "[Unit]",
    "Description=launcher daemon: the OpenAI gateway and the control API of the cluster's boots",
    "Wants=network-online.target",
    "After=network-online.target",
    "",
    "[Service]",
    "Type=exec",
    `ExecStart=${u.argv.map(systemdWord).join(" ")}`,
    `WorkingDirectory=${systemdValue(u.workingDirectory)}`,
    ...(u.scope === "system" && u.user !== undefined ? [`User=${systemdValue(u.user)}`] : []),
    ...env,
    // SIGTERM: the daemon rolls back boots in progress, then stops; give the rollback time.
    "KillSignal=SIGTERM",
    "TimeoutStopSec=60",
    "Restart=on-failure",
    "RestartSec=5",
    "",
    "[Install]",
    `WantedBy=${u.scope === "user" ? "default.target" : "multi-user.target"}`,
    "",
  ].join("\n");
}
