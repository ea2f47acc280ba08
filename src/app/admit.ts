import path from "node:path";
import { error, hasErrors, type Diagnostic } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { parseTomlDocument } from "../config/toml-document.js";
import type { Cluster } from "../cluster/cluster.js";
import { parseCluster } from "../cluster/parse.js";
import { isHostPath, uploadedSource } from "../recipe/uploaded-source.js";
import type { RecipeSource } from "../recipe/resolve.js";
import type { UpSubmission } from "./up-submission.js";

/*
 * What a client's submission may name on the daemon's machine. The client is not the daemon's
 * user (it may be anyone holding the admin key, on any machine), so nothing it sends becomes a
 * path the daemon reads or a setting of how the daemon's SSH and Docker run:
 * - recipes come as content (the uploaded lookups) or as a bare name of the daemon's own recipe
 *   folders (catalogueSource), never as a path of the daemon's machine;
 * - `cluster` names one of the daemon's own clusters (its --cluster files), never a path;
 * - a cluster file sent with the boot keeps only the cluster's facts (nodes, users, addresses,
 *   fabric, ports, memory floor): its [ssh] and [docker] are refused, and the daemon's own
 *   (those of its first --cluster) apply to it. A file that is one of the daemon's own, byte for
 *   byte and by name, is that cluster: nothing in it is the client's.
 * The daemon's own user, through its owner-only socket (src/daemon/control-socket.ts), is the one
 * exception: it is as trusted as the same command run in its own process, so its `cluster` is read
 * as its CLI reads it (a path, or a name of its config folder). Its recipes still come as the
 * files its CLI sent (src/cli/up.ts forTheDaemon sends them either way).
 * Clusters uploaded and kept by the daemon: src/daemon/uploaded-clusters.ts.
 */

/** Who sent a submission: the daemon's own user through its socket, or an admin key's holder over TCP (any machine). */
export type Caller = "owner" | "client";

/** The daemon's side of a submission: its own clusters (the first is the default) and its recipe catalogue. */
export interface DaemonScope {
  readonly own: readonly Cluster[];
  /** The daemon's recipes by bare name (src/recipe/uploaded-source.ts catalogueSource). */
  readonly catalogue: RecipeSource;
  /** The text of each of `own`'s files, by cluster name: a client's file that is one of them is that cluster. */
  readonly ownTexts?: ReadonlyMap<string, string>;
  /** Reads a cluster file as the daemon user's CLI does (src/app/lookup.ts loadCluster): for its owner's submissions only. */
  readonly load?: (option: string) => Cluster;
}

const HOST_PATH_HINT = "send the recipe from the client's machine (launcher up reads it there and sends its files), or name one of the daemon's own recipes by its bare name";

/**
 * Why the submission names a path of the daemon's machine, or undefined. `ref` may be a path of
 * the client's when the client sent that file (a lookup answers it); `cluster` never may, but for
 * the daemon's own user, whose CLI reads its cluster file as it would in its own process. The
 * reference is quoted, never anything read from it.
 */
export function submissionPathProblem(s: UpSubmission, caller: Caller = "client"): string | undefined {
  const sent = (s.recipes ?? []).some((l) => l.ref === s.ref && l.from === undefined);
  if (isHostPath(s.ref) && !sent) return `recipe ${JSON.stringify(s.ref)} is a path, and a daemon reads no path of its machine for a client: ${HOST_PATH_HINT}`;
  // The owner's `cluster` is read as its CLI reads it (its recipes still come as the files it sent).
  if (caller !== "owner" && s.cluster !== undefined && isHostPath(s.cluster)) {
    return `cluster ${JSON.stringify(s.cluster)} is a path, and a daemon reads no path of its machine for a client: send the cluster file (launcher up --cluster FILE sends it when this machine has it) or name one of the daemon's own clusters`;
  }
  return undefined;
}

