import { isDeepStrictEqual } from "node:util";
import { UserError } from "../config/errors.js";
import type { EngineAdapter, RankCommand, RankContext } from "../engine/adapter.js";
import { withoutApiKeyFlags } from "../recipe/args.js";
import type { Plan } from "../plan/plan.js";
import { escapeExpansion, reference } from "./expansion.js";

/*
 * The leader's and the workers' commands, made by the engine's own rankCommand (what `plan` and
 * `up` run) with Kubernetes' references where a value is known only in the pod: the leader's
 * address and each worker's index from LWS, the pod's own IP from the downward API. LWS's pod
 * webhook gives every container LWS_LEADER_ADDRESS (the leader pod's DNS name,
 * "<leader>.<lws name>.<namespace>"), LWS_GROUP_SIZE and LWS_WORKER_INDEX (0 on the leader)
 * (kubernetes-sigs/lws pkg/webhooks/pod_webhook.go, with the names in
 * api/leaderworkerset/v1/leaderworkerset_types.go: LwsLeaderAddress, LwsGroupSize, LwsWorkerIndex).
 */

export const LWS_LEADER_ADDRESS = "LWS_LEADER_ADDRESS";
export const LWS_WORKER_INDEX = "LWS_WORKER_INDEX";
/** Set from the downward API (status.podIP): the address the leader's API binds to and is probed at. */
export const POD_IP = "LAUNCHER_POD_IP";
/** Set from the downward API (metadata.name, metadata.namespace) where the leader names its workers. */
export const POD_NAME = "LAUNCHER_POD_NAME";
export const POD_NAMESPACE = "LAUNCHER_POD_NAMESPACE";

/**
 * Placeholders handed to rankCommand in place of the references: a NUL never reaches a container
 * (execve takes C strings), so no recipe word holds one. After the words are escaped for
 * Kubernetes' expansion, each placeholder becomes its `$(NAME)`.
 */
const mark = (name: string): string => `\u0000${name}\u0000`;
/** The rank handed to rankCommand for the workers' template: the words that are exactly it become LWS_WORKER_INDEX. */
const WORKER_RANK = 1_000_003;

/** One template's process: what replaces the image's ENTRYPOINT and its arguments, as Kubernetes writes them. */
export interface TemplateCommand {
  /** The rank's whole command line: the entrypoint (the recipe's, else the engine's default), then the command. */
  readonly argv: readonly string[];
  /** The engine's env for the rank (the recipe's env overrides it, as in the plan). */
  readonly env: Readonly<Record<string, string>>;
}

/** What the export knows of the cluster beyond the plan. */
export interface ExportContext {
  /** The LeaderWorkerSet's name: its headless Service's, the subdomain of its pods' DNS names. */
  readonly name: string;
  /** Every node's Kubernetes address is its fabric address, as each pod checks at start (--node-ip-is-fabric). */
  readonly nodeIpIsFabric?: boolean;
}

/**
 * A worker pod's DNS name as its leader writes it: LWS names the workers' StatefulSet after the
 * leader pod, gives it the set's name as its serviceName (the default SubdomainShared policy, which
 * the export keeps) and starts its ordinals at 1 (kubernetes-sigs/lws
 * pkg/controllers/pod_controller.go constructWorkerStatefulSetApplyConfiguration), and a
 * StatefulSet's pod is POD.SERVICE.NAMESPACE (Kubernetes docs, "StatefulSets: Stable Network ID").
 * The leader pod's own name (NAME-GROUP) keeps a group's leader to its own workers.
 */
const workerHost = (set: string, rank: number): string => `${mark(POD_NAME)}-${rank}.${set}.${mark(POD_NAMESPACE)}`;

function context(plan: Plan, rank: number, at: ExportContext): RankContext {
  const base: RankContext = {
    rank,
    nnodes: plan.nodes.length,
    masterAddr: mark(LWS_LEADER_ADDRESS),
    masterPort: plan.master_port,
    apiPort: plan.api_port,
    apiHost: mark(POD_IP),
    // No fabric IP: a pod's is known only on its node (the start script exports it). A head that
    // waits for its peers waits for them by count, and each rank reads its own address at start.
    nodes: plan.nodes.map((n) => ({ name: n.node })),
    addressesAtStart: true,
  };
  if (at.nodeIpIsFabric !== true) return base;
  // The pod's IP is its node's fabric address (the start script checks it); the leader alone
  // names its workers, by names only its own pod name makes right.
  const nodes = plan.nodes.map((n, i) => (rank === 0 && i > 0 ? { name: n.node, ip: workerHost(at.name, i) } : { name: n.node }));
  return { ...base, nodeIp: mark(POD_IP), nodes, nodeAddressIsFabric: true };
}

/** The entrypoint and command of one rank as one argv. */
function argvOf(engine: EngineAdapter, recipeId: string, cmd: RankCommand): string[] {
  const entry = cmd.entrypoint ?? engine.defaultEntrypoint;
  if (entry === undefined) {
    throw new UserError(`recipe ${recipeId}: engine ${engine.name} does not say what its image runs, and the recipe names no entrypoint`, "set the recipe's entrypoint to the image's ENTRYPOINT, so that the export's start script can run it");
  }
  return [...entry, ...cmd.command];
}

