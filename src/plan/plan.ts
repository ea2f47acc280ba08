import { error, flagLoc, type Diagnostic } from "../config/diagnostic.js";
import { DEPLOYMENT_NAME, kindProblem } from "../config/kinds.js";
import { MAX_REMOTE_COMMAND_BYTES, remoteCommandBytes } from "../config/shell-words.js";
import type { Cluster, ClusterNode } from "../cluster/cluster.js";
import type { EngineAdapter, RankCommand, StartOrder } from "../engine/adapter.js";
import { adapterOf, engineAdapter, ENGINES, type EngineRegistry } from "../engine/registry.js";
import { apiKeyOf, engineInputDiagnostics, findAnyFlag, flagsOfWords, withoutApiKeyFlags } from "../recipe/args.js";
import { apiAddress, type ApiAddress } from "./api-address.js";
import type { Recipe } from "../recipe/recipe.js";
import { recipeHash } from "../recipe/resolve.js";
import { fabricGaps, type FabricGap } from "../cluster/fabric-env.js";
import { ENV_FROM_STDIN } from "../remote/docker.js";
import { containerName, encodeLabels, type RestartPolicy } from "../contract/deployment.js";

export interface MountSpec {
  readonly host: string;
  readonly container: string;
  readonly read_only: boolean;
}

/** Everything one node runs for a deployment. */
export interface NodeSpec {
  readonly rank: number;
  readonly role: "head" | "worker";
  readonly node: string;
  readonly host: string;
  readonly image: string;
  readonly container: string;
  readonly env: Readonly<Record<string, string>>;
  readonly mounts: readonly MountSpec[];
  readonly labels: Readonly<Record<string, string>>;
  /**
   * Exactly the command that runs on the node, one element per argument. `env` is not in it: it
   * reaches `docker run --env-file /dev/stdin` on the command's stdin (src/config/env-file.ts).
   */
  readonly argv: readonly string[];
}

export interface Plan {
  readonly deployment: string;
  readonly lane?: string;
  /** `up --restart`: the daemon recreates the group when it fails after it was ready. */
  readonly restart?: RestartPolicy;
  readonly recipe: Recipe;
  readonly recipe_hash: string;
  readonly served_model: string;
  readonly cluster: string;
  readonly endpoint: string;
  readonly master_addr: string;
  readonly master_port: number;
  readonly api_port: number;
  readonly nodes: readonly NodeSpec[];
  /** Node names in the order their containers start (`start`: at once, in rank order). */
  readonly start_order: readonly string[];
  /** Whether the head's container starts before the workers', after them, or with them (the engine's). */
  readonly start: StartOrder;
  /**
   * The key the engine's API demands (from the recipe's args or env), which readiness, drain and
   * the gateway send. A secret: render.ts redacts it from everything the plan prints.
   */
  readonly api_key?: string;
  /** Nodes without a fabric IP or interface: a warning at `plan`, an error at `up`. */
  readonly fabric_gaps: readonly FabricGap[];
}

export interface PlanOptions {
  /** Deployment name; default: the recipe's id (so two recipes in one lane never share a name). */
  readonly deployment?: string;
  /** Which cluster nodes to use, head first; default: the first required_nodes in file order. */
  readonly nodes?: readonly string[];
  readonly lane?: string;
  readonly restart?: RestartPolicy;
  /** API port on the head; default: the cluster's api_port. */
  readonly apiPort?: number;
  /** The engines a recipe's `engine` may name; default: every engine launcher has (a test adds its own). */
  readonly engines?: EngineRegistry;
}

export type PlanResult = { ok: true; plan: Plan } | { ok: false; diagnostics: Diagnostic[] };

/** The node of rank 0. */
export const headOf = (plan: Pick<Plan, "nodes">): string | undefined => plan.nodes.find((n) => n.rank === 0)?.node;

/**
 * The plan's `docker run`s in the steps they are issued: each step's together, a step only once
 * the one before it has every container running (at once: one step of every node, head first).
 */
export function startSteps(plan: Pick<Plan, "nodes" | "start_order" | "start">): string[][] {
  const head = headOf(plan);
  const workers = plan.start_order.filter((n) => n !== head);
  const heads = head === undefined ? [] : [head];
  const steps = { "at once": [[...heads, ...workers]], "head first": [heads, workers], "workers first": [workers, heads] }[plan.start];
  return steps.filter((step) => step.length > 0);
}

