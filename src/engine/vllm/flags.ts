import type { EngineFlags, FlagChoice, ManagedFlag } from "../adapter.js";
import { flagNames } from "../flag-names.js";
import { withPrefixes } from "./abbrev.js";
import { VLLM_OPTIONS, VLLM_TABLE_VERSION } from "./options.js";

/*
 * vLLM's command line as its argument parser defines it, in the release VLLM_TABLE_VERSION names
 * (./options.ts). Sources (vllm-project/vllm, main of August-September 2026):
 * - vllm/engine/arg_utils.py: EngineArgs.add_cli_args, _compute_kwargs (bool fields get
 *   argparse.BooleanOptionalAction, so `--x` and `--no-x` take no value; list fields get
 *   nargs="+"; dataclass fields are parsed with TypeAdapter.validate_json, dict fields with
 *   json.loads, dict-or-str fields (union_dict_and_str) with json.loads only when the value is
 *   `{...}`); the aliases `-n`, `-r`, `-tp`, `-pp`, `-dcp`, `-pcp`, `-dp`, `-dpn`, `-dpr`,
 *   `-dpl`, `-dpa`, `-dpp`, `-dpb`, `-dph`, `-dpe`, `-dpm`, `-ep`, `-q`, and the JSON shorthands
 *   `-cc` (--compilation-config), `-ac` (--attention-config), `-sc` (--speculative-config),
 *   `-dc` (--diffusion-config).
 * - vllm/entrypoints/launchers/cli_args.py (vllm/entrypoints/openai/cli_args.py until mid-2026):
 *   make_arg_parser (`--headless`, `--api-server-count`/`-asc`, `--config`, `--grpc`) and
 *   FrontendArgs (`--uds`: "If set, host and port arguments are ignored"; `--api-key` is
 *   list[str], so nargs="+"; `--chat-template` is a plain str; `--default-chat-template-kwargs`
 *   and `--allowed-origins/-methods/-headers` are json.loads).
 * - vllm/utils/argparse_utils.py: FlexibleArgumentParser turns `_` into `-` in a `--` flag's
 *   name up to the first `.`, moves `--model X` to the front as the positional model, turns
 *   `-O3`, `-O=3` and `-O 3` (a level of 0 to 3) into `--optimization-level 3` (`-O` is no JSON
 *   shorthand: `-O '{...}'` stays `-O`, which no option has), and subclasses
 *   argparse.ArgumentParser; vllm/entrypoints/cli/serve.py subparser_init makes the `serve`
 *   parser with add_parser and no allow_abbrev, so argparse's default (True) holds: a unique
 *   prefix (`--nnode`) is taken for the whole flag.
 */

/** Flags launcher writes itself on every rank (mp backend) or the head (Ray), and those it refuses. */
const MANAGED: readonly ManagedFlag[] = [
  { flags: ["--host"], instead: "launcher serves the API on the head's address it reaches it at; set api_bind in the cluster file to choose another" },
  { flags: ["--port"], instead: "set api_port in the cluster file or pass --port to launcher" },
  { flags: ["--uds"], instead: "launcher and its gateway reach the engine over TCP at api_port (vLLM ignores --host/--port with --uds); remove it" },
  { flags: ["--nnodes", "-n"], instead: "set required_nodes in the recipe" },
  { flags: ["--node-rank", "-r"], instead: "launcher gives each node its rank from the cluster file's order; remove it" },
  { flags: ["--master-addr"], instead: "launcher uses the head's fabric_ip from the cluster file; remove it" },
  { flags: ["--master-port"], instead: "set master_port in the cluster file" },
  { flags: ["--headless"], instead: "launcher adds it to every rank above 0; remove it" },
  { flags: ["--tensor-parallel-size", "-tp"], instead: "set tensor_parallel_size in the recipe" },
  { flags: ["--pipeline-parallel-size", "-pp"], instead: "set pipeline_parallel_size in the recipe" },
  ...refused(),
];

/**
 * Flags launcher refuses though it does not write them. Every rank gets the recipe's args, so a
 * flag that says which rank or node this is would be copied to all of them; and launcher waits
 * for the engine's HTTP API (GET /health), so a flag that starts none makes readiness impossible.
 */
