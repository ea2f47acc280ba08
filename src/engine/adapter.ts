import type { ClusterNode } from "../cluster/cluster.js";
import type { BootPhase as Phase } from "../contract/deployment.js";
import type { ArgparseDump } from "./argparse-dump.js";
import type { GenerationProbe } from "./generation-probe.js";
import type { ImageContract } from "./image-contract.js";

/** What launcher needs to know about one inference engine. */
export interface ManagedFlag {
  readonly flags: readonly string[];
  /** What the user should do instead of writing the flag. */
  readonly instead: string;
  /** Why the flag is refused, when it is not one launcher writes itself (removed, per rank, no HTTP API). */
  readonly why?: string;
  /**
   * Env names the engine reads as this same option (llama.cpp's `(env: LLAMA_ARG_...)`): a
   * recipe's env that sets one is refused alike, with `why` and `instead`.
   */
  readonly env?: readonly string[];
  /** The rule holds only so (a single-node flag): absent, always. */
  readonly when?: FlagCondition;
}

/**
 * A rule of the flag table that depends on another flag of the recipe's args: it holds only when
 * one of `with` is given, or when none of `without` is (every spelling of each listed).
 */
export interface FlagCondition {
  readonly with?: readonly string[];
  readonly without?: readonly string[];
}

/** A flag that takes one of a few values. */
export interface FlagChoice {
  readonly flags: readonly string[];
  readonly values: readonly string[];
  /** What to write instead of another value. */
  readonly instead: string;
}

/** A value of a flag that launcher refuses. */
export interface RefusedValue {
  readonly flags: readonly string[];
  readonly refuses: (value: string) => boolean;
  readonly why: string;
  readonly instead: string;
}

/** A parallel size given as an engine flag that multiplies the GPUs a deployment needs. */
export interface WorldSizeFlag {
  /** How the size is named in messages. */
  readonly key: string;
  readonly flags: readonly string[];
  /** The rule holds only so: absent, always. */
  readonly when?: FlagCondition;
}

/** Who judged a flag table: the image's own parser, or launcher's table of one engine version. */
export interface FlagsJudge {
  readonly by: "image" | "table";
  /** The engine as people name it ("vLLM"). */
  readonly engine: string;
  /** The engine version the parser (or the table) is of. */
  readonly version: string;
  /** The image whose parser it is (by: "image"). */
  readonly image?: string;
}

/** How the engine's argument parser reads the recipe's args (see src/recipe/args.ts). */
export interface EngineFlags {
  /** Whose parser this is; absent: a table of no stated version. */
  readonly judge?: FlagsJudge;
  /**
   * Every option string the parser knows (aliases, `--no-` twins): a flag none of them is or
   * abbreviates is refused by the image's own parser, and warned about by a table. Absent: unknown
   * flags are not checked.
   */
  readonly known?: readonly string[];
  /**
   * false: the parser takes each option only as spelled (llama.cpp's common/arg.cpp), not by a
   * unique prefix as argparse does (allow_abbrev, vLLM's and SGLang's). Absent: prefixes count.
   */
  readonly abbreviations?: false;
  /** Spellings of one flag (`-sc`, `--speculative-config`): compared as one by `diff`. */
  readonly aliases?: readonly (readonly string[])[];
  /** Flags launcher writes itself, or refuses (`why`): never in a recipe (every alias listed). */
  readonly managed: readonly ManagedFlag[];
  /** Single-dash flags that take their value in the same word too (`-n2` is `-n 2`). */
  readonly attached?: readonly string[];
  /** Flags that take one of a few values. */
  readonly choices?: readonly FlagChoice[];
  /** Values of a flag launcher refuses, with the reason (a value that makes readiness impossible). */
  readonly refusedValues?: readonly RefusedValue[];
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
  /** Parallel sizes whose groups are carved out of the tensor parallel ranks: they must divide it. */
  readonly dividesTensorParallel: readonly WorldSizeFlag[];
  /** Flags that name the distributed backend, which must agree with the recipe's `distributed_backend`. */
  readonly backend: readonly string[];
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
  /** Facts the line establishes about the boot (see BootState). */
  readonly sets?: readonly BootMark[];
}

/**
 * "pastInit": the engine finished its own init, its API may answer any moment (launcher polls
 * /health from then on); "headless": the rank runs without an API (a worker node's own start line).
 */
