import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, statSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { UserError } from "./errors.js";

/**
 * The one home for "may launcher trust this local folder or file?": the folders launcher makes
 * (ssh's control sockets, the demo's files) and the cluster files it finds on its own (./cluster.toml).
 * Pure verdicts over what lstat/stat said, and a thin shell that asks the file system.
 */

/** What lstat (or stat) says of one path: all a verdict needs, so that verdicts are tested without files. */
export interface PathFacts {
  readonly kind: "file" | "dir" | "symlink" | "other";
  readonly uid: number;
  /** st_mode's permission bits, sticky bit included (0o7777). */
  readonly mode: number;
}

export const factsOf = (st: Stats): PathFacts => ({
  kind: st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other",
  uid: st.uid,
  mode: st.mode & 0o7777,
});

/** A mode as ls and chmod write it: four octal digits (0644, 1777). */
export const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, "0");
const owner = (uid: number, me: number): string => (uid === me ? `you (uid ${uid})` : `uid ${uid}`);

/** How a launcher folder may be seen by others: not at all, or read (the demo's hosts' users read theirs). */
export const FOLDER_RULES = {
  private: { forbidden: 0o077, mode: 0o700, says: "no permission for group or others (mode 0700)" },
  readable: { forbidden: 0o022, mode: 0o755, says: "no write permission for group or others (mode 0755 or stricter)" },
} as const;
export type FolderRule = keyof typeof FOLDER_RULES;

/**
 * Why a folder launcher made (or finds where it would make one) is not its own, or undefined when
 * it is: it must be a real folder (lstat: not a link to one elsewhere), owned by this uid, and
 * closed to others as `rule` says. A folder someone else made first is theirs: ssh would hand its
 * control socket's every command and stdin to whoever owns it.
 */
export function folderProblem(st: PathFacts | undefined, me: number, rule: FolderRule): string | undefined {
  if (st === undefined) return "does not exist";
  if (st.kind === "symlink") return "is a symbolic link, not a folder";
  if (st.kind !== "dir") return "is not a folder";
  if (st.uid !== me) return `is owned by ${owner(st.uid, me)}, not by you (uid ${me})`;
  if ((st.mode & FOLDER_RULES[rule].forbidden) !== 0) return `has mode ${octal(st.mode)}; it must have ${FOLDER_RULES[rule].says}`;
  return undefined;
}

/** The sticky bit of st_mode (inode(7)); Node's fs.constants does not carry it. */
const S_ISVTX = 0o1000;

/**
 * Why the folder that holds a launcher folder lets others replace it, or undefined: it must be
 * owned by this uid or root, and writable by no one else unless sticky (as /tmp is: then only a
 * file's owner may rename or remove it, so nobody can swap our folder for theirs).
 */
export function parentProblem(st: PathFacts | undefined, me: number): string | undefined {
  if (st === undefined) return "does not exist";
  if (st.kind !== "dir") return "is not a folder";
  if (st.uid !== me && st.uid !== 0) return `is owned by ${owner(st.uid, me)}, neither you (uid ${me}) nor root`;
  if ((st.mode & 0o022) !== 0 && (st.mode & S_ISVTX) === 0) return `has mode ${octal(st.mode)}: others may write in it and it has no sticky bit`;
  return undefined;
}

/** The rule a config file found without being named must pass, said in warnings. */
export const FOUND_FILE_RULE = "a cluster file found in the current folder is read only when owned by you or root and not writable by group or others (ssh's rule for ~/.ssh/config)";

/**
 * Why a cluster file launcher found on its own (not one the user named) may not be read, or
 * undefined. OpenSSH's rule for the ~/.ssh/config it finds by itself: owner root or the user, no
 * group/other write bit (readconf.c read_config_file_depth: `(sb.st_uid != 0 && sb.st_uid !=
 * getuid()) || (sb.st_mode & 022) != 0` under SSHCONF_CHECKPERM, which ssh.c
 * process_config_files sets for ~/.ssh/config but not for a `-F` file the user named). A link is
 * judged twice: the link itself (whoever owns it chooses what it names) and the file it names.
 */
