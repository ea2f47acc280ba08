import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, hostname } from "node:os";
import path from "node:path";
import { Option } from "commander";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { chooseDaemon, RUN_A_DAEMON, type DaemonTarget } from "../daemon/client.js";
import type { LocalDaemon } from "../daemon/protocol.js";
import { localDaemonFacts, localDaemonVerdict } from "../daemon/local-daemon.js";
import { consoleOutput } from "../app/output.js";
import { parseKeyFile } from "../gateway/auth.js";
import { storeDir } from "../store/store.js";

/** `--daemon URL`: the commands that can run through a daemon. */
export function daemonOption(): Option {
  return new Option("--daemon <url>", "the daemon that runs boots (default: $LAUNCHER_DAEMON, then a `launcher serve --control` running on this machine; none: in this process)");
}

/** Where `launcher serve --control` says it runs, for the CLI of the same user on this machine. */
export const localDaemonFile = (): string => path.join(storeDir(process.env, homedir()), "daemon.json");

function readLocalDaemon(): LocalDaemon | undefined {
  return localDaemonFacts(localDaemonFile())?.record;
}

/**
 * This user's own daemon on this machine, when its record is to be believed
 * (src/daemon/local-daemon.ts); a record that is not is said once, and the command runs here.
 */
function trustedLocalDaemon(warn: (line: string) => void): { url: string; socket: string } | undefined {
  const file = localDaemonFile();
  const facts = localDaemonFacts(file);
  if (facts === undefined) return undefined;
  const verdict = localDaemonVerdict(facts, { uid: process.getuid?.() ?? -1, host: hostname() });
  if ("use" in verdict) return verdict.use;
  if (verdict.skip !== undefined) warn(`not using the daemon that ${file} names: ${verdict.skip}; running in this process`);
  return undefined;
}

/**
 * The admin key to show the daemon: $LAUNCHER_ADMIN_KEY, else the first key of the file
 * $LAUNCHER_ADMIN_KEY_FILE names; never a flag (flags show in `ps`).
 */
function adminKey(): string | undefined {
  const env = process.env.LAUNCHER_ADMIN_KEY?.trim();
  if (env !== undefined && env !== "") return env;
  const file = process.env.LAUNCHER_ADMIN_KEY_FILE;
  if (file === undefined || file === "") return undefined;
  const key = parseKeyFile(readTextFile(file, "admin key file"))[0];
  if (key === undefined) throw new UserError(`the admin key file ${file} holds no key`, "one key per line; # starts a comment");
  return key;
}

/** The daemon this command talks to, or undefined: it runs in this process. */
export function findDaemon(flag: string | undefined, warn: (line: string) => void = consoleOutput.warn): DaemonTarget | undefined {
  const env = process.env.LAUNCHER_DAEMON;
  // LAUNCHER_DAEMON=none never looks at the local record.
  const local = (flag ?? env) === "none" ? undefined : trustedLocalDaemon(warn);
  const chosen = chooseDaemon({ ...(flag === undefined ? {} : { flag }), ...(env === undefined ? {} : { env }), ...(local === undefined ? {} : { local }) });
  if (chosen === undefined) return undefined;
  // Through the owner's socket no key is asked, and none is sent.
  const key = chosen.socket === undefined ? adminKey() : undefined;
  return { ...chosen, ...(key === undefined ? {} : { key }) };
}

/** The daemon, for commands that only make sense through one (`attach`). */
export function requireDaemon(flag: string | undefined, what: string): DaemonTarget {
  const target = findDaemon(flag);
  if (target === undefined) throw new UserError(`${what} needs a daemon: none is configured or running here`, RUN_A_DAEMON);
  return target;
}

/**
 * Writes the local daemon's file (the URL this machine's CLI reaches it at, and its pid) and
 * returns what removes it again, when it is still this daemon's.
 */
export function advertiseLocalDaemon(listenHost: string, port: number, socket: string): () => void {
  const wildcard = listenHost === "0.0.0.0" || listenHost === "::";
  const host = wildcard ? "127.0.0.1" : listenHost.includes(":") ? `[${listenHost}]` : listenHost;
  const file = localDaemonFile();
  const record: LocalDaemon = { url: `http://${host}:${port}`, pid: process.pid, host: hostname(), socket };
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return () => {
    if (readLocalDaemon()?.pid === process.pid) rmSync(file, { force: true });
  };
}

/**
 * The daemon and the key to read it with (`top`, `dashboard`): as `attach` and `down` find it
 * (--daemon, $LAUNCHER_DAEMON, this user's own daemon through its socket), with the admin key when
 * one is set, else the first inference key of $LAUNCHER_API_KEY: reads take either.
 */
export async function readerTarget(flag: string | undefined, command: string): Promise<DaemonTarget> {
  const target = requireDaemon(flag, command);
  const env = process.env.LAUNCHER_API_KEY;
  if (target.socket !== undefined || target.key !== undefined || env === undefined) return target;
  const { collectKeys } = await import("../gateway/auth.js");
  const key = collectKeys({ flags: [], env })[0];
  return key === undefined ? target : { ...target, key };
}