export type BootMark = "pastInit" | "headless";

/** One raw log line, read the engine's way. */
export interface LogLine {
  /** The line as a terminal shows it: no colour codes, of a redrawn ("\r") line only the last drawing. */
  readonly text: string;
  /** The message alone, without the process prefix and logger header. */
  readonly body: string;
  /** The process that wrote it, when the line says. */
  readonly proc?: string;
  readonly level?: string;
  /** The same for every line of one logger record (a multi-line message, a logged traceback). */
  readonly record?: string;
  /** The time the line's own header gives, as written. */
  readonly time?: string;
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
  /** Files of the Hub repo `model` the engine reads, when the recipe names them (llama.cpp's GGUF). */
  readonly gguf?: GgufFiles;
  /** The recipe's mounts: where the container sees the node's HF cache (the mount whose env is HF_HOME). */
  readonly extra_mounts?: readonly { readonly container: string; readonly env?: string }[];
}

/** The recipe's `gguf`: a GGUF file of the Hub repo `model` (a split file's first part), its vision projector, the commit. */
export interface GgufFiles {
  readonly file: string;
  readonly mmproj?: string;
  /** 40 hex: the snapshot folder the files are in. */
  readonly revision: string;
}

/** Of a model's Hub snapshot, the files an engine reads and the commit they are of (the rest of the repo is not needed). */
export interface WeightFiles {
  readonly files: readonly string[];
  readonly revision: string;
}

/**
 * Recipe keys that say how an engine runs and that not every engine reads (the other keys every
 * deployment uses alike: image, model, nodes, env, mounts). A recipe that sets one its engine's
 * adapter does not read is refused at that line: a key silently dropped benches the wrong thing.
 */
export const ENGINE_RECIPE_KEYS = ["tensor_parallel_size", "pipeline_parallel_size", "distributed_backend", "entrypoint", "unsafe_dev_routes", "gguf"] as const;
export type EngineRecipeKey = (typeof ENGINE_RECIPE_KEYS)[number];

/** What of a recipe an engine's adapter reads, beside its flags (src/recipe/engine-use.ts checks a recipe against it). */
export interface RecipeUse {
  /** The engine as people name it, for messages ("SGLang"). */
  readonly engine: string;
  /** The ENGINE_RECIPE_KEYS the adapter reads; setting another is an error at its line. */
  readonly keys: readonly EngineRecipeKey[];
  /**
   * Prefixes of the env names the engine itself reads (`VLLM_`): a recipe of another engine that
   * sets such a name is refused, since only this engine reads it. Names no engine claims (NCCL_,
   * HF_, CUDA_) go to every engine.
   */
  readonly envPrefixes: readonly string[];
  /** What to do instead of a key the engine does not read, when more than removing it (the engine's own way to say it). */
  readonly ignored?: Readonly<Partial<Record<EngineRecipeKey, string>>>;
}

/**
 * When the ranks' containers start: the head's `docker run` before the workers' (they join what
 * it hosts and do not wait for it), the workers' before the head's (it connects to them once), or
 * all at once (every rank waits for the others by itself: no `docker run` waits for another).
 */
export const START_ORDERS = ["head first", "workers first", "at once"] as const;
export type StartOrder = (typeof START_ORDERS)[number];

/**
 * The one seam between launcher and an inference engine: plan, up, status, drain, validation and
 * the gateway ask the engine's adapter (found by the recipe's `engine`, or a container's
 * `launcher.engine` label, in ./registry.ts) and never name an engine themselves.
 */