/** `~` in a host path is the SSH user's home on that node, never this machine's. */
export function expandHome(hostPath: string, node: ClusterNode): string | undefined {
  if (hostPath !== "~" && !hostPath.startsWith("~/")) return hostPath;
  if (node.home === undefined) return undefined;
  return node.home.replace(/\/+$/, "") + hostPath.slice(1);
}

/** What clients call the model: the engine's served-name flag in args, else the model. */
export function servedModelName(recipe: Recipe, engine: EngineAdapter | undefined = adapterOf(recipe.engine)): string {
  const flag = engine === undefined ? undefined : findAnyFlag(flagsOfWords(recipe.args, engine.flags), engine.modelFlags.servedName);
  return flag?.value ?? recipe.model;
}

function pickNodes(cluster: Cluster, count: number, names: readonly string[] | undefined): { ok: true; nodes: ClusterNode[] } | { ok: false; message: string; hint: string } {
  if (names === undefined) return { ok: true, nodes: cluster.nodes.slice(0, count) };
  const known = cluster.nodes.map((n) => n.name);
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length > 0) return { ok: false, message: `no node ${unknown.join(", ")} in the cluster`, hint: `the cluster's nodes are ${known.join(", ")}` };
  if (new Set(names).size !== names.length) return { ok: false, message: `a node is named twice in ${names.join(",")}`, hint: "name each node once" };
  if (names.length !== count) return { ok: false, message: `the recipe needs ${count} nodes, ${names.length} were named (${names.join(", ")})`, hint: `name exactly ${count}` };
  // Ranks follow the order given: the first node named is the head.
  return { ok: true, nodes: names.map((name, rank) => ({ ...(cluster.nodes.find((n) => n.name === name) as ClusterNode), rank })) };
}

/** What every node's container shares: worked out once from the recipe, the cluster and the options. */
interface PlanContext {
  readonly recipe: Recipe;
  readonly cluster: Cluster;
  readonly options: PlanOptions;
  readonly engine: EngineAdapter;
  readonly deployment: string;
  readonly nodes: readonly ClusterNode[];
  readonly apiPort: number;
  readonly masterAddr: string;
  readonly api: ApiAddress;
  /** The recipe's args without the key flags, and the key as the engine's env gets it. */
  readonly args: readonly string[];
  readonly keyEnv: Readonly<Record<string, string>>;
  readonly hash: string;
  readonly served: string;
}

/** A problem of the recipe as a whole: its file, line 1 (a recipe made another way has no positions). */
const recipeTop = (recipe: Recipe): { file: string; line: number; col: number } => ({ file: recipe.file, line: 1, col: 1 });
const clusterTop = (cluster: Cluster): { file: string; line: number; col: number } => ({ file: cluster.file, line: 1, col: 1 });

/** The nodes the deployment runs on, head first, or the one diagnostic saying why there are none. */
function planNodes(recipe: Recipe, cluster: Cluster, options: PlanOptions): { ok: true; nodes: ClusterNode[] } | { ok: false; diagnostic: Diagnostic } {
  if (cluster.nodes.length < recipe.required_nodes) {
    return { ok: false, diagnostic: error(clusterTop(cluster), `recipe ${recipe.id} needs ${recipe.required_nodes} nodes, the cluster has ${cluster.nodes.length}`, "add nodes to the cluster file or pick a recipe for fewer nodes") };
  }
  const picked = pickNodes(cluster, recipe.required_nodes, options.nodes);
  // Nodes named with --nodes are wrong on the command line, not in the cluster file.
  return picked.ok ? picked : { ok: false, diagnostic: error(options.nodes === undefined ? clusterTop(cluster) : flagLoc("--nodes"), picked.message, picked.hint) };
}

/** --name and --lane become container names and labels: the same kind check as the files'. */
function nameDiagnostics(recipe: Recipe, deployment: string, options: PlanOptions): Diagnostic[] {
  const named = [["--name", "deployment name (--name)", deployment], ["--lane", "lane name (--lane)", options.lane]] as const;
  return named.flatMap(([flag, field, value]) => {
    const problem = value === undefined ? undefined : kindProblem(DEPLOYMENT_NAME, field, value);
    // A bad --name or --lane is the flag's fault; a recipe id unfit for a name is the recipe's.
    const at = flag === "--name" && options.deployment === undefined ? recipeTop(recipe) : flagLoc(flag);
    return problem === undefined ? [] : [error(at, problem.message, problem.hint)];
  });
}

