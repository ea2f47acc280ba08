import path from "node:path";
import { folderProblem, octal, pathFacts, procUids, readSmallNoFollow, type PathFacts } from "../config/private-dir.js";
import { LocalDaemonSchema, type LocalDaemon } from "./protocol.js";

/*
 * Which `daemon.json` the CLI believes. The file says where this user's daemon is; the CLI then
 * sends it recipes, cluster files and the admin key. A file someone else could write, or one left
 * by a daemon that died whose pid now runs another user's process, would send all that to them.
 */

/** What the file system and /proc say about a local daemon's record: all the verdict needs. */
export interface LocalDaemonFacts {
  readonly record: LocalDaemon;
  /** daemon.json itself (fstat of the file read). */
  readonly file: PathFacts;
  /** The real and effective uid of the record's pid (/proc/PID/status `Uid:`); undefined: no such process. */
  readonly pidUids: readonly number[] | undefined;
  /** The record's socket (lstat), and the folder that holds it (lstat); undefined: nothing there. */
  readonly socket: PathFacts | undefined;
  readonly socketDir: PathFacts | undefined;
}

/** Use this daemon through its socket, or not: with the reason to say, or silently (it is gone, or another machine's). */
export type LocalVerdict = { readonly use: { readonly url: string; readonly socket: string } } | { readonly skip: string | undefined };

/**
 * The local daemon is believed only when its record is this user's (owned by this uid, not
 * writable by group or others), was written on this host, its pid runs as this uid, and its
 * socket is this uid's socket in a private folder. A dead pid or another host is no daemon (said
 * nothing, as before); anything else is said, and the command runs in its own process.
 */
export function localDaemonVerdict(f: LocalDaemonFacts, me: { readonly uid: number; readonly host: string }): LocalVerdict {
  const { record } = f;
  if (record.host !== me.host) return { skip: undefined };
  if (f.file.kind !== "file") return { skip: "it is not a regular file" };
  if (f.file.uid !== me.uid) return { skip: `it is owned by uid ${f.file.uid}, not by you (uid ${me.uid})` };
  if ((f.file.mode & 0o022) !== 0) return { skip: `group or others may write it (mode ${octal(f.file.mode & 0o777)})` };
  if (f.pidUids === undefined) return { skip: undefined };
  if (f.pidUids.length === 0 || f.pidUids.some((u) => u !== me.uid)) return { skip: `its pid ${record.pid} is a process of uid ${f.pidUids.join("/") || "?"}, not yours (uid ${me.uid}): the daemon that wrote it is gone` };
  if (record.socket === undefined) return { skip: "it names no control socket (a launcher serve older than this launcher?): restart the daemon" };
  const dirWhy = folderProblem(f.socketDir, me.uid, "private");
  if (dirWhy !== undefined) return { skip: `the folder of its control socket ${path.dirname(record.socket)} ${dirWhy}` };
  if (f.socket === undefined) return { skip: undefined };
  if (f.socket.kind !== "other" || f.socket.uid !== me.uid) return { skip: `its control socket ${record.socket} is not a socket of yours` };
  return { use: { url: record.url, socket: record.socket } };
}

/** The real and effective uid of `pid` (the first two /proc/PID/status lists); undefined: no such process. */
export function pidUids(pid: number): number[] | undefined {
  return procUids(pid)?.slice(0, 2);
}

/** lstat, or undefined when nothing is there or it cannot be looked at (a folder of someone else's). */
function lstatOrNothing(p: string): PathFacts | undefined {
  try {
    return pathFacts(p);
  } catch {
    return undefined;
  }
}

/** The longest daemon.json read: a few hundred bytes are written. */
const MAX_RECORD_BYTES = 16 * 1024;

/**
 * Reads `file` without following a link (O_NOFOLLOW) and judges the very file read (fstat), with
 * what /proc and the socket's folder say; undefined when there is no readable record.
 */
export function localDaemonFacts(file: string): LocalDaemonFacts | undefined {
  let record: LocalDaemon;
  let facts: PathFacts;
  try {
    const read = readSmallNoFollow(file, MAX_RECORD_BYTES);
    if (read === undefined) return undefined;
    facts = read.facts;
    const parsed = LocalDaemonSchema.safeParse(JSON.parse(read.text));
    if (!parsed.success) return undefined;
    record = parsed.data;
  } catch {
    // A link, a half-written or foreign file is no daemon.
    return undefined;
  }
  return {
    record,
    file: facts,
    pidUids: pidUids(record.pid),
    socket: record.socket === undefined ? undefined : lstatOrNothing(record.socket),
    socketDir: record.socket === undefined ? undefined : lstatOrNothing(path.dirname(record.socket)),
  };
}