export interface EngineAdapter {
  /** The recipe's `engine` value and the containers' `launcher.engine` label. */
  readonly name: string;
  /** Which recipe keys and env names the adapter reads: strict recipes (src/recipe/engine-use.ts). */
  readonly recipeUse: RecipeUse;
  /** Each rank's container command. */
  readonly rankCommand: (recipe: EngineRecipe, ctx: RankContext) => RankCommand;
  /**
   * The env one node's container gets from that node's own fabric facts (never another node's):
   * what the engine and its communication libraries read to find the fabric. Its keys are in
   * `managedEnv`, so that no recipe sets them. Of the recipe only its backend: doctor shows the
   * env of a recipe that sets nothing.
   */
  readonly nodeEnv: (recipe: Pick<EngineRecipe, "distributed_backend">, node: ClusterNode) => Record<string, string>;
  /** When each rank's container starts, beside the others' (StartOrder). */
  readonly startOrder: (recipe: EngineRecipe) => StartOrder;
  /**
   * Workers first, and the head only once every worker's port (the cluster's master_port at the
   * worker's fabric_ip, where its rank listens) accepts a TCP connection made from the head's
   * node: a head that connects to its workers once, at its start, with no retry (llama.cpp's RPC).
   * A worker's log cannot say so (its lines may sit in a pipe's buffer). Absent: the head starts
   * as soon as the workers' containers run.
   */
  readonly headAwaitsWorkersPort?: true;
  /**
   * Ranks above 0 listen on the deployment's API port on their own node too (SGLang's dummy health
   * server, on loopback): preflight checks the port is free on every worker node, as it does the
   * head's. Absent: only the head listens on it.
   */
  readonly workersBindApiPort?: true;
  /** What the engine requires of its image (entrypoint, version), checked in preflight. */
  readonly image: ImageContract;
  /**
   * The engine's flags (every spelling) that name the model to clients and pin its revision:
   * the planner reads them from the recipe's args for the served name and the weights check.
   */
  readonly modelFlags: { readonly servedName: readonly string[]; readonly revision: readonly string[] };
  /** Readiness: the path that answers 200 once the engine serves. */
  readonly healthPath: string;
  /**
   * The daemon's generation probe as a program the engine's image runs (./generation-probe.ts):
   * `launcher export k8s` makes it the leader's liveness, so that Kubernetes restarts an engine
   * that answers `healthPath` but completes no token. Absent: the image has no tool to send it,
   * and the exported liveness is the health check alone.
   */
  readonly generationProbe?: GenerationProbe;
  /**
   * The command the image runs when a recipe names no `entrypoint` (its ENTRYPOINT, which rankCommand's
   * `command` completes): what runs where the image's ENTRYPOINT cannot be kept, as under
   * `launcher export k8s`'s start script. Absent: such a recipe must name its entrypoint to export.
   */
  readonly defaultEntrypoint?: readonly string[];
  /** Drain: the Prometheus gauge of requests running now, summed over its series, on `metricsPath`. */
  readonly metricsPath: string;
  readonly runningRequestsMetric: string;
  /**
   * Speculative decoding's Prometheus counters on `metricsPath` (draft tokens proposed, and
   * accepted): `launcher bench` reports accepted / drafted over a run. Absent: the engine has none.
   */
  readonly specDecodeMetrics?: { readonly accepted: string; readonly drafted: string };
  /**
   * The series on `metricsPath` the daemon scrapes for its live view of a serving deployment
   * (src/engine/engine-metrics.ts reads them). Absent: the engine's metrics are not scraped.
   */
  readonly engineMetrics?: EngineMetricNames;
  /** The engine's command line: managed flags (with every alias), value shapes, JSON flags, ... */
  readonly flags: EngineFlags;
  /**
   * The engine's command line as an image's own parser describes it (src/engine/argparse-dump.ts;
   * the dump program is the image contract's `parserCommand`): the same policy as `flags`, with
   * the image's options, shapes and defaults. Absent: the engine's images cannot describe it.
   */
  readonly flagsFrom?: (dump: ArgparseDump, image: string) => JudgedFlags;
  /** Env keys launcher sets per node; a recipe must not set them. */
  readonly managedEnv: readonly string[];
  /**
   * Env keys that open the engine's admin or development routes (no key, or outside what its key
   * guards): a recipe sets them only with `unsafe_dev_routes = true`. `opens` says what, for messages.
   */
  readonly devSwitches?: readonly { readonly env: string; readonly opens: string }[];
  /**
   * Env keys with which the engine itself rewrites env launcher manages per node (`managedEnv`): a
   * recipe that sets one gets a warning with `says(value)`; one that sets it without `needs`, an error.
   */
  readonly envOverrides?: readonly { readonly env: string; readonly says: (value: string) => string; readonly needs?: string }[];
  readonly bootPhases: readonly BootPhase[];
  /** Splits one raw line into what the engine's log format puts in it. */
  readonly readLine: (raw: string) => LogLine;
  /** A line (message) that ends the boot. */
  readonly fatalPatterns: readonly RegExp[];
  /** An exception line (message) that may be a boot's root cause. */
  readonly exceptionPattern: RegExp;
  /** Exceptions that only say another process failed before: never named as the root cause. */
  readonly wrapperPatterns: readonly RegExp[];
  /**
   * A cause's real message when the exception line only names the error's kind and the message
   * follows it: given the cause and the bodies of the (few) lines after it from the same process,
   * the cause to show instead, or undefined (none yet, or the cause needs none). A refined cause
   * that matches `peerLossPatterns` is a lost peer's.
   */
  readonly refineCause?: (cause: string, after: readonly string[]) => string | undefined;
  /**
   * Fatal lines that only say a peer process died: a node whose cause is one of these failed
   * because another node did, so of two failed nodes the one with a cause of its own is explained.
   */
  readonly peerLossPatterns: readonly RegExp[];
  /**
   * The address (as the engine's line writes it, an IP) of the peer a lost peer's cause names, when
   * it names one: the node of the boot with that address is blamed, not the rank that heard of its
   * loss (src/boot/blame.ts peerNamed). Absent: the engine's lines name no peer.
   */
  readonly peerAddress?: (cause: string) => string | undefined;
  /** The address a node's own log line (as shown: LogLine.text) says the node has: how a saved log, with no cluster, finds a named peer. */
  readonly nodeAddress?: (text: string) => string | undefined;
  /** Lines that do not stop the engine but likely explain a later failure; their record's exception goes with them. */
  readonly warningPatterns: readonly RegExp[];
  /** The line that says the API is up. */
  readonly readyPattern: RegExp;
  /**
   * Lines that say a rank has done its own part of the start and now waits for its peers (the
   * multi-node rendezvous): of two ranks in one phase, one that printed such a line is not the
   * one holding the boot up.
   */
  readonly rendezvousPatterns: readonly RegExp[];
  /**
   * The engine's routes under /v1 that the gateway forwards (with the engine's key), and the
   * methods each takes: an allow-list, so nothing else reaches the engine through the gateway
   * (404 for other paths, 405 for other methods). A `{name}` segment is any one segment.
   */
  readonly apiMethods: Readonly<Record<string, readonly string[]>>;
  /** Routes under /v1 the engine has but the gateway never forwards, each with why (its 404 says so). */
  readonly apiRefused?: Readonly<Record<string, string>>;
  /**
   * What to do about a failed boot, from the engine's own words (its cause line and the log lines
   * around it): `up`'s failure message and `launcher explain` both show it.
   */
  readonly hintFor?: (cause: string | undefined, lines: readonly string[]) => string | undefined;
  /** The time the engine's own log header gives a line (when the log has no `docker logs --timestamps`). */
  readonly lineTime?: (line: LogLine) => LineTime | undefined;
  /**
   * The flags that say how much of a node's memory the engine claims (src/memory/fit.ts reads
   * them from the recipe's args); undefined: the engine cannot say, and no fit check is made.
   */
  readonly memoryFlags?: EngineMemoryFlags;
  /**
   * The files of the model's Hub snapshot the recipe makes the engine read, when it names them
   * (llama.cpp's `gguf`): `models pull` and `models sync` move only these, and the weights'
   * size (the fit check's) is theirs. Absent, or undefined: the whole snapshot, at the revision
   * flag of `modelFlags`.
   */
  readonly weightFiles?: (recipe: EngineRecipe) => WeightFiles | undefined;
  /**
   * "head": only the head reads the model's files, and the workers get their share from it over
   * the engine's own link (llama.cpp's RPC): `models` needs, pull and sync them on the head
   * alone, preflight looks for them there, and the fit counts the head's size for every node.
   * Absent: every rank reads them.
   */
  readonly weightsReadBy?: "head";
}