/** Why each table of a client's cluster file is refused: it sets how the daemon's own processes run. */
const REFUSED_TABLES: Readonly<Record<string, string>> = {
  ssh: "SSH runs as the daemon's user on the daemon's machine: its config, identity, known_hosts and options (ProxyCommand, LocalCommand) would read the daemon's files and run commands there",
  docker: "its arguments (--privileged, -v /:/host) decide what the daemon's containers may do on the nodes",
};

/** One setting a client's cluster file may not make: the table, or table.key, and where it is said. */
export interface RefusedSetting {
  /** `ssh`, `docker`, or `ssh.options`, `docker.run_args`, ...: what the file sets. */
  readonly setting: string;
  readonly diagnostic: Diagnostic;
}

/**
 * What a client's cluster file sets that it may not: [ssh] and [docker], each key at its line (the
 * table's header when it is empty). A file that is not TOML is left to the cluster parser, whose
 * errors name it.
 */
export function refusedSettings(file: string, text: string): RefusedSetting[] {
  const parsed = parseTomlDocument(file, text);
  if (!parsed.ok) return [];
  const doc = parsed.doc;
  return Object.entries(REFUSED_TABLES).flatMap(([table, why]) => {
    const value = doc.value[table];
    if (value === undefined) return [];
    const keys = typeof value === "object" && value !== null && !Array.isArray(value) ? Object.keys(value) : [];
    const hint = `leave [${table}] out of the file sent: a client cannot set how the daemon's SSH/Docker run; configure the daemon's own cluster file (its first --cluster), whose [ssh] and [docker] apply to clusters clients send`;
    if (keys.length === 0) return [{ setting: table, diagnostic: error(doc.locateKey([table]), `[${table}] is not accepted in a cluster file sent to a daemon: ${why}`, hint) }];
    return keys.map((k) => ({ setting: `${table}.${k}`, diagnostic: error(doc.locateKey([table, k]), `${table}.${k} is not accepted in a cluster file sent to a daemon: ${why}`, hint) }));
  });
}

/** refusedSettings as diagnostics, each at its line. */
export const clusterFileProblems = (file: string, text: string): Diagnostic[] => refusedSettings(file, text).map((r) => r.diagnostic);

/** The daemon's own cluster that a client's file is, byte for byte and by name; undefined: none. */
function ownClusterSent(file: string, text: string, scope: DaemonScope): Cluster | undefined {
  const same = scope.own.filter((c) => scope.ownTexts?.get(c.name) === text);
  if (same.length === 0) return undefined;
  // The same text under another file name may name another cluster (a file without `name` is named by its file).
  const name = parseCluster(file, text).cluster?.name;
  return same.find((c) => c.name === name);
}

/**
 * The cluster a submission boots on: the file it sent (one of the daemon's own when identical,
 * else checked, named unlike the daemon's own, with the daemon's [ssh] and [docker]), else one
 * of the daemon's own by name (or, for its owner, any file its CLI would read), else its default.
 */
export function submittedCluster(s: UpSubmission, scope: DaemonScope, caller: Caller = "client"): Cluster {
  const [first] = scope.own;
  if (first === undefined) throw new Error("a daemon watches at least one cluster of its own");
  if (s.cluster_file !== undefined) return sentCluster(s.cluster_file, scope, first);
  if (s.cluster === undefined) return first;
  return namedCluster(s.cluster, scope, caller);
}