/** The context every node's spec is made from, with the problems of the recipe and the names. */
function planContext(recipe: Recipe, cluster: Cluster, options: PlanOptions, engine: EngineAdapter, nodes: readonly ClusterNode[]): { context: PlanContext; diagnostics: Diagnostic[] } {
  const deployment = options.deployment ?? recipe.id;
  const head = nodes[0] as ClusterNode;
  const apiPort = options.apiPort ?? cluster.api_port;
  // A recipe is checked where it is resolved (with positions); one made another way still is.
  const top = recipeTop(recipe);
  const inputs = engineInputDiagnostics(recipe, engine, { flag: () => top, env: () => top, mount: () => top }).filter((d) => d.severity === "error");
  // The key goes to the engine in its env, never in its (or ssh's, or docker's) arguments; a
  // key flag wins over the env variable, as in the engine (EngineFlags.apiKey).
  const keyed = withoutApiKeyFlags(recipe.args, engine.flags);
  const context: PlanContext = {
    recipe,
    cluster,
    options,
    engine,
    deployment,
    nodes,
    apiPort,
    masterAddr: head.fabric_ip ?? head.address ?? head.host,
    api: apiAddress(cluster, head, apiPort),
    args: keyed.args,
    keyEnv: keyed.key === undefined ? {} : { [engine.flags.apiKey.env]: keyed.key },
    hash: recipeHash(recipe),
    served: servedModelName(recipe, engine),
  };
  return { context, diagnostics: [...nameDiagnostics(recipe, deployment, options), ...inputs] };
}

/** The recipe's mounts on `node` (`~` is that node's home); one it cannot place is a diagnostic. */
function nodeMounts(ctx: PlanContext, node: ClusterNode, diagnostics: Diagnostic[]): MountSpec[] {
  return ctx.recipe.extra_mounts.flatMap((m) => {
    const host = expandHome(m.host, node);
    if (host !== undefined) return [{ host, container: m.container, read_only: m.read_only }];
    diagnostics.push(error(clusterTop(ctx.cluster), `node ${node.name}: mount ${m.host} uses ~ but the node's user is unknown`, `set user (or home) for ${node.name} in the cluster file`));
    return [];
  });
}

/** The labels of `node`'s container: what status, down and the gateway read back. */
function nodeLabels(ctx: PlanContext, node: ClusterNode, role: NodeSpec["role"]): Record<string, string> {
  const { options } = ctx;
  return encodeLabels({
    deployment: ctx.deployment,
    recipe: ctx.recipe.id,
    recipe_hash: ctx.hash,
    served_model: ctx.served,
    rank: node.rank,
    role,
    node: node.name,
    nnodes: ctx.nodes.length,
    nodes: ctx.nodes.map((n) => n.name),
    engine: ctx.engine.name,
    cluster: ctx.cluster.name,
    endpoint: ctx.api.endpoint,
    ...(options.lane === undefined ? {} : { lane: options.lane }),
    ...(options.restart === undefined ? {} : { restart: options.restart }),
  });
}

/** The one `docker run` of a node: every option before `--`, then the image and its command. */
function dockerRunArgv(ctx: PlanContext, parts: { container: string; labels: Readonly<Record<string, string>>; env: Readonly<Record<string, string>>; mounts: readonly MountSpec[]; cmd: RankCommand }): string[] {
  const { recipe, cluster } = ctx;
  const [entry, ...entryArgs] = parts.cmd.entrypoint ?? [];
  return [
    "docker", "run", "--detach",
    "--name", parts.container,
    ...Object.entries(parts.labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]),
    ...cluster.run_args,
    ...cluster.extra_args,
    "--shm-size", recipe.shm_size,
    // docker/cli opts/parse.go parseKeyValueFile os.Opens the path: /dev/stdin is the pipe
    // that SshDocker.run writes the env into, so no value is on any command line.
    ...(Object.keys(parts.env).length === 0 ? [] : ["--env-file", ENV_FROM_STDIN]),
    ...parts.mounts.flatMap((m) => ["--volume", `${m.host}:${m.container}${m.read_only ? ":ro" : ""}`]),
    ...(entry === undefined ? [] : ["--entrypoint", entry]),
    // pflag ends docker run's options at `--` (spf13/pflag flag.go parseArgs), and docker run
    // stops parsing at the image (docker/cli run.go: SetInterspersed(false)): the image and
    // the command after it are never options, whatever they say.
    "--",
    recipe.docker_image,
    ...entryArgs,
    ...parts.cmd.command,
  ];
}