/** What each placeholder stands for, in a message: a user reads no marker. */
const SPOKEN: Readonly<Record<string, string>> = {
  [LWS_LEADER_ADDRESS]: "the leader pod's address",
  [LWS_WORKER_INDEX]: "the worker's index",
  [POD_IP]: "the pod's IP",
  [POD_NAME]: "the pod's name",
  [POD_NAMESPACE]: "the pod's namespace",
};

/** An engine's message with each placeholder (JSON-quoted or not) said in words. */
const readable = (text: string): string =>
  text.replace(/"?(?:\\u0000|\u0000)([A-Z_]+)(?:\\u0000|\u0000)"?/g, (_, name: string) => SPOKEN[name] ?? "a value known only in the pod");

const placeheld = (words: readonly string[]): string[] =>
  words.map((w) => escapeExpansion(w).replace(/\u0000([A-Z_]+)\u0000/g, (_, name: string) => reference(name)));

/**
 * The leader's and the workers' templates. Every worker rank must run the workers' template with
 * its index put in: an engine whose ranks differ otherwise (one naming each node's address) cannot
 * be one LWS worker template, and is refused; so is a command naming a cluster node, which no pod
 * can know it runs on. The engine is asked with RankContext.addressesAtStart, so that one that can
 * do without the nodes' addresses (vLLM's Ray head counts its nodes) does; with
 * `known.nodeIpIsFabric` also with RankContext.nodeAddressIsFabric, each rank's own address its pod
 * IP and the leader's workers named by their pods' DNS names (an engine whose head dials its
 * workers, and whose workers may listen on the fabric only, runs so).
 */
export function templateCommands(plan: Plan, engine: EngineAdapter, known: ExportContext): { leader: TemplateCommand; worker: TemplateCommand } {
  const recipe = { ...plan.recipe, args: withoutApiKeyFlags(plan.recipe.args, engine.flags).args };
  if ([...recipe.args, ...(recipe.entrypoint ?? [])].some((w) => w.includes("\u0000"))) throw new UserError(`recipe ${plan.recipe.id}: a word holds a NUL character, which no command line can carry`);
  const cannot = `this recipe's engine (${engine.name}) with its distributed backend (${plan.recipe.distributed_backend}) cannot be exported to Kubernetes; one whose ranks differ only by their index can`;
  const refused = (why: string): UserError => new UserError(`recipe ${plan.recipe.id}: ${why}, and a LeaderWorkerSet has one template for every worker`, cannot);
  const at = (rank: number): RankCommand => {
    try {
      return engine.rankCommand(recipe, context(plan, rank, known));
    } catch (e) {
      if (!(e instanceof UserError)) throw e;
      // The workers' template is asked for only once every real rank gave its command: one that
      // fails only by index is an engine whose workers differ, said without the stand-in rank.
      if (rank === WORKER_RANK) throw refused(`engine ${engine.name} makes each worker's command but not one for a worker by its index`);
      // The engine wants what a pod knows only once it runs (its node's address), and says why it
      // cannot do without: no template can say it.
      throw new UserError(`recipe ${plan.recipe.id}: engine ${engine.name} cannot be exported to Kubernetes: ${readable(e.message)}`, e.hint === undefined ? cannot : readable(e.hint));
    }
  };
  const template = (cmd: RankCommand, rank: number): TemplateCommand => ({
    argv: placeheld(argvOf(engine, plan.recipe.id, cmd).map((w) => (rank === WORKER_RANK && w === String(WORKER_RANK) ? mark(LWS_WORKER_INDEX) : w))),
    env: cmd.env ?? {},
  });
  const leader = template(at(0), 0);
  // Each real rank first, so that an engine's refusal names a node of the plan.
  const owns = plan.nodes.slice(1).map((_, i) => template(at(i + 1), i + 1));
  // One node: no worker runs, and the set's one pod is the leader's.
  const worker = plan.nodes.length === 1 ? leader : template(at(WORKER_RANK), WORKER_RANK);
  for (const [i, own] of owns.entries()) {
    const rank = i + 1;
    const fromTemplate = worker.argv.map((w) => w.replaceAll(reference(LWS_WORKER_INDEX), String(rank)));
    if (!isDeepStrictEqual(fromTemplate, own.argv) || !isDeepStrictEqual(worker.env, own.env)) throw refused(`engine ${engine.name}'s rank ${rank} runs more than the workers' command with its index put in`);
  }
  const named = plan.nodes.flatMap((n) => [n.node, n.host]);
  const naming = [...leader.argv, ...worker.argv].find((w) => named.some((n) => w.split(/[=,:\s]/).includes(n)));
  if (naming !== undefined) throw refused(`engine ${engine.name}'s command names a node of the cluster (${naming.slice(0, 120)}), and a pod may run on any node`);
  return { leader, worker };
}