/**
 * An engine's Prometheus series for each figure of a live metrics point, each a list of names of
 * which the first the text has is read (a renamed metric: its new name, then its old one). Every
 * series of a name is summed (one per engine core), but KV cache usage, a share, is averaged.
 */
export interface EngineMetricNames {
  /** Gauge: the share of the KV cache in use, 0 to 1. */
  readonly kvCacheUsage: readonly string[];
  /** Gauges: requests being run now, and queued. */
  readonly requestsRunning: readonly string[];
  readonly requestsWaiting: readonly string[];
  /** Counters (as exposed, with their `_total`): tokens prefilled and generated, preemptions. */
  readonly promptTokens: readonly string[];
  readonly generationTokens: readonly string[];
  readonly preemptions: readonly string[];
  /** Counters of speculative decoding: draft tokens accepted, and proposed. */
  readonly specAccepted: readonly string[];
  readonly specDrafted: readonly string[];
}

/** An image's parser made into a flag table, with the defaults launcher's checks take from it. */
export interface JudgedFlags {
  readonly flags: EngineFlags;
  /** The memory share the engine takes when no flag says (EngineMemoryFlags.defaultUtilization), when the parser gives it. */
  readonly defaultUtilization?: number;
}

export interface EngineMemoryFlags {
  /** A fixed KV cache per GPU, in bytes: the engine then holds the weights, that KV and its working memory. */
  readonly kvCacheBytes: readonly string[];
  /** A share of the node's total memory for weights, working memory and KV cache together. */
  readonly utilization: readonly string[];
  /**
   * The share the engine takes when no flag is given. Absent: the engine computes it when it
   * starts (`withoutFlag` says from what), so a recipe without the flag gets no fit check.
   */
  readonly defaultUtilization?: number;
  /** Why the share without a flag cannot be known before the engine starts (with no defaultUtilization). */
  readonly withoutFlag?: string;
  /**
   * "free-at-start": the share is of the memory free when the engine starts, and holds weights and
   * KV cache only; its working memory (activations, CUDA graphs) comes out of the rest (SGLang's
   * --mem-fraction-static). Absent: of the node's total, working memory inside it (vLLM's).
   */
  readonly shareOf?: "free-at-start";
  /**
   * An engine that claims no share and takes no KV size in bytes (llama.cpp: the weights it loads
   * and a KV cache of --ctx-size cells): the KV cache the fit counts beside the weights, a stated
   * allowance (`source` says what it stands for), not a figure read from the model.
   */
  readonly kvAllowance?: {
    readonly bytes: number;
    readonly source: string;
    /**
     * The flags that size the cache (llama.cpp's --ctx-size): without one (or with 0) the engine
     * takes a size launcher cannot know (`unsized` says why), and the fit says so instead of
     * counting the allowance.
     */
    readonly sizedBy?: readonly string[];
    readonly unsized?: string;
  };
}

