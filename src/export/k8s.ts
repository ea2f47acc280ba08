import type { Cluster, ClusterNode } from "../cluster/cluster.js";
import { UserError } from "../config/errors.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import type { EngineAdapter } from "../engine/adapter.js";
import { expandHome, type Plan } from "../plan/plan.js";
import { API_KEY_SECRET_KEY, buildK8sExport, secretEnvNames, type FabricAccess, type K8sExport, type K8sExportOptions } from "./lws.js";
import { manifestYaml } from "./manifest.js";
import { FACT_VARS } from "./fabric-start.js";
import { exportProblems, type CrdCheck } from "./validate.js";

export interface K8sExportResult {
  readonly manifest: K8sExport;
  readonly yaml: string;
  /** What the user must know or do before applying it (a Secret to create, a network to provide). */
  readonly notes: readonly string[];
}

/** The value every node has for a field, when they all have the same one. */
function shared(nodes: readonly ClusterNode[], of: (n: ClusterNode) => string | undefined): string | undefined {
  const values = new Set(nodes.map(of));
  const [only] = values;
  return values.size === 1 ? only : undefined;
}

/**
 * The cluster file's fabric values that every node has alike: the start script keeps
 * them, as detection keeps the cluster file's values (src/cluster/detect.ts); a value that differs
 * between nodes (the GID index, often) or that no file gives is detected in the pod. On the pod
 * network the node's interface is not the pod's: the pod finds its own (./fabric-start.ts).
 */
export function sharedFabric(nodes: readonly ClusterNode[], network: "host" | "pod" = "host"): Record<string, string> {
  const out: Record<string, string> = {};
  const iface = network === "host" ? shared(nodes, (n) => n.fabric_iface) : undefined;
  const hcas = shared(nodes, (n) => (n.hca.length === 0 ? undefined : n.hca.join(",")));
  const gid = shared(nodes, (n) => (n.gid_index === undefined ? undefined : String(n.gid_index)));
  if (iface !== undefined) out[FACT_VARS.iface] = iface;
  if (hcas !== undefined) out[FACT_VARS.hcas] = hcas;
  if (gid !== undefined) out[FACT_VARS.gid] = gid;
  return out;
}

/** What `~` stands for on every node, when it is the same folder on each. */
export const sharedHome = (nodes: readonly ClusterNode[]): string | undefined => shared(nodes, (n) => expandHome("~", n));

/**
 * The docker run settings the pod spec says otherwise (./lws.ts): the GPUs as a resource limit,
 * the node's network as hostNetwork, /dev/infiniband as a privileged pod or a device plugin, the
 * memlock limit as CAP_IPC_LOCK. Every other setting has no pod field the export fills.
 */
const CARRIED: readonly string[] = ["--gpus all", "--network host", "--network=host", "--device /dev/infiniband", "--device=/dev/infiniband", "--ulimit memlock=-1", "--ulimit=memlock=-1"];

/**
 * The cluster file's docker run settings (run_args, extra_args) the export leaves out, each as
 * written: an option with the words after it up to the next option (every word there is an
 * option or its value: launcher puts the image after them).
 */
export function droppedRunArgs(args: readonly string[]): string[] {
  const settings: string[][] = [];
  for (const word of args) {
    const last = settings.at(-1);
    if (word.startsWith("-") || last === undefined) settings.push([word]);
    else last.push(word);
  }
  return settings.map((s) => s.join(" ")).filter((s) => !CARRIED.includes(s));
}

/** The notes that go with an export: the Secrets to make, the pod network's limits. */
function notesOf(plan: Plan, engine: EngineAdapter, options: K8sExportOptions): string[] {
  const notes: string[] = [];
  const ns = options.namespace === undefined ? "" : ` -n ${options.namespace}`;
  if (plan.api_key !== undefined && options.keySecret !== undefined) {
    notes.push(`the engine's API key is read from Secret ${options.keySecret} (key ${API_KEY_SECRET_KEY}): create it first, e.g. kubectl create secret generic ${options.keySecret}${ns} --from-literal=${API_KEY_SECRET_KEY}=KEY`);
  }
  const secrets = secretEnvNames(plan, engine);
  if (secrets.length > 0 && options.envSecret !== undefined) {
    const literals = secrets.map((k) => `--from-literal=${k}=...`).join(" ");
    notes.push(`the recipe's env ${secrets.join(", ")} ${secrets.length === 1 ? "is a secret, read" : "are secrets, read"} from Secret ${options.envSecret} (a key per variable), never written in the export: create it first, e.g. kubectl create secret generic ${options.envSecret}${ns} ${literals}`);
  }
  const dropped = droppedRunArgs(options.runArgs ?? []);
  if (dropped.length > 0) {
    notes.push(`the cluster file's docker run settings ${dropped.join(", ")} are left out: a pod spec has no field for them (the export carries only the GPUs, the host network, /dev/infiniband and the memlock limit), so the container runtime's defaults apply; edit the YAML (e.g. resources.limits.memory for --memory) where one matters`);
  }
  if (engine.generationProbe === undefined) notes.push(`engine ${engine.name}'s image has no generation probe: the leader's liveness is its health check (${engine.healthPath}) alone, so Kubernetes does not restart an engine that answers it but generates nothing (launcher serve's --probe-bound finds one)`);
  if (options.fabric.network === "pod") notes.push("--network pod: the pod network must reach the RoCE fabric (e.g. a Multus macvlan on the fabric port), or NCCL falls back to TCP; each pod exports its fabric interface and address only for an interface of its own that holds a RoCE address, and says so in its log when none does");
  return notes;
}