export function foundFileProblem(entry: PathFacts, target: PathFacts | undefined, me: number): string | undefined {
  const trusted = (uid: number): boolean => uid === me || uid === 0;
  if (entry.kind === "symlink" && !trusted(entry.uid)) return `is a symbolic link owned by ${owner(entry.uid, me)}`;
  if (target === undefined) return "is a symbolic link to nothing";
  if (!trusted(target.uid)) return `is owned by ${owner(target.uid, me)}, neither you (uid ${me}) nor root`;
  if ((target.mode & 0o022) !== 0) return `is writable by group or others (mode ${octal(target.mode)})`;
  return undefined;
}

/**
 * The longest runtime folder launcher uses: ssh binds its control socket as DIR/%C (40 hex
 * characters) plus `.` and 16 random characters while it starts (OpenSSH mux.c
 * muxserver_listen: `xasprintf(&options.control_path, "%s.%s", orig_control_path, rbuf)`), and a
 * unix socket path is at most 103 bytes on BSD/macOS (sun_path[104], NUL included; 108 on Linux).
 */
export const MAX_RUNTIME_DIR = 103 - 1 - 40 - 17;

export interface RuntimeLookup {
  /** $XDG_RUNTIME_DIR, and what lstat says of it. */
  readonly xdg?: string;
  readonly xdgFacts?: PathFacts;
  /** os.tmpdir(). */
  readonly tmp: string;
  readonly uid: number;
}

/**
 * Where launcher's runtime folder `name` lives: in $XDG_RUNTIME_DIR when it is set, absolute and
 * private to this user (the XDG Base Directory spec: owned by the user, mode 0700), else a per-uid
 * name in the temporary folder; /tmp when that path would be too long for ssh's sockets.
 */
export function runtimeDirFor(name: string, l: RuntimeLookup): string {
  const fits = (dir: string): boolean => Buffer.byteLength(dir) <= MAX_RUNTIME_DIR;
  if (l.xdg !== undefined && path.isAbsolute(l.xdg) && folderProblem(l.xdgFacts, l.uid, "private") === undefined) {
    const dir = path.join(l.xdg, `launcher-${name}`);
    if (fits(dir)) return dir;
  }
  const dir = path.join(l.tmp, `launcher-${name}-${l.uid}`);
  return fits(dir) ? dir : path.join("/tmp", `launcher-${name}-${l.uid}`);
}

// ---------------------------------------------------------------- shell ----

const myUid = (): number => process.getuid?.() ?? -1;

/** lstat (or stat), or undefined when nothing is there. */
export function pathFacts(p: string, follow = false): PathFacts | undefined {
  try {
    return factsOf(follow ? statSync(p) : lstatSync(p));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new UserError(`${p} cannot be checked (${code ?? (e as Error).message})`, "check the permissions of the folders on its path");
  }
}

/**
 * Checks that folder `dir`, when it is there, is this user's as `rule` says, and that its parent
 * lets nobody else swap it; undefined when nothing is there. A folder that fails is never used: a
 * UserError names it, what was found and what to do.
 */
export function checkFolder(dir: string, what: string, rule: FolderRule): string | undefined {
  const me = myUid();
  const parent = path.dirname(dir);
  const parentWhy = parentProblem(pathFacts(parent, true), me);
  if (parentWhy !== undefined) throw new UserError(`${what}: the folder ${parent} that holds ${dir} ${parentWhy}`, "set TMPDIR (or XDG_RUNTIME_DIR) to a folder of yours and run again");
  const st = pathFacts(dir);
  if (st === undefined) return undefined;
  const why = folderProblem(st, me, rule);
  if (why !== undefined) {
    throw new UserError(`${what}: the folder ${dir} ${why}; launcher does not use a folder that is not its own`, `if you did not make it, someone else may have: remove it (rm -r ${dir}) and run again; launcher makes it ${octal(FOLDER_RULES[rule].mode)}`);
  }
  return dir;
}