/** Everything `node` runs; its problems (a mount, a command too long) go to `diagnostics`. */
function nodeSpec(ctx: PlanContext, node: ClusterNode, diagnostics: Diagnostic[]): NodeSpec {
  const { recipe, engine, nodes } = ctx;
  const mounts = nodeMounts(ctx, node, diagnostics);
  const cmd = engine.rankCommand({ ...recipe, args: ctx.args }, {
    rank: node.rank,
    nnodes: nodes.length,
    masterAddr: ctx.masterAddr,
    masterPort: ctx.cluster.master_port,
    apiPort: ctx.apiPort,
    apiHost: ctx.api.bind,
    ...(node.fabric_ip === undefined ? {} : { nodeIp: node.fabric_ip }),
    nodes: nodes.map((n) => (n.fabric_ip === undefined ? { name: n.name } : { name: n.name, ip: n.fabric_ip })),
  });
  // The engine's own env first: the recipe's `[env]` overrides it, the fabric env is launcher's.
  // The key goes to rank 0 alone, the one rank that serves the API: an engine may log it (SGLang's
  // server_args line), and a worker has no use for it.
  const keyName = engine.flags.apiKey.env;
  const recipeEnv = node.rank === 0 ? recipe.env : Object.fromEntries(Object.entries(recipe.env).filter(([k]) => k !== keyName));
  const env: Record<string, string> = { ...cmd.env, ...recipeEnv, ...(node.rank === 0 ? ctx.keyEnv : {}) };
  for (const m of recipe.extra_mounts) if (m.env !== undefined) env[m.env] = m.container;
  Object.assign(env, engine.nodeEnv(recipe, node));
  const role = node.rank === 0 ? "head" : "worker";
  const container = containerName(ctx.deployment, node.rank);
  const labels = nodeLabels(ctx, node, role);
  const argv = dockerRunArgv(ctx, { container, labels, env, mounts, cmd });
  const bytes = remoteCommandBytes(argv);
  if (bytes > MAX_REMOTE_COMMAND_BYTES) {
    diagnostics.push(
      error(
        recipeTop(recipe),
        `recipe ${recipe.id}: the docker run command for ${node.name} is ${bytes} bytes, more than the ${MAX_REMOTE_COMMAND_BYTES} a node's kernel takes as one command (E2BIG)`,
        "shorten the recipe's args, env and mounts (a long JSON value can often go in a file in a mounted folder)",
      ),
    );
  }
  return { rank: node.rank, role, node: node.name, host: node.host, image: recipe.docker_image, container, env, mounts, labels, argv };
}

/** The plan itself, once every node's spec is made without a problem. */
function assemblePlan(ctx: PlanContext, specs: NodeSpec[]): Plan {
  const { recipe, options, engine } = ctx;
  const head = ctx.nodes[0] as ClusterNode;
  const workers = specs.filter((s) => s.rank > 0).map((s) => s.node);
  const apiKey = apiKeyOf(recipe.args, recipe.env, engine.flags);
  const start = engine.startOrder(recipe);
  return {
    deployment: ctx.deployment,
    ...(options.lane === undefined ? {} : { lane: options.lane }),
    ...(options.restart === undefined ? {} : { restart: options.restart }),
    recipe,
    recipe_hash: ctx.hash,
    served_model: ctx.served,
    cluster: ctx.cluster.name,
    endpoint: ctx.api.endpoint,
    master_addr: ctx.masterAddr,
    master_port: ctx.cluster.master_port,
    api_port: ctx.apiPort,
    nodes: specs,
    start_order: start === "workers first" ? [...workers, head.name] : [head.name, ...workers],
    start,
    ...(apiKey === undefined ? {} : { api_key: apiKey }),
    fabric_gaps: fabricGaps(ctx.nodes),
  };
}

/** The pure heart of launcher: a recipe and a cluster in, the exact container of every node out. */
export function planDeployment(recipe: Recipe, cluster: Cluster, options: PlanOptions = {}): PlanResult {
  const picked = planNodes(recipe, cluster, options);
  if (!picked.ok) return { ok: false, diagnostics: [picked.diagnostic] };
  // Validation accepts only the registry's names; a recipe built another way still gets a user error.
  const engine = engineAdapter(recipe.engine, options.engines ?? ENGINES);
  if (engine === undefined) {
    const known = Object.keys(options.engines ?? ENGINES).join(", ");
    return { ok: false, diagnostics: [error(recipeTop(recipe), `recipe ${recipe.id}: no engine "${recipe.engine}"`, `set engine to one of ${known}`)] };
  }
  const { context, diagnostics } = planContext(recipe, cluster, options, engine, picked.nodes);
  const specs = picked.nodes.map((node) => nodeSpec(context, node, diagnostics));
  return diagnostics.length > 0 ? { ok: false, diagnostics } : { ok: true, plan: assemblePlan(context, specs) };
}