/** A cluster file a client sent, as the daemon boots on it. */
function sentCluster({ file, text }: { readonly file: string; readonly text: string }, scope: DaemonScope, first: Cluster): Cluster {
  const own = ownClusterSent(file, text, scope);
  if (own !== undefined) return own;
  // Its own syntax first: parsed with the daemon's tables after it, a file cut short (a key
  // without its value, an unclosed string) reads on into them, and the error names lines the
  // client's file does not have.
  const alone = parseTomlDocument(file, text);
  if (!alone.ok) throw new UserError(`cluster file ${file} has errors`, undefined, alone.diagnostics);
  const refused = clusterFileProblems(file, text);
  if (refused.length > 0) throw new UserError(`cluster file ${file} sets how the daemon's SSH or Docker run, which a client may not`, "remove the tables named above from the file, then up again", refused);
  const parsed = parseCluster(file, composeUploaded(text, first));
  if (parsed.cluster === undefined || hasErrors(parsed.diagnostics)) throw new UserError(`cluster file ${file} has errors`, undefined, parsed.diagnostics);
  const name = parsed.cluster.name;
  if (scope.own.some((c) => c.name === name)) {
    throw new UserError(
      `cluster file ${file} is named ${JSON.stringify(name)}, as one of the daemon's own clusters is, with other content: a client's file never stands for the daemon's own`,
      `to use the daemon's, send --cluster ${name} from a machine without such a file (or LAUNCHER_DAEMON with no --cluster for its default), or send a copy of the daemon's file unchanged; to send yours, give it another name (name = "...")`,
    );
  }
  return parsed.cluster;
}

/** `--cluster` as sent: one of the daemon's own (by name, or by its file's path for the owner), else, for the owner, what its CLI reads. */
function namedCluster(option: string, scope: DaemonScope, caller: Caller): Cluster {
  const owner = caller === "owner";
  const own = scope.own.find((c) => c.name === option || (owner && path.resolve(c.file) === option));
  if (own !== undefined) return own;
  if (owner && scope.load !== undefined) return scope.load(option);
  throw new UserError(`the daemon has no cluster named ${JSON.stringify(option)}: its clusters are ${scope.own.map((c) => c.name).join(", ")}`, "name one of them, or send your cluster file (launcher up --cluster FILE sends it when this machine has it)");
}

/** The recipes a submission resolves from: the files the client sent, then the daemon's catalogue by name. */
export const submittedRecipes = (s: UpSubmission, scope: DaemonScope): RecipeSource => uploadedSource(s.recipes ?? [], scope.catalogue);

/** Where the daemon's own tables start in a kept file: what comes before is the client's text. */
const DAEMON_TABLES = "\n# launcher serve: this daemon's own [ssh] and [docker] (a client's cluster file may not set them)\n";

/** A TOML basic string: JSON's escapes, and DEL, which TOML also wants escaped (TOML 1.0, "String"). */
const tomlString = (s: string): string => JSON.stringify(s).replaceAll("\x7f", "\\u007F");
const tomlArray = (a: readonly string[]): string => `[${a.map(tomlString).join(", ")}]`;

/**
 * A client's cluster file (checked: no [ssh], no [docker]) with `own`'s [ssh] and [docker] after
 * it, paths absolute: what the daemon boots, supervises and watches on. Appended, so that each
 * line of the client's text keeps its number in diagnostics.
 */
export function composeUploaded(clientText: string, own: Cluster): string {
  const ssh = own.ssh;
  const lines = [
    "[ssh]",
    ...(ssh.config === undefined ? [] : [`config = ${tomlString(path.resolve(ssh.config))}`]),
    ...(ssh.known_hosts === undefined ? [] : [`known_hosts = ${tomlString(path.resolve(ssh.known_hosts))}`]),
    ...(ssh.identity === undefined ? [] : [`identity = ${tomlString(path.resolve(ssh.identity))}`]),
    `options = ${tomlArray(ssh.options)}`,
    "[docker]",
    `run_args = ${tomlArray(own.run_args)}`,
    `extra_args = ${tomlArray(own.extra_args)}`,
  ];
  return `${clientText}${DAEMON_TABLES}${lines.join("\n")}\n`;
}

/** The client's part of a kept file (all of it for a file kept before the daemon's tables were added). */
export const clientPart = (kept: string): string => kept.split(DAEMON_TABLES)[0] ?? kept;