/**
 * Makes folder `dir` (its parent must exist) or finds it, and checks it as checkFolder does.
 * mkdir without `recursive` fails on anything already there, so what is there is judged.
 */
export function ensureFolder(dir: string, what: string, rule: FolderRule): string {
  checkFolder(dir, what, rule);
  try {
    mkdirSync(dir, { mode: FOLDER_RULES[rule].mode });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw new UserError(`${what}: cannot make the folder ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const made = checkFolder(dir, what, rule);
  if (made === undefined) throw new UserError(`${what}: the folder ${dir} was removed as it was made`, "run again");
  return made;
}

/**
 * Launcher's runtime folder `name` for this user (see runtimeDirFor), made and checked each time:
 * a folder removed meanwhile (a tmp cleaner) is made again, and one planted meanwhile is refused.
 */
export function privateRuntimeDir(name: string, what: string): string {
  const xdg = process.env.XDG_RUNTIME_DIR || undefined;
  const xdgFacts = xdg !== undefined && path.isAbsolute(xdg) ? pathFacts(xdg) : undefined;
  return ensureFolder(runtimeDirFor(name, { ...(xdg === undefined ? {} : { xdg }), ...(xdgFacts === undefined ? {} : { xdgFacts }), tmp: tmpdir(), uid: myUid() }), what, "private");
}

/**
 * The uids a /proc/PID/status text lists on its `Uid:` line: real, effective, saved set and
 * filesystem (proc(5)); none when the line is missing or not all numbers.
 */
export function statusUids(text: string): number[] {
  const line = /^Uid:((?:[ \t]+\d+)+)[ \t]*$/m.exec(text);
  return line === null ? [] : (line[1] as string).trim().split(/\s+/).map(Number);
}

/** What /proc/PID/status says of process `pid`'s uids (statusUids); undefined: no such process. */
export function procUids(pid: number): number[] | undefined {
  try {
    return statusUids(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return undefined;
  }
}

/**
 * Up to `max` bytes of `file`, opened without following a link (O_NOFOLLOW: a link in its place
 * fails with ELOOP) and without waiting on a FIFO (O_NONBLOCK), with what fstat says of the very
 * file opened: a non-file is not read (text ""). Undefined when nothing is there; any other
 * failure to open is thrown as it came (its errno code says why).
 */
export function readSmallNoFollow(file: string, max: number): { readonly facts: PathFacts; readonly text: string } | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  try {
    const facts = factsOf(fstatSync(fd));
    if (facts.kind !== "file") return { facts, text: "" };
    const buf = Buffer.alloc(max);
    return { facts, text: buf.subarray(0, readSync(fd, buf, 0, max, 0)).toString("utf8") };
  } finally {
    closeSync(fd);
  }
}

/** Why a cluster file found in the current folder may not be read (see foundFileProblem), or undefined. */
export function foundFileTrust(file: string): string | undefined {
  const entry = pathFacts(file);
  if (entry === undefined) return "does not exist";
  return foundFileProblem(entry, entry.kind === "symlink" ? pathFacts(file, true) : entry, myUid());
}

/** The rule a recipe found by its bare name must pass, said in warnings. */
export const FOUND_RECIPE_RULE = "a recipe found by its name in the current folder or ./recipes is read only when it and its folder are owned by you or root and not writable by group or others";

/**
 * Why a recipe launcher found by a bare name in the current folder or ./recipes may not be read
 * (a clause: "it ..." or "its folder ..."), or undefined. The cluster file's rule
 * (foundFileProblem), for the file and for the folder that holds it: whoever may write that folder
 * may put another recipe.toml in its place. A recipe chooses the image, entrypoint and mounts of
 * root containers on every node.
 */
export function foundRecipeTrust(file: string): string | undefined {
  const own = foundFileTrust(file);
  if (own !== undefined) return `it ${own}`;
  const dir = path.dirname(path.resolve(file));
  const entry = pathFacts(dir);
  const why = entry === undefined ? "does not exist" : foundFileProblem(entry, entry.kind === "symlink" ? pathFacts(dir, true) : entry, myUid());
  return why === undefined ? undefined : `its folder ${why}`;
}
