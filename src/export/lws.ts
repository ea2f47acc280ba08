import { UserError } from "../config/errors.js";
import { isSecretEnvName } from "../config/secret-env.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import type { EngineAdapter } from "../engine/adapter.js";
import type { Plan } from "../plan/plan.js";
import { POD_IP, POD_NAME, POD_NAMESPACE, templateCommands, type TemplateCommand } from "./commands.js";
import { escapeExpansion, reference } from "./expansion.js";
import { fabricStartScript, START_SCRIPT_NAME } from "./fabric-start.js";
import { recipeVolumes, shmVolume, type MountChoice, type PodVolume } from "./volumes.js";

/** How the pods reach the RoCE fabric. */
export interface FabricAccess {
  /** The node's network (default on Sparks: NCCL, Gloo and the rendezvous use ports of their own), or the pod network. */
  readonly network: "host" | "pod";
  /** An RDMA device plugin's extended resource (e.g. rdma/rdma_shared_device_a); absent: /dev/infiniband from the node, privileged. */
  readonly rdmaResource?: string;
}

export interface K8sExportOptions extends MountChoice {
  /** The LeaderWorkerSet's name (LWS also names its headless Service and the pods' subdomain so). */
  readonly name: string;
  readonly namespace?: string;
  /** The Service in front of the leader's OpenAI port. */
  readonly service: string;
  /** The image every pod pulls, from a registry. */
  readonly image: string;
  readonly fabric: FabricAccess;
  readonly gpusPerPod: number;
  /** The cluster file's fabric values that every node shares (FACT_VARS -> value): the start script keeps them. */
  readonly sharedFabric: Readonly<Record<string, string>>;
  /** How long a boot may take before the leader counts as failed (launcher's `up --timeout`). */
  readonly startupSeconds: number;
  /** The Secret holding the engine's API key, when the recipe sets one. */
  readonly keySecret?: string;
  /** The cluster file's docker run settings (run_args, then extra_args), for the notes on what the pod spec leaves out. */
  readonly runArgs?: readonly string[];
  /** The Secret holding the env whose names say they are secrets (src/config/secret-env.ts), one key per variable. */
  readonly envSecret?: string;
  /**
   * Every node's Kubernetes address is its fabric address (k3s --node-ip): each pod checks it at
   * start, and an engine may listen on its pod's IP (RankContext.nodeAddressIsFabric).
   */
  readonly nodeIpIsFabric?: boolean;
}

export interface K8sExport {
  readonly lws: Record<string, unknown>;
  readonly service: Record<string, unknown>;
}

/** LWS's pod labels (api/leaderworkerset/v1/leaderworkerset_types.go: SetNameLabelKey, WorkerIndexLabelKey). */
export const LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name";
export const LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index";
export const API_KEY_SECRET_KEY = "api-key";
const HTTP = "http";
const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Names Kubernetes takes: DNS-1035 labels (a Service's name is one; LWS's pods' names start with the set's). */
function checkNames(options: K8sExportOptions): void {
  const names: [string, string, string | undefined][] = [
    ["the LeaderWorkerSet's name", "--name", options.name],
    ["the Service's name", "--lane", options.service],
    ["the namespace", "--namespace", options.namespace],
  ];
  for (const [what, flag, value] of names) {
    if (value !== undefined && (!DNS_LABEL.test(value) || value.length > 63)) {
      throw new UserError(`${what} ${value} is not a name Kubernetes takes: a DNS label (lower-case letters, digits and '-', starting with a letter, at most 63)`, `pass ${flag} with such a name`);
    }
  }
  if (options.service === options.name) {
    throw new UserError(`--lane ${options.service}: LWS gives the LeaderWorkerSet's own headless Service that name`, "pass another --lane, or another --name");
  }
  // On the pod network a pod's IP is the pod's, never its node's address.
  if (options.nodeIpIsFabric === true && options.fabric.network !== "host") {
    throw new UserError("--node-ip-is-fabric: a pod's IP is its node's address only on the node's network, and --network pod gives each pod an address of its own", "drop --network pod (host networking is the default), or drop --node-ip-is-fabric");
  }
}

