import type { BootPhase as Phase } from "../deploy/contract.js";

/** What launcher needs to know about one inference engine. */
export interface ManagedFlag {
  readonly flags: readonly string[];
  /** What the user should do instead of writing the flag. */
  readonly instead: string;
}

/** A parallel size given as an engine flag that multiplies the GPUs a deployment needs. */
export interface WorldSizeFlag {
  /** How the size is named in messages. */
  readonly key: string;
  readonly flags: readonly string[];
}

/** How the engine's argument parser reads the recipe's args (see src/recipe/args.ts). */
export interface EngineFlags {
  /** Flags launcher writes itself: never in a recipe (every alias listed). */
  readonly managed: readonly ManagedFlag[];
  /** Flags that take no value. */
  readonly boolean: readonly string[];
  /** Flags that take every following word up to the next flag. */
  readonly many: readonly string[];
  /** Flags whose value the engine parses as JSON. */
  readonly json: readonly string[];
  /** Flags whose value the engine parses as JSON only when it is written `{...}`. */
  readonly jsonWhenBraced: readonly string[];
  /** Flags that name the model, which launcher passes from the recipe's `model`. */
  readonly model: readonly string[];
  /** Flags allowed on one node only (every rank gets the recipe's args). */
  readonly singleNode: readonly ManagedFlag[];
  /** Parallel sizes beside tensor and pipeline parallel that multiply the GPUs needed. */
  readonly worldSize: readonly WorldSizeFlag[];
  /** Flags naming a file of more flags the engine reads itself: launcher cannot check what is in it. */
  readonly flagFiles: readonly string[];
  /** Where a recipe gives the key the engine's API demands (flag first, as the engine does). */
  readonly apiKey: { readonly flags: readonly string[]; readonly env: string };
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
  /** The engine's command line: managed flags (with every alias), value shapes, JSON flags, ... */
  readonly flags: EngineFlags;
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
