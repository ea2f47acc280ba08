import type { ClusterNode } from "../cluster/cluster.js";
import type { BootPhase as Phase } from "../deploy/contract.js";

/** What launcher needs to know about one inference engine. */
export interface ManagedFlag {
  readonly flags: readonly string[];
  /** What the user should do instead of writing the flag. */
  readonly instead: string;
}

export interface BootPhase {
  /** One of the contract's phases: status, history and the gateway show them. */
  readonly phase: Phase;
  readonly pattern: RegExp;
  /** Named figures to pull out of the matching line (capture group index by name). */
  readonly figures?: Readonly<Record<string, number>>;
}

/**
 * What the planner tells an engine about one deployment, filled from the recipe by plan/plan.ts:
 * the engine reads no recipe/ type, so the recipe format and the engines change apart. The field
 * names are the recipe's, so a resolved Recipe fits it as it is.
 */
export interface EngineRecipe {
  readonly model: string;
  readonly docker_image: string;
  readonly tensor_parallel_size: number;
  readonly pipeline_parallel_size: number;
  readonly distributed_backend: string;
  /** Replaces the image's ENTRYPOINT, when the recipe sets one. */
  readonly entrypoint?: readonly string[];
  /** The engine's flags, one element per word, as the recipe's args. */
  readonly args: readonly string[];
  /** The recipe's env (every container gets it). */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The one seam between launcher and an inference engine: plan, up, status, drain, validation and
 * the gateway ask the engine's adapter (found by the recipe's `engine`, or a container's
 * `launcher.engine` label, in ./registry.ts) and never name an engine themselves.
 */
export interface EngineAdapter {
  /** The recipe's `engine` value and the containers' `launcher.engine` label. */
  readonly name: string;
  /** Each rank's container command. */
  readonly rankCommand: (recipe: EngineRecipe, ctx: RankContext) => RankCommand;
  /**
   * The env one node's container gets from that node's own fabric facts (never another node's):
   * what the engine and its communication libraries read to find the fabric. Its keys are in
   * `managedEnv`, so that no recipe sets them.
   */
  readonly nodeEnv: (recipe: EngineRecipe, node: ClusterNode) => Record<string, string>;
  /** Start order: true when the head must run before the workers start, false for workers first. */
  readonly startsHeadFirst: (recipe: EngineRecipe) => boolean;
  /** What the image must run when the recipe sets no `entrypoint` (preflight compares the image's ENTRYPOINT). */
  readonly image: { readonly entrypoint: readonly string[] };
  /**
   * The engine's flags (every spelling) that name the model to clients and pin its revision:
   * the planner reads them from the recipe's args for the served name and the weights check.
   */
  readonly modelFlags: { readonly servedName: readonly string[]; readonly revision: readonly string[] };
  /** Readiness: the path that answers 200 once the engine serves. */
  readonly healthPath: string;
  /** Drain: the Prometheus gauge of requests running now, summed over its series, on `metricsPath`. */
  readonly metricsPath: string;
  readonly runningRequestsMetric: string;
  readonly managedFlags: readonly ManagedFlag[];
  /** Env keys launcher sets per node; a recipe must not set them. */
  readonly managedEnv: readonly string[];
  readonly bootPhases: readonly BootPhase[];
  readonly fatalPatterns: readonly RegExp[];
  /** The line that says the API is up. */
  readonly readyPattern: RegExp;
  /**
   * Lines that say a rank has done its own part of the start and now waits for its peers (the
   * multi-node rendezvous): of two ranks in one phase, one that printed such a line is not the
   * one holding the boot up.
   */
  readonly rendezvousPatterns: readonly RegExp[];
  /** The engine's OpenAI-compatible routes under /v1 and the methods each takes (the gateway answers 405 for others). */
  readonly apiMethods: Readonly<Record<string, readonly string[]>>;
}

/** What one rank's container runs, decided by the engine. */
export interface RankCommand {
  /** Replaces the image's ENTRYPOINT, when set. */
  readonly entrypoint?: readonly string[];
  /** The container command (after the image). */
  readonly command: readonly string[];
}

export interface RankContext {
  readonly rank: number;
  readonly nnodes: number;
  readonly masterAddr: string;
  readonly masterPort: number;
  readonly apiPort: number;
  /** This node's fabric IP, when known. */
  readonly nodeIp?: string;
}
