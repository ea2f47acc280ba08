import { error, flagLoc, type Diagnostic } from "../config/diagnostic.js";
import { DEPLOYMENT_NAME, kindProblem } from "../config/kinds.js";
import { MAX_REMOTE_COMMAND_BYTES, remoteCommandBytes } from "../config/shell-words.js";
import type { Cluster, ClusterNode } from "../cluster/cluster.js";
import type { EngineAdapter } from "../engine/adapter.js";
import { adapterOf, engineAdapter, ENGINES, type EngineRegistry } from "../engine/registry.js";
import { apiKeyOf, engineInputDiagnostics, findAnyFlag, flagsOfWords, withoutApiKeyFlags } from "../recipe/args.js";
import { apiAddress } from "./api-address.js";
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
  /** Node names in the order their containers start. */
  readonly start_order: readonly string[];
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

/** The pure heart of launcher: a recipe and a cluster in, the exact container of every node out. */
export function planDeployment(recipe: Recipe, cluster: Cluster, options: PlanOptions = {}): PlanResult {
  const diagnostics: Diagnostic[] = [];
  const clusterLoc = { file: cluster.file, line: 1, col: 1 };
  if (cluster.nodes.length < recipe.required_nodes) {
    return {
      ok: false,
      diagnostics: [error(clusterLoc, `recipe ${recipe.id} needs ${recipe.required_nodes} nodes, the cluster has ${cluster.nodes.length}`, "add nodes to the cluster file or pick a recipe for fewer nodes")],
    };
  }
  const picked = pickNodes(cluster, recipe.required_nodes, options.nodes);
  // Nodes named with --nodes are wrong on the command line, not in the cluster file.
  if (!picked.ok) return { ok: false, diagnostics: [error(options.nodes === undefined ? clusterLoc : flagLoc("--nodes"), picked.message, picked.hint)] };
  const nodes = picked.nodes;
  const head = nodes[0] as ClusterNode;
  // Validation accepts only the registry's names; a recipe built another way still gets a user error.
  const engine = engineAdapter(recipe.engine, options.engines ?? ENGINES);
  if (engine === undefined) {
    const known = Object.keys(options.engines ?? ENGINES).join(", ");
    return { ok: false, diagnostics: [error({ file: recipe.file, line: 1, col: 1 }, `recipe ${recipe.id}: no engine "${recipe.engine}"`, `set engine to one of ${known}`)] };
  }
  const deployment = options.deployment ?? recipe.id;
  // --name and --lane become container names and labels: the same kind check as the files'.
  for (const [flag, field, value] of [["--name", "deployment name (--name)", deployment], ["--lane", "lane name (--lane)", options.lane]] as const) {
    const problem = value === undefined ? undefined : kindProblem(DEPLOYMENT_NAME, field, value);
    // A bad --name or --lane is the flag's fault; a recipe id unfit for a name is the recipe's.
    const at = flag === "--name" && options.deployment === undefined ? { file: recipe.file, line: 1, col: 1 } : flagLoc(flag);
    if (problem !== undefined) diagnostics.push(error(at, problem.message, problem.hint));
  }
  const apiPort = options.apiPort ?? cluster.api_port;
  const masterAddr = head.fabric_ip ?? head.address ?? head.host;
  const api = apiAddress(cluster, head, apiPort);
  const endpoint = api.endpoint;
  // A recipe is checked where it is resolved (with positions); one made another way still is.
  const top = { file: recipe.file, line: 1, col: 1 };
  diagnostics.push(...engineInputDiagnostics(recipe, engine, { flag: () => top, env: () => top, mount: () => top }).filter((d) => d.severity === "error"));
  // The key goes to the engine in its env, never in its (or ssh's, or docker's) arguments; a
  // key flag wins over the env variable, as in the engine (EngineFlags.apiKey).
  const keyed = withoutApiKeyFlags(recipe.args, engine.flags);
  const keyEnv: Record<string, string> = keyed.key === undefined ? {} : { [engine.flags.apiKey.env]: keyed.key };
  const hash = recipeHash(recipe);
  const served = servedModelName(recipe, engine);

  const specs: NodeSpec[] = [];
  for (const node of nodes) {
    const mounts: MountSpec[] = [];
    for (const m of recipe.extra_mounts) {
      const host = expandHome(m.host, node);
      if (host === undefined) {
        diagnostics.push(
          error(clusterLoc, `node ${node.name}: mount ${m.host} uses ~ but the node's user is unknown`, `set user (or home) for ${node.name} in the cluster file`),
        );
        continue;
      }
      mounts.push({ host, container: m.container, read_only: m.read_only });
    }
    const cmd = engine.rankCommand({ ...recipe, args: keyed.args }, {
      rank: node.rank,
      nnodes: nodes.length,
      masterAddr,
      masterPort: cluster.master_port,
      apiPort,
      apiHost: api.bind,
      ...(node.fabric_ip === undefined ? {} : { nodeIp: node.fabric_ip }),
      nodes: nodes.map((n) => (n.fabric_ip === undefined ? { name: n.name } : { name: n.name, ip: n.fabric_ip })),
    });
    // The engine's own env first: the recipe's `[env]` overrides it, the fabric env is launcher's.
    const env: Record<string, string> = { ...cmd.env, ...recipe.env, ...keyEnv };
    for (const m of recipe.extra_mounts) if (m.env !== undefined) env[m.env] = m.container;
    Object.assign(env, engine.nodeEnv(recipe, node));

    const role = node.rank === 0 ? "head" : "worker";
    const container = containerName(deployment, node.rank);
    const labels = encodeLabels({
      deployment,
      recipe: recipe.id,
      recipe_hash: hash,
      served_model: served,
      rank: node.rank,
      role,
      node: node.name,
      nnodes: nodes.length,
      nodes: nodes.map((n) => n.name),
      engine: engine.name,
      cluster: cluster.name,
      endpoint,
      ...(options.lane === undefined ? {} : { lane: options.lane }),
      ...(options.restart === undefined ? {} : { restart: options.restart }),
    });
    const [entry, ...entryArgs] = cmd.entrypoint ?? [];
    const argv = [
      "docker", "run", "--detach",
      "--name", container,
      ...Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]),
      ...cluster.run_args,
      ...cluster.extra_args,
      "--shm-size", recipe.shm_size,
      // docker/cli opts/parse.go parseKeyValueFile os.Opens the path: /dev/stdin is the pipe
      // that SshDocker.run writes the env into, so no value is on any command line.
      ...(Object.keys(env).length === 0 ? [] : ["--env-file", ENV_FROM_STDIN]),
      ...mounts.flatMap((m) => ["--volume", `${m.host}:${m.container}${m.read_only ? ":ro" : ""}`]),
      ...(entry === undefined ? [] : ["--entrypoint", entry]),
      // pflag ends docker run's options at `--` (spf13/pflag flag.go parseArgs), and docker run
      // stops parsing at the image (docker/cli run.go: SetInterspersed(false)): the image and
      // the command after it are never options, whatever they say.
      "--",
      recipe.docker_image,
      ...entryArgs,
      ...cmd.command,
    ];
    const bytes = remoteCommandBytes(argv);
    if (bytes > MAX_REMOTE_COMMAND_BYTES) {
      diagnostics.push(
        error(
          { file: recipe.file, line: 1, col: 1 },
          `recipe ${recipe.id}: the docker run command for ${node.name} is ${bytes} bytes, more than the ${MAX_REMOTE_COMMAND_BYTES} a node's kernel takes as one command (E2BIG)`,
          "shorten the recipe's args, env and mounts (a long JSON value can often go in a file in a mounted folder)",
        ),
      );
    }
    specs.push({ rank: node.rank, role, node: node.name, host: node.host, image: recipe.docker_image, container, env, mounts, labels, argv });
  }
  if (diagnostics.length > 0) return { ok: false, diagnostics };
  const workers = specs.filter((s) => s.rank > 0).map((s) => s.node);
  const apiKey = apiKeyOf(recipe.args, recipe.env, engine.flags);
  const start_order = engine.startsHeadFirst(recipe) ? [head.name, ...workers] : [...workers, head.name];
  return {
    ok: true,
    plan: {
      deployment,
      ...(options.lane === undefined ? {} : { lane: options.lane }),
      ...(options.restart === undefined ? {} : { restart: options.restart }),
      recipe,
      recipe_hash: hash,
      served_model: served,
      cluster: cluster.name,
      endpoint,
      master_addr: masterAddr,
      master_port: cluster.master_port,
      api_port: apiPort,
      nodes: specs,
      start_order,
      ...(apiKey === undefined ? {} : { api_key: apiKey }),
      fabric_gaps: fabricGaps(nodes),
    },
  };
}
