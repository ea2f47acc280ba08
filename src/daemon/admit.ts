import { error, hasErrors, type Diagnostic } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { parseTomlDocument } from "../config/toml-document.js";
import type { Cluster } from "../cluster/cluster.js";
import { parseCluster } from "../cluster/parse.js";
import { isHostPath, uploadedSource } from "../recipe/uploaded-source.js";
import type { RecipeSource } from "../recipe/resolve.js";
import type { UpSubmission } from "./protocol.js";
import { composeUploaded } from "./uploaded-clusters.js";

/*
 * What a client's submission may name on the daemon's machine. The client is not the daemon's
 * user (it may be anyone holding the admin key, on any machine), so nothing it sends becomes a
 * path the daemon reads or a setting of how the daemon's SSH and Docker run:
 * - recipes come as content (the uploaded lookups) or as a bare name of the daemon's own recipe
 *   folders (catalogueSource), never as a path of the daemon's machine;
 * - `cluster` names one of the daemon's own clusters (its --cluster files), never a path;
 * - a cluster file sent with the boot keeps only the cluster's facts (nodes, users, addresses,
 *   fabric, ports, memory floor): its [ssh] and [docker] are refused, and the daemon's own
 *   (those of its first --cluster) apply to it.
 */

/** The daemon's side of a submission: its own clusters (the first is the default) and its recipe catalogue. */
export interface DaemonScope {
  readonly own: readonly Cluster[];
  /** The daemon's recipes by bare name (src/recipe/uploaded-source.ts catalogueSource). */
  readonly catalogue: RecipeSource;
}

const HOST_PATH_HINT = "send the recipe from the client's machine (launcher up reads it there and sends its files), or name one of the daemon's own recipes by its bare name";

/**
 * Why the submission names a path of the daemon's machine, or undefined. `ref` may be a path of
 * the client's when the client sent that file (a lookup answers it); `cluster` never may. The
 * reference is quoted, never anything read from it.
 */
export function submissionPathProblem(s: UpSubmission): string | undefined {
  const sent = (s.recipes ?? []).some((l) => l.ref === s.ref && l.from === undefined);
  if (isHostPath(s.ref) && !sent) return `recipe ${JSON.stringify(s.ref)} is a path, and a daemon reads no path of its machine for a client: ${HOST_PATH_HINT}`;
  if (s.cluster !== undefined && isHostPath(s.cluster)) {
    return `cluster ${JSON.stringify(s.cluster)} is a path, and a daemon reads no path of its machine for a client: send the cluster file (launcher up --cluster FILE sends it when this machine has it) or name one of the daemon's own clusters`;
  }
  return undefined;
}

/** Why each table of a client's cluster file is refused: it sets how the daemon's own processes run. */
const REFUSED_TABLES: Readonly<Record<string, string>> = {
  ssh: "SSH runs as the daemon's user on the daemon's machine: its config, identity, known_hosts and options (ProxyCommand, LocalCommand) would read the daemon's files and run commands there",
  docker: "its arguments (--privileged, -v /:/host) decide what the daemon's containers may do on the nodes",
};

/**
 * The diagnostics that refuse what a client's cluster file may not set: [ssh] and [docker], each
 * key at its line (the table's header when it is empty). A file that is not TOML is left to the
 * cluster parser, whose errors name it.
 */
export function clusterFileProblems(file: string, text: string): Diagnostic[] {
  const parsed = parseTomlDocument(file, text);
  if (!parsed.ok) return [];
  const doc = parsed.doc;
  return Object.entries(REFUSED_TABLES).flatMap(([table, why]) => {
    const value = doc.value[table];
    if (value === undefined) return [];
    const keys = typeof value === "object" && value !== null && !Array.isArray(value) ? Object.keys(value) : [];
    const hint = `leave [${table}] out of the file sent: a client cannot set how the daemon's SSH/Docker run; configure the daemon's own cluster file (its first --cluster), whose [ssh] and [docker] apply to clusters clients send`;
    if (keys.length === 0) return [error(doc.locateKey([table]), `[${table}] is not accepted in a cluster file sent to a daemon: ${why}`, hint)];
    return keys.map((k) => error(doc.locateKey([table, k]), `${table}.${k} is not accepted in a cluster file sent to a daemon: ${why}`, hint));
  });
}

/**
 * The cluster a submission boots on: the file it sent (checked, named unlike the daemon's own,
 * with the daemon's [ssh] and [docker]), else one of the daemon's own by name, else its default.
 */
export function submittedCluster(s: UpSubmission, scope: DaemonScope): Cluster {
  const [first] = scope.own;
  if (first === undefined) throw new Error("a daemon watches at least one cluster of its own");
  if (s.cluster_file !== undefined) {
    const { file, text } = s.cluster_file;
    const refused = clusterFileProblems(file, text);
    if (refused.length > 0) throw new UserError(`cluster file ${file} sets how the daemon's SSH or Docker run, which a client may not`, "remove the tables named above from the file, then up again", refused);
    const parsed = parseCluster(file, composeUploaded(text, first));
    if (parsed.cluster === undefined || hasErrors(parsed.diagnostics)) throw new UserError(`cluster file ${file} has errors`, undefined, parsed.diagnostics);
    const name = parsed.cluster.name;
    if (scope.own.some((c) => c.name === name)) {
      throw new UserError(
        `cluster file ${file} is named ${JSON.stringify(name)}, as one of the daemon's own clusters is: a client's file never stands for the daemon's own`,
        `to use the daemon's, send --cluster ${name} from a machine without such a file (or LAUNCHER_DAEMON with no --cluster for its default); to send yours, give it another name (name = "...")`,
      );
    }
    return parsed.cluster;
  }
  if (s.cluster === undefined) return first;
  const own = scope.own.find((c) => c.name === s.cluster);
  if (own === undefined) {
    throw new UserError(`the daemon has no cluster named ${JSON.stringify(s.cluster)}: its clusters are ${scope.own.map((c) => c.name).join(", ")}`, "name one of them, or send your cluster file (launcher up --cluster FILE sends it when this machine has it)");
  }
  return own;
}

/** The recipes a submission resolves from: the files the client sent, then the daemon's catalogue by name. */
export const submittedRecipes = (s: UpSubmission, scope: DaemonScope): RecipeSource => uploadedSource(s.recipes ?? [], scope.catalogue);