function refused(): ManagedFlag[] {
  const perRank = (what: string): string => `${what}, but launcher gives every node the same args`;
  return [
    // arg_utils.py: -dpn "Data parallel rank of this instance. When set, enables external load
    // balancer mode"; -dpr "Starting data parallel rank for secondary nodes"; -dpl "Number of
    // data parallel replicas to run on this node"; --device-ids "Comma-separated physical GPU
    // device IDs or UUIDs" of this node.
    { flags: ["--data-parallel-rank", "-dpn"], why: perRank("it is one data parallel rank's own (external load balancing)"), instead: "remove it; give data parallel as --data-parallel-size, which launcher runs as one deployment" },
    { flags: ["--data-parallel-start-rank", "-dpr"], why: perRank("it is one node's first data parallel rank"), instead: "remove it; give data parallel as --data-parallel-size" },
    { flags: ["--data-parallel-size-local", "-dpl"], why: perRank("it is one node's count of data parallel ranks"), instead: "remove it; vLLM spreads --data-parallel-size over the nodes" },
    { flags: ["--device-ids"], why: perRank("it names one node's GPUs"), instead: "remove it; launcher gives each rank its node's GPUs" },
    // serve.py ServeSubcommand.cmd: with -dpm, run_dp_supervisor starts one API server per local
    // data parallel rank on ports of its own, its health aggregated on a supervisor port.
    { flags: ["--data-parallel-multi-port-external-lb", "-dpm"], why: "it runs a node-local supervisor with one API server per data parallel rank, each on its own port, where launcher waits for one API at api_port", instead: "remove it" },
    // serve.py ServeSubcommand.cmd: `if args.grpc: ... serve_grpc(args); return`, before any
    // HTTP server: no /health and no /v1.
    { flags: ["--grpc"], why: "vLLM then serves gRPC and no HTTP API, so launcher's readiness check (GET /health) and its gateway could never reach it", instead: "remove it" },
    // vllm/engine/arg_utils.py AsyncEngineArgs: enable_log_requests (BooleanOptionalAction, off by
    // default) took the place of --disable-log-requests; vLLM 0.17.1's `vllm serve --help` lists
    // `--enable-log-requests, --no-enable-log-requests` and no --disable-log-requests.
    { flags: ["--disable-log-requests"], why: `vLLM removed it (its ${VLLM_TABLE_VERSION} parser has --enable-log-requests, off by default, instead)`, instead: "remove it: requests are not logged unless --enable-log-requests is given" },
  ];
}

/** vLLM's flags that take no value (store_true, or BooleanOptionalAction with its `--no-` twin). */
const BOOLEAN = [
  // ModelConfig, LoadConfig
  "--trust-remote-code", "--enforce-eager", "--disable-sliding-window", "--disable-cascade-attn",
  "--skip-tokenizer-init", "--enable-prompt-embeds", "--enable-sleep-mode", "--enable-return-routed-experts",
  "--use-tqdm-on-load",
  // ParallelConfig
  "--data-parallel-hybrid-lb", "-dph", "--data-parallel-external-lb", "-dpe", "--enable-expert-parallel", "-ep",
  "--enable-dbo", "--enable-elastic-ep", "--enable-fault-tolerance", "-dpm", "--data-parallel-multi-port-external-lb", "--disable-nccl-for-dp-synchronization", "--enable-eplb",
  "--eplb-log-balancedness", "--ray-workers-use-nsight", "--disable-custom-all-reduce",
  "--enable-multimodal-encoder-data-parallel", "--enable-ep-weight-filter", "--numa-bind",
  // CacheConfig
  "--enable-prefix-caching", "--calculate-kv-scales", "--kv-sharing-fast-prefill", "--enable-cumem-allocator",
  // MultiModalConfig
  "--language-model-only", "--enable-mm-embeds", "--disable-mm-preprocessor-cache", "--mm-encoder-only",
  "--interleave-mm-strings", "--skip-mm-profiling",
  // LoRAConfig
  "--enable-lora", "--fully-sharded-loras", "--enable-tower-connector-lora", "--specialize-active-lora",
  // ObservabilityConfig
  "--kv-cache-metrics", "--cudagraph-metrics", "--enable-layerwise-nvtx-tracing", "--enable-mfu-metrics",
  "--enable-logging-iteration-details",
  // SchedulerConfig
  "--enable-chunked-prefill", "--disable-chunked-mm-input", "--disable-hybrid-kv-cache-manager", "--async-scheduling",
  // AsyncEngineArgs and others
  "--disable-log-stats", "--aggregate-engine-logging", "--enable-log-requests", "--fail-on-environ-validation",
  "--allow-deprecated-quantization", "--enable-flashinfer-autotune", "--use-gpu-for-pooling-score",
  // cli_args.py: make_arg_parser and FrontendArgs
  "--headless", "--grpc", "--trust-request-chat-template", "--return-tokens-as-token-ids", "--enable-auto-tool-choice",
  "--exclude-tools-when-tool-choice-none", "--enable-prompt-tokens-details", "--enable-per-request-metrics",
  "--enable-server-load-tracking", "--enable-force-include-usage", "--enable-tokenizer-info-endpoint",
  "--enable-log-outputs", "--enable-log-deltas", "--log-error-stack", "--tokens-only", "--disable-uvicorn-access-log",
  "--allow-credentials", "--enable-ssl-refresh", "--enable-request-id-headers", "--disable-fastapi-docs",
  "--enable-offline-docs", "--disable-frontend-multiprocessing", "--enable-flash-late-interaction",
  "--cohere-is-reasoning-model",
];

