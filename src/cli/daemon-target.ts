import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, hostname } from "node:os";
import path from "node:path";
import { Option } from "commander";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { chooseDaemon, RUN_A_DAEMON, type DaemonTarget } from "../daemon/client.js";
import { LocalDaemonSchema, type LocalDaemon } from "../daemon/protocol.js";
import { isAlive } from "../deploy/locks.js";
import { parseKeyFile } from "../gateway/auth.js";
import { storeDir } from "../store/store.js";

/** `--daemon URL`: the commands that can run through a daemon. */
export function daemonOption(): Option {
  return new Option("--daemon <url>", "the daemon that runs boots (default: $LAUNCHER_DAEMON, then a `launcher serve --control` running on this machine; none: in this process)");
}

/** Where `launcher serve --control` says it runs, for the CLI of the same user on this machine. */
export const localDaemonFile = (): string => path.join(storeDir(process.env, homedir()), "daemon.json");

function readLocalDaemon(): LocalDaemon | undefined {
  const file = localDaemonFile();
  if (!existsSync(file)) return undefined;
  try {
    const parsed = LocalDaemonSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    // A half-written or foreign file is no daemon.
    return undefined;
  }
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
export function findDaemon(flag: string | undefined): DaemonTarget | undefined {
  const env = process.env.LAUNCHER_DAEMON;
  const local = readLocalDaemon();
  const url = chooseDaemon({ ...(flag === undefined ? {} : { flag }), ...(env === undefined ? {} : { env }), ...(local === undefined ? {} : { local }), host: hostname(), alive: isAlive });
  if (url === undefined) return undefined;
  const key = adminKey();
  return { url, ...(key === undefined ? {} : { key }) };
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
export function advertiseLocalDaemon(listenHost: string, port: number): () => void {
  const wildcard = listenHost === "0.0.0.0" || listenHost === "::";
  const host = wildcard ? "127.0.0.1" : listenHost.includes(":") ? `[${listenHost}]` : listenHost;
  const file = localDaemonFile();
  const record: LocalDaemon = { url: `http://${host}:${port}`, pid: process.pid, host: hostname() };
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return () => {
    if (readLocalDaemon()?.pid === process.pid) rmSync(file, { force: true });
  };
}