/** The env of a plan that goes to the env Secret: the names that say they hold secrets, never the engine's own. */
export function secretEnvNames(plan: Plan, engine: EngineAdapter): string[] {
  const keyEnv = engine.flags.apiKey.env;
  const names = plan.nodes.flatMap((n) => Object.keys(n.env)).filter((k) => !engine.managedEnv.includes(k) && !(plan.api_key !== undefined && k === keyEnv) && isSecretEnvName(k));
  return [...new Set(names)].sort();
}

/** The container's env: the downward API's pod IP, the cluster's shared fabric values, the plan's env (not the per-node keys, a secret's from the env Secret), the key from its Secret. */
function containerEnv(plan: Plan, engine: EngineAdapter, rank: number, options: K8sExportOptions, argv: readonly string[]): Record<string, unknown>[] {
  const node = plan.nodes[rank];
  if (node === undefined) throw new Error(`plan has no rank ${rank}`);
  const keyEnv = engine.flags.apiKey.env;
  const planned = Object.entries(node.env).filter(([k]) => !engine.managedEnv.includes(k) && !(plan.api_key !== undefined && k === keyEnv));
  // A leader that names its workers does so after its own pod (./commands.ts workerHost).
  const named = !argv.some((w) => w.includes(reference(POD_NAME))) ? [] : [
    { name: POD_NAME, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    { name: POD_NAMESPACE, valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
  ];
  return [
    { name: POD_IP, valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    ...named,
    ...Object.entries(options.sharedFabric).map(([name, value]) => ({ name, value: escapeExpansion(value) })),
    ...planned.map(([name, value]) => (options.envSecret !== undefined && isSecretEnvName(name) ? { name, valueFrom: { secretKeyRef: { name: options.envSecret, key: name } } } : { name, value: escapeExpansion(value) })),
    ...(plan.api_key === undefined || options.keySecret === undefined ? [] : [{ name: keyEnv, valueFrom: { secretKeyRef: { name: options.keySecret, key: API_KEY_SECRET_KEY } } }]),
  ];
}

/**
 * Seconds the kubelet gives a generation probe past its own bound before it ends it: the program
 * ends itself at the bound (the shell one within about 2 s past it, src/engine/generation-probe.ts)
 * and says why, and its interpreter's start is not the engine's time.
 */
const PROBE_EXEC_GRACE_SECONDS = 5;

/** Failed probes in a row that restart the group: a second confirms the first, as the daemon's rule does (src/supervise/generation.ts wedgedOf); the comment below says "a second". */
const WEDGE_CONFIRMED_AFTER = 2;

/**
 * The leader's liveness as launcher serve's generation probe (src/supervise/generation.ts): a
 * one-token completion every --probe-every, failed when no token came within --probe-bound (the
 * program's own bound, src/engine/generation-probe.ts), and a second failure in a row confirms
 * it, as the daemon restarts only a confirmed wedge. An exec probe, since an httpGet probe sends
 * no body; its command is expanded as a container's is (its words are escaped alike), from the
 * env's plain values (kubernetes/kubernetes pkg/kubelet/prober/prober.go runProbe:
 * ExpandContainerCommandOnlyStatic), and its timeoutSeconds holds since Kubernetes 1.20
 * (Kubernetes docs, "Configure Liveness, Readiness and Startup Probes": timeoutSeconds). It runs
 * in the container, with its env: the engine's address (the pod's IP, where the leader's API
 * binds: ./commands.ts) and its key from the Secret are read there. As the daemon's, it sends no
 * probe when the engine's generated-token counter rose since its last run: a busy engine is not
 * judged by a probe that waits its turn.
 */
function generationLiveness(plan: Plan, engine: EngineAdapter, options: K8sExportOptions): Record<string, unknown> | undefined {
  if (engine.generationProbe === undefined) return undefined;
  const bound = seconds(DEFAULTS.probeBound);
  const keyEnv = plan.api_key !== undefined && options.keySecret !== undefined ? engine.flags.apiKey.env : undefined;
  const names = engine.engineMetrics?.generationTokens ?? [];
  const counter = names.length === 0 ? {} : { counter: { path: engine.metricsPath, names } };
  const command = engine.generationProbe({ hostEnv: POD_IP, port: plan.api_port, ...(keyEnv === undefined ? {} : { keyEnv }), servedModel: plan.served_model, boundSeconds: bound, ...counter });
  return { exec: { command: command.map(escapeExpansion) }, periodSeconds: seconds(DEFAULTS.probeEvery), timeoutSeconds: bound + PROBE_EXEC_GRACE_SECONDS, failureThreshold: WEDGE_CONFIRMED_AFTER };
}

/** Written over a generation liveness probe in the YAML (./manifest.ts): what the long program does. */
export const GENERATION_LIVENESS_COMMENT = [
  ` livenessProbe: launcher serve's generation probe, run in the container. Every ${seconds(DEFAULTS.probeEvery)} s it sends`,
  " a one-token completion to the pod's IP (with the engine's key, if any, from the env), unless",
  ` the engine's token counter rose since its last run. No token within ${seconds(DEFAULTS.probeBound)} s fails it: an engine`,
  " can answer its health check and generate nothing. A second failure in a row restarts the group.",
].join("\n");

/**
 * The leader's probes, launcher's readiness made Kubernetes': 200 on the engine's healthPath. A boot
 * may take as long as `up --timeout` allows (startupProbe; liveness and readiness wait for it:
 * Kubernetes docs, "Configure Liveness, Readiness and Startup Probes"); after it, liveness fails a
 * leader whose engine completes no token (generationLiveness, above), or, where its image has no
 * generation probe, whose engine stopped answering its health check, and LWS recreates the group.
 */
function probes(plan: Plan, engine: EngineAdapter, options: K8sExportOptions): Record<string, unknown> {
  const get = { httpGet: { path: engine.healthPath, port: HTTP } };
  return {
    startupProbe: { ...get, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: Math.max(1, Math.ceil(options.startupSeconds / 10)) },
    readinessProbe: { ...get, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 },
    livenessProbe: generationLiveness(plan, engine, options) ?? { ...get, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
  };
}

/**
 * /dev/infiniband and the lock on memory. `docker run --device /dev/infiniband` (launcher's run_args)
 * puts the devices in the container's device cgroup; Kubernetes has no such field, and a hostPath
 * volume gives the files without the right to open them: without a device plugin only a privileged
 * container opens /dev/infiniband/uverbs*. RDMA registers (pins) memory: CAP_IPC_LOCK lifts
 * RLIMIT_MEMLOCK for it (mlock(2): "privileged process (CAP_IPC_LOCK)"), as `--ulimit memlock=-1` does.
 */
function rdma(fabric: FabricAccess): { volumes: PodVolume[]; security: Record<string, unknown>; resources: Record<string, number> } {
  const security = { capabilities: { add: ["IPC_LOCK"] }, ...(fabric.rdmaResource === undefined ? { privileged: true } : {}) };
  if (fabric.rdmaResource !== undefined) return { volumes: [], security, resources: { [fabric.rdmaResource]: 1 } };
  const ib: PodVolume = { volume: { name: "infiniband", hostPath: { path: "/dev/infiniband", type: "Directory" } }, mount: { name: "infiniband", mountPath: "/dev/infiniband" } };
  return { volumes: [ib], security, resources: {} };
}

/** One pod template: the rank's command under the fabric start script, its env, volumes and limits. */
function podTemplate(plan: Plan, engine: EngineAdapter, role: "leader" | "worker", cmd: TemplateCommand, options: K8sExportOptions): Record<string, unknown> {
  const access = rdma(options.fabric);
  const volumes = [shmVolume(plan.recipe), ...access.volumes, ...recipeVolumes(plan.recipe, options)];
  const limits = { "nvidia.com/gpu": options.gpusPerPod, ...access.resources };
  const container = {
    name: "engine",
    image: options.image,
    command: ["sh", "-c", escapeExpansion(fabricStartScript(engine, plan.recipe, { podIpIsFabric: options.nodeIpIsFabric === true, network: options.fabric.network })), START_SCRIPT_NAME],
    args: cmd.argv,
    env: containerEnv(plan, engine, role === "leader" ? 0 : 1, options, cmd.argv),
    ...(role === "leader" ? { ports: [{ name: HTTP, containerPort: plan.api_port, protocol: "TCP" }] } : {}),
    resources: { limits },
    securityContext: access.security,
    volumeMounts: volumes.map((v) => v.mount),
    ...(role === "leader" ? probes(plan, engine, options) : {}),
  };
  const host = options.fabric.network === "host";
  return {
    metadata: { labels: { "app.kubernetes.io/name": options.name, "app.kubernetes.io/component": role } },
    spec: {
      // A pod on the node's network resolves cluster names (LWS_LEADER_ADDRESS) only with this
      // policy (Kubernetes docs, "DNS for Services and Pods": ClusterFirstWithHostNet).
      ...(host ? { hostNetwork: true, dnsPolicy: "ClusterFirstWithHostNet" } : {}),
      containers: [container],
      volumes: volumes.map((v) => v.volume),
    },
  };
}

/** Checks the env a worker of each rank gets is the one template's (it is, when the plan is rank-blind beyond its fabric). */
function sameWorkerEnv(plan: Plan, engine: EngineAdapter): void {
  const shown = (rank: number): string => JSON.stringify(Object.entries(plan.nodes[rank]?.env ?? {}).filter(([k]) => !engine.managedEnv.includes(k)));
  for (let rank = 2; rank < plan.nodes.length; rank++) {
    if (shown(rank) !== shown(1)) throw new UserError(`recipe ${plan.recipe.id}: rank ${rank}'s env differs from rank 1's beyond the fabric, and a LeaderWorkerSet has one template for every worker`);
  }
}

/** The LeaderWorkerSet and the Service of a plan: pure, not yet validated (./validate.ts). */
export function buildK8sExport(plan: Plan, engine: EngineAdapter, options: K8sExportOptions): K8sExport {
  checkNames(options);
  sameWorkerEnv(plan, engine);
  const commands = templateCommands(plan, engine, { name: options.name, nodeIpIsFabric: options.nodeIpIsFabric === true });
  const size = plan.nodes.length;
  const leader = podTemplate(plan, engine, "leader", commands.leader, options);
  const metadata = {
    name: options.name,
    ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
    labels: { "app.kubernetes.io/name": options.name },
    annotations: { "launcher.recipe": plan.recipe.id, "launcher.recipe-hash": plan.recipe_hash, "launcher.served-model": plan.served_model },
  };
  const lws = {
    apiVersion: "leaderworkerset.x-k8s.io/v1",
    kind: "LeaderWorkerSet",
    metadata,
    spec: {
      replicas: 1,
      startupPolicy: "LeaderCreated",
      // No subGroupPolicy: a Spark pod holds one GPU and the engine's tensor parallel group spans
      // every pod of the group, which is the group LWS already makes (subGroupSize splits a group
      // into smaller ones, for accelerators whose groups are smaller than the set).
      leaderWorkerTemplate: {
        // The engine's --nnodes says this number too, as `plan` writes it (LWS_GROUP_SIZE is the same).
        size,
        restartPolicy: "RecreateGroupOnPodRestart",
        // One pod: LWS makes the leader from the worker template when there is no leader template
        // (kubernetes-sigs/lws pkg/controllers/leaderworkerset_controller.go, the leader StatefulSet's template).
        ...(size === 1 ? { workerTemplate: leader } : { leaderTemplate: leader, workerTemplate: podTemplate(plan, engine, "worker", commands.worker, options) }),
      },
    },
  };
  const service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: options.service, ...(options.namespace === undefined ? {} : { namespace: options.namespace }), labels: { "app.kubernetes.io/name": options.name } },
    spec: {
      type: "ClusterIP",
      selector: { [LWS_NAME_LABEL]: options.name, [LWS_WORKER_INDEX_LABEL]: "0" },
      ports: [{ name: HTTP, port: plan.api_port, targetPort: HTTP, protocol: "TCP" }],
    },
  };
  return { lws, service };
}