export interface LineTime {
  /** As the log writes it. */
  readonly text: string;
  /** Milliseconds on a clock that only needs to be comparable within one log. */
  readonly ms: number;
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


export interface RankContext {
  readonly rank: number;
  readonly nnodes: number;
  readonly masterAddr: string;
  readonly masterPort: number;
  readonly apiPort: number;
  /** The address the head's API listens on (src/plan/api-address.ts); ranks without an API ignore it. */
  readonly apiHost: string;
  /** This node's fabric IP, when known. */
  readonly nodeIp?: string;
  /** Every rank's node, in rank order, with its fabric IP when known (a head waits for them all). */
  readonly nodes: readonly { readonly name: string; readonly ip?: string }[];
  /**
   * Set where no node's address is known before its rank starts (`launcher export k8s`: a pod
   * learns its node only once the scheduler placed it): `nodeIp` and the `nodes`' IPs are absent,
   * a rank takes its own address at start from the per-node env (`nodeEnv`, which the export's
   * start script exports from the node's detected fabric), a head that waits for its peers waits
   * for `nnodes` of them by count, and a rank started before its head waits for the head's port.
   * Absent: every address known is given, and a head waits for each node by its address
   * (launcher's SSH path). An engine that cannot work so throws a UserError saying why.
   */
  readonly addressesAtStart?: true;
  /**
   * With addressesAtStart, set where every node's address in the cluster (a Kubernetes node's
   * InternalIP, the pod's IP under host networking) is its fabric address, which each rank's
   * start checks before it runs (`launcher export k8s --node-ip-is-fabric`): `nodeIp` is then the
   * rank's own address, and on the head (rank 0) each worker's `nodes[i].ip` is a host name that
   * resolves to that worker's address once its rank runs. A rank may listen on `nodeIp` where
   * only the fabric may reach it.
   */
  readonly nodeAddressIsFabric?: true;
}
