import type { BootPhase as Phase } from "../deploy/contract.js";
import type { Recipe } from "../recipe/recipe.js";

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

export interface EngineAdapter {
  readonly name: string;
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
  /** What the image must have for this recipe, checked before any container starts. */
  readonly imageProbes?: (recipe: Recipe) => readonly ImageProbe[];
}

/** What one rank's container runs, decided by the engine. */
export interface RankCommand {
  /** Replaces the image's ENTRYPOINT, when set. */
  readonly entrypoint?: readonly string[];
  /** The container command (after the image). */
  readonly command: readonly string[];
  /** Env the engine needs on this rank; the recipe's `[env]` overrides it. */
  readonly env?: Readonly<Record<string, string>>;
}

/** Something the image must have, checked by preflight with `docker run --rm --entrypoint E IMAGE ARGS...`. */
export interface ImageProbe {
  readonly entrypoint: string;
  readonly args: readonly string[];
  /** What is wrong, and the fix, when the probe fails. */
  readonly problem: (image: string) => string;
}

export interface RankContext {
  readonly rank: number;
  readonly nnodes: number;
  readonly masterAddr: string;
  readonly masterPort: number;
  readonly apiPort: number;
  /** This node's fabric IP, when known. */
  readonly nodeIp?: string;
  /** Every rank's node, in rank order, with its fabric IP when known (a head waits for them all). */
  readonly nodes: readonly { readonly name: string; readonly ip?: string }[];
}
