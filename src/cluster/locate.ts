import path from "node:path";

/**
 * Where cluster files live, and which one a command reads. Pure: the file system is passed in as
 * `exists` and the default's name as read, so that the order is tested without a home folder.
 *
 * Order: `--cluster PATH|NAME`, then `$LAUNCHER_CLUSTER` (PATH|NAME), then `./cluster.toml`, then the
 * default cluster of the config folder (`$XDG_CONFIG_HOME/launcher`, default `~/.config/launcher`),
 * whose named clusters are `clusters/NAME.toml` and whose default is the name in `default-cluster`
 * (`launcher cluster use NAME` writes it; `cluster init` writes it when there is none yet).
 *
 * A file launcher finds on its own in the current folder, ./cluster.toml or a bare NAME given by
 * --cluster or $LAUNCHER_CLUSTER that happens to be a file there, is read only when `trust` passes
 * it: whoever controls that folder would otherwise choose the nodes, the ssh options (a
 * ProxyCommand runs here, as the user) and the containers. It is skipped, with the reason, for the
 * next source. A path the user gives (with a `/`, or a file name that is not a cluster name) is
 * their own choice and is read as named, as ssh reads a `-F` file without its permission check.
 */

/** How a cluster was chosen: shown by `cluster show`, and in the hint when it is missing. */
export const CLUSTER_SOURCES = ["option", "env", "cwd", "default"] as const;
export type ClusterSource = (typeof CLUSTER_SOURCES)[number];

export const SOURCE_LABEL: Readonly<Record<ClusterSource, string>> = {
  option: "--cluster",
  env: "$LAUNCHER_CLUSTER",
  cwd: "./cluster.toml",
  default: "the default cluster",
};

/** A cluster name: a file name in the config folder, so no `/`, no `.`, no leading `-`. */
export const CLUSTER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
export const isClusterName = (ref: string): boolean => CLUSTER_NAME.test(ref);

export interface ConfigDirs {
  /** `$XDG_CONFIG_HOME/launcher` or `~/.config/launcher`. */
  readonly root: string;
  readonly clusters: string;
  /** Holds the default cluster's name. */
  readonly defaultFile: string;
}

/** XDG Base Directory: a relative $XDG_CONFIG_HOME is ignored, as the spec says (and as the store does for $XDG_STATE_HOME). */
export function configDirs(env: NodeJS.ProcessEnv, home: string): ConfigDirs {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(home, ".config");
  const root = path.join(base, "launcher");
  return { root, clusters: path.join(root, "clusters"), defaultFile: path.join(root, "default-cluster") };
}

export const namedClusterFile = (dirs: ConfigDirs, name: string): string => path.join(dirs.clusters, `${name}.toml`);

export interface ClusterLookup {
  readonly dirs: ConfigDirs;
  /** `--cluster`, when given. */
  readonly option?: string;
  /** `$LAUNCHER_CLUSTER`; an empty value counts as unset. */
  readonly env?: string;
  /** The name in `default-cluster`, when the file exists. */
  readonly defaultName?: string;
  readonly exists: (file: string) => boolean;
  /** Why a file found in the current folder may not be read, or undefined when it may (src/config/private-dir.ts foundFileTrust). */
  readonly trust: (file: string) => string | undefined;
}

/** A file of the current folder that was passed over, and why: commands say it as a warning. */
export interface SkippedFile {
  readonly file: string;
  readonly problem: string;
}

type Choice =
  | { readonly found: true; readonly file: string; readonly source: ClusterSource; readonly name?: string }
  | { readonly found: false; readonly source?: ClusterSource; readonly message: string; readonly hint: string };

/** `skipped` is there only when a file was passed over. */
export type ClusterChoice = Choice & { readonly skipped?: readonly SkippedFile[] };

const INIT_HINT = "run `launcher cluster init HOST...` to write one, pass --cluster FILE|NAME, set LAUNCHER_CLUSTER, or create ./cluster.toml (see examples/clusters/)";

/** A file of the current folder found without a path: undefined when it is absent or passed over (then `skipped` says why). */
function foundHere(file: string, l: ClusterLookup, skipped: SkippedFile[]): string | undefined {
  if (!l.exists(file)) return undefined;
  const problem = l.trust(file);
  if (problem === undefined) return file;
  skipped.push({ file, problem });
  return undefined;
}

/** A path that exists is a path (a bare name in the current folder only when trusted); else a name of the config folder; else not found. */
function byRef(ref: string, source: ClusterSource, l: ClusterLookup, skipped: SkippedFile[]): Choice {
  if (!isClusterName(ref)) {
    if (l.exists(ref)) return { found: true, file: ref, source };
    return { found: false, source, message: `cluster file ${ref} not found`, hint: `check the path given by ${SOURCE_LABEL[source]}` };
  }
  const here = foundHere(ref, l, skipped);
  if (here !== undefined) return { found: true, file: here, source };
  const file = namedClusterFile(l.dirs, ref);
  if (l.exists(file)) return { found: true, file, source, name: ref };
  return { found: false, source, message: `no cluster file ${ref} and no cluster named ${ref} (${file})`, hint: "`launcher cluster list` shows the named clusters" };
}

function choose(l: ClusterLookup, skipped: SkippedFile[]): Choice {
  if (l.option !== undefined) return byRef(l.option, "option", l, skipped);
  if (l.env) return byRef(l.env, "env", l, skipped);
  if (foundHere("cluster.toml", l, skipped) !== undefined) return { found: true, file: "cluster.toml", source: "cwd" };
  if (l.defaultName !== undefined) {
    const file = namedClusterFile(l.dirs, l.defaultName);
    if (l.exists(file)) return { found: true, file, source: "default", name: l.defaultName };
    return { found: false, source: "default", message: `the default cluster ${l.defaultName} (${l.dirs.defaultFile}) has no file ${file}`, hint: "`launcher cluster use NAME` picks another; `launcher cluster list` shows them" };
  }
  return { found: false, message: "no cluster file", hint: INIT_HINT };
}

export function chooseCluster(l: ClusterLookup): ClusterChoice {
  const skipped: SkippedFile[] = [];
  const choice = choose(l, skipped);
  return skipped.length === 0 ? choice : { ...choice, skipped };
}

/**
 * Whether a chosen file is one launcher found in the current folder without being given a path
 * (./cluster.toml, or a bare NAME that is a file there): the files it names are judged too.
 */
export const foundInCurrentFolder = (c: ClusterChoice): boolean => c.found && (c.source === "cwd" || (c.name === undefined && isClusterName(c.file)));

/** The [ssh] keys that name a file, which ssh then reads with no check of its own (`-F`, `-i`, UserKnownHostsFile). */
export const SSH_FILE_KEYS = ["config", "identity", "known_hosts"] as const;

/**
 * The first file a cluster file found in the current folder names under [ssh] that `trust`
 * refuses, with why; undefined when all pass. Such a file sits beside the cluster file, in a
 * folder someone else may control: an ssh config there can run a ProxyCommand as this user, a
 * known_hosts there accepts their host. A file that is not there is for ssh to complain about.
 */
export function sshFileProblem(
  ssh: Readonly<Partial<Record<(typeof SSH_FILE_KEYS)[number], string>>>,
  trust: (file: string) => string | undefined,
): { readonly key: (typeof SSH_FILE_KEYS)[number]; readonly file: string; readonly problem: string } | undefined {
  for (const key of SSH_FILE_KEYS) {
    const file = ssh[key];
    const problem = file === undefined ? undefined : trust(file);
    if (file !== undefined && problem !== undefined) return { key, file, problem };
  }
  return undefined;
}