/**
 * The export, checked: built from the plan, validated against launcher's schema of LWS's API (and
 * the cluster's CRD, given one) and the core API's, rendered as YAML. One that does not validate
 * is launcher's bug, not the user's: it throws a plain Error naming every problem, and nothing is
 * written. Against a cluster's CRD it may also be an LWS older than the API launcher writes (v1
 * as of LWS v0.10): the message says so.
 */
export function exportK8s(plan: Plan, engine: EngineAdapter, options: K8sExportOptions, header: string, crd?: CrdCheck): K8sExportResult {
  const manifest = buildK8sExport(plan, engine, options);
  const problems = exportProblems(manifest, crd);
  if (problems.length > 0) {
    const older = crd === undefined ? "" : `\n(launcher writes LeaderWorkerSet v1 as LWS v0.10 defines it; a problem named only against ${crd.file} may be an older LWS on the cluster)`;
    throw new Error(`the export of ${plan.recipe.id} does not validate:\n${problems.map((p) => `  - ${p}`).join("\n")}${older}`);
  }
  return { manifest, yaml: manifestYaml(manifest, header), notes: notesOf(plan, engine, options) };
}

/** What the user chose on the command line (`launcher export k8s`'s flags, decoded). */
export interface K8sChoices {
  readonly name?: string;
  readonly namespace?: string;
  readonly lane?: string;
  readonly image?: string;
  readonly fabric: FabricAccess;
  readonly claims: Readonly<Record<string, string>>;
  readonly home?: string;
  /** --node-ip-is-fabric: every node's Kubernetes address is its fabric address. */
  readonly nodeIpIsFabric?: boolean;
}

/**
 * The image every pod pulls. Kubernetes pulls from a registry; launcher's own way to put an image
 * on the nodes (built there, or pushed node to node) is not one, so an image the recipe builds
 * (docker_image_dir) must be named again, as pushed to a registry.
 */
export function exportImage(plan: Plan, image: string | undefined): string {
  if (image !== undefined) return image;
  if (plan.recipe.docker_image_dir !== undefined) {
    const local = plan.recipe.docker_image;
    throw new UserError(
      `recipe ${plan.recipe.id}: its image ${local} is built by launcher and moved node to node, which Kubernetes cannot use: every pod pulls its image from a registry`,
      `push it to a registry your nodes reach (docker tag ${local} REGISTRY/${local}; docker push REGISTRY/${local}) and pass --image REGISTRY/${local}`,
    );
  }
  return plan.recipe.docker_image;
}

/** The export's options from the plan, its cluster and the user's choices. */
export function exportOptions(plan: Plan, cluster: Cluster, choices: K8sChoices): K8sExportOptions {
  const nodes = plan.nodes.flatMap((n) => cluster.nodes.filter((c) => c.name === n.node));
  const name = choices.name ?? plan.deployment;
  // A pod may land on any node of the cluster, not only on those `plan` picks: what every node of
  // the cluster file shares is what a template may say.
  const home = choices.home ?? sharedHome(cluster.nodes);
  return {
    name,
    ...(choices.namespace === undefined ? {} : { namespace: choices.namespace }),
    service: choices.lane ?? `${name}-api`,
    image: exportImage(plan, choices.image),
    fabric: choices.fabric,
    gpusPerPod: nodes[0]?.gpus ?? 1,
    sharedFabric: sharedFabric(cluster.nodes, choices.fabric.network),
    startupSeconds: seconds(DEFAULTS.upTimeout),
    keySecret: `${name}-engine-key`,
    envSecret: `${name}-env`,
    runArgs: [...cluster.run_args, ...cluster.extra_args],
    claims: choices.claims,
    ...(home === undefined ? {} : { home }),
    ...(choices.nodeIpIsFabric === true ? { nodeIpIsFabric: true } : {}),
  };
}

/** The comment over the YAML: what it is, and how to apply it. */
export const exportHeader = (ref: string, plan: Plan, engine: EngineAdapter, namespace: string | undefined): string =>
  ` launcher export k8s ${ref}: recipe ${plan.recipe.id}, ${plan.nodes.length} pod(s), engine ${engine.name}\n apply: kubectl apply -f FILE${namespace === undefined ? "" : ` -n ${namespace}`}`;