/** vLLM's list flags (nargs="+"): every word up to the next flag is one of its values. */
const MANY = [
  "--served-model-name", "--api-key", "--cudagraph-capture-sizes", "--cuda-graph-sizes", "--allowed-media-domains",
  "--logits-processors", "--lora-modules", "--ignore-patterns", "--collect-detailed-traces", "--numa-bind-nodes",
  "--numa-bind-cpus", "--offload-params", "--cpu-offload-params", "--lora-target-modules",
];

/** Values vLLM reads with json.loads or validate_json: they must be JSON. */
const JSON_VALUED = [
  "--speculative-config", "-sc", "--kv-transfer-config", "--kv-events-config", "--ec-transfer-config",
  "--compilation-config", "-cc", "--attention-config", "-ac", "--diffusion-config", "-dc", "--ec-manager-config",
  "--fault-tolerance-config", "--additional-config", "--structured-outputs-config", "--eplb-config", "--kernel-config",
  "--profiler-config", "--weight-transfer-config", "--reasoning-config", "--pooler-config", "--override-pooler-config",
  "--rope-scaling", "--mm-processor-kwargs", "--media-io-kwargs", "--override-generation-config",
  "--model-loader-extra-config", "--limit-mm-per-prompt", "--default-chat-template-kwargs", "--allowed-origins",
  "--allowed-methods", "--allowed-headers", "--default-mm-loras",
];

/** Dict-or-string values (union_dict_and_str): JSON only when written as `{...}`. */
const JSON_WHEN_BRACED = ["--hf-overrides", "--lora-modules"];

/**
 * argparse_utils.py FlexibleArgumentParser.parse_args: `-O3` / `-Odecode` / `-O=3` become
 * `--optimization-level <rest>`, and `-O` followed by 0, 1, 2 or 3 becomes `--optimization-level`;
 * vLLM's docs, "Optimization Levels": `-O0` to `-O3`. Any
 * other value fails (`-O '{...}'` stays `-O`, an option vLLM does not have).
 */
const OPTIMIZATION_LEVEL: FlagChoice = {
  flags: ["--optimization-level", "-O"],
  values: ["0", "1", "2", "3"],
  instead: "give a level of 0 to 3 (-O3); the JSON shorthand for --compilation-config is -cc '{...}'",
};

/** The table as vLLM defines its flags; vllmFlags below adds the prefixes argparse takes for them. */
const DEFINED: EngineFlags = {
  managed: MANAGED,
  // CPython argparse _get_option_tuples: a single-dash word whose first two characters are an
  // option (`-n2`) is that option with the rest as its value; `-O` by the preprocessing above.
  attached: ["-n", "-r", "-q", "-O"],
  choices: [OPTIMIZATION_LEVEL],
  boolean: BOOLEAN,
  many: MANY,
  json: JSON_VALUED,
  jsonWhenBraced: JSON_WHEN_BRACED,
  // The positional model: FlexibleArgumentParser.parse_args moves `--model X` to the front, so
  // beside the model launcher puts there vLLM sees two positionals and stops.
  model: ["--model"],
  // A headless rank refuses API servers (vllm/entrypoints/cli/serve.py ServeSubcommand.cmd:
  // "--api-server-count=N cannot be used with --headless"); every rank gets the recipe's args.
  singleNode: [{ flags: ["--api-server-count", "-asc"], instead: "headless worker ranks refuse it; run the API servers of a multi-node deployment with the default count" }],
  // vllm/config/parallel.py: world_size = PP x TP x PCP ("PCP expands the process world size"),
  // and data parallel runs that many copies (world_size_across_dp); DCP reuses the TP ranks.
  worldSize: [
    { key: "data_parallel_size", flags: ["--data-parallel-size", "-dp"] },
    { key: "prefill_context_parallel_size", flags: ["--prefill-context-parallel-size", "-pcp"] },
  ],
  // DCP shards the KV cache across the TP ranks it reuses (vllm/config/parallel.py,
  // docs/serving/context_parallel_deployment.md): its groups split the TP ranks evenly.
  dividesTensorParallel: [{ key: "decode_context_parallel_size", flags: ["--decode-context-parallel-size", "-dcp"] }],
  // vllm/config/parallel.py ParallelConfig.distributed_executor_backend ("mp", "ray", ...).
  backend: ["--distributed-executor-backend"],
  // cli_args.py make_arg_parser `--config` (a YAML file); argparse_utils.py _pull_args_from_config
  // inserts its keys as flags inside the container, where launcher does not look.
  flagFiles: ["--config"],
  // vllm/entrypoints/openai/api_server.py build_app: `args.api_key or [envs.VLLM_API_KEY]`
  // (the flag wins), checked as `Authorization: Bearer KEY` on /v1 routes.
  apiKey: { flags: ["--api-key"], env: "VLLM_API_KEY" },
};

/** Every option string of vLLM's parser, `--no-` twins included: what a prefix must be unique among. */
const ALL_OPTIONS = [...new Set([...VLLM_OPTIONS, ...flagNames(DEFINED), ...BOOLEAN.filter((f) => f.startsWith("--")).map((f) => `--no-${f.slice(2)}`)])];

const MANAGED_NAMES = new Set(MANAGED.flatMap((m) => m.flags));

/**
 * A flag's spellings and the prefixes argparse takes for each (`--served-model` for
 * --served-model-name). A managed flag keeps its own spellings only: src/recipe/args.ts
 * managedFlagOf names the flag a prefix of it stands for, and would pass one the table knew.
 */
export const vllmSpellings = (flags: readonly string[]): string[] =>
  flags.flatMap((f) => (MANAGED_NAMES.has(f) ? [f] : withPrefixes([f], ALL_OPTIONS))).filter((f, i, all) => all.indexOf(f) === i);

const spelled = <T extends { readonly flags: readonly string[] }>(list: readonly T[]): T[] => list.map((x) => ({ ...x, flags: vllmSpellings(x.flags) }));

/**
 * The table with every flag also under each prefix argparse takes for it, so that an abbreviated
 * flag is read with its own shape: `--api-ke K` is the key flag (moved to the env and redacted
 * like the whole flag), `--served-model a b` a list, `--speculative '{...}'` JSON. The managed
 * flags keep their own spellings: src/recipe/args.ts managedFlagOf names the flag a prefix stands
 * for. `--model` too: FlexibleArgumentParser moves it only when spelled whole.
 */
export const vllmFlags: EngineFlags = {
  ...DEFINED,
  choices: spelled(DEFINED.choices ?? []),
  boolean: vllmSpellings(DEFINED.boolean),
  many: vllmSpellings(DEFINED.many),
  json: vllmSpellings(DEFINED.json),
  jsonWhenBraced: vllmSpellings(DEFINED.jsonWhenBraced),
  singleNode: spelled(DEFINED.singleNode),
  worldSize: spelled(DEFINED.worldSize),
  dividesTensorParallel: spelled(DEFINED.dividesTensorParallel),
  backend: vllmSpellings(DEFINED.backend),
  flagFiles: vllmSpellings(DEFINED.flagFiles),
  apiKey: { ...DEFINED.apiKey, flags: vllmSpellings(DEFINED.apiKey.flags) },
};
