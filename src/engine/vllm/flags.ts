import type { EngineFlags, ManagedFlag } from "../adapter.js";
import { flagNames } from "../flag-names.js";
import { uniquePrefixes } from "./abbrev.js";

/*
 * vLLM's command line as its argument parser defines it. Sources (vllm-project/vllm):
 * - vllm/engine/arg_utils.py: EngineArgs.add_cli_args, _compute_kwargs (bool fields get
 *   argparse.BooleanOptionalAction, so `--x` and `--no-x` take no value; list fields get
 *   nargs="+"; dataclass fields are parsed with TypeAdapter.validate_json, dict fields with
 *   json.loads, dict-or-str fields (union_dict_and_str) with json.loads only when the value is
 *   `{...}`); the aliases `-n`, `-r`, `-tp`, `-pp`, `-dcp`, `-pcp`, `-dp`, `-dpn`, `-dpr`,
 *   `-dpl`, `-dpa`, `-dpp`, `-dpb`, `-dph`, `-dpe`, `-ep`, `-q`, `-O`.
 * - vllm/entrypoints/openai/cli_args.py: make_arg_parser (`--headless`, `--api-server-count`/
 *   `-asc`, `--config`, `--grpc`) and FrontendArgs (`--uds`: "If set, host and port arguments
 *   are ignored"; `--api-key` is list[str], so nargs="+"; `--chat-template` is a plain str;
 *   `--default-chat-template-kwargs` and `--allowed-origins/-methods/-headers` are json.loads).
 * - vllm/utils/argparse_utils.py: FlexibleArgumentParser turns `_` into `-` in a `--` flag's
 *   name up to the first `.`, moves `--model X` to the front as the positional model, and
 *   subclasses argparse.ArgumentParser; vllm/entrypoints/cli/serve.py subparser_init makes the
 *   `serve` parser with add_parser and no allow_abbrev, so argparse's default (True) holds: a
 *   unique prefix (`--nnode`) is taken for the whole flag.
 */

/** Flags launcher writes itself on every rank (mp backend) or the head (Ray). */
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
];

/** vLLM's flags that take no value (store_true, or BooleanOptionalAction with its `--no-` twin). */
const BOOLEAN = [
  // ModelConfig, LoadConfig
  "--trust-remote-code", "--enforce-eager", "--disable-sliding-window", "--disable-cascade-attn",
  "--skip-tokenizer-init", "--enable-prompt-embeds", "--enable-sleep-mode", "--enable-return-routed-experts",
  "--use-tqdm-on-load",
  // ParallelConfig
  "--data-parallel-hybrid-lb", "-dph", "--data-parallel-external-lb", "-dpe", "--enable-expert-parallel", "-ep",
  "--enable-dbo", "--enable-elastic-ep", "--disable-nccl-for-dp-synchronization", "--enable-eplb",
  "--eplb-log-balancedness", "--ray-workers-use-nsight", "--disable-custom-all-reduce",
  "--enable-multimodal-encoder-data-parallel", "--enable-ep-weight-filter", "--numa-bind",
  // CacheConfig
  "--enable-prefix-caching", "--calculate-kv-scales", "--kv-sharing-fast-prefill",
  // MultiModalConfig
  "--language-model-only", "--enable-mm-embeds", "--disable-mm-preprocessor-cache", "--mm-encoder-only",
  "--interleave-mm-strings", "--skip-mm-profiling",
  // LoRAConfig
  "--enable-lora", "--fully-sharded-loras", "--enable-tower-connector-lora",
  // ObservabilityConfig
  "--kv-cache-metrics", "--cudagraph-metrics", "--enable-layerwise-nvtx-tracing", "--enable-mfu-metrics",
  "--enable-logging-iteration-details",
  // SchedulerConfig
  "--enable-chunked-prefill", "--disable-chunked-mm-input", "--disable-hybrid-kv-cache-manager", "--async-scheduling",
  // AsyncEngineArgs and others
  "--disable-log-stats", "--aggregate-engine-logging", "--enable-log-requests", "--disable-log-requests",
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
  "--numa-bind-cpus",
];

/** Values vLLM reads with json.loads or validate_json: they must be JSON. */
const JSON_VALUED = [
  "--speculative-config", "--kv-transfer-config", "--kv-events-config", "--ec-transfer-config", "--compilation-config",
  "-O", "--additional-config", "--structured-outputs-config", "--eplb-config", "--attention-config", "--kernel-config",
  "--profiler-config", "--weight-transfer-config", "--reasoning-config", "--pooler-config", "--override-pooler-config",
  "--rope-scaling", "--mm-processor-kwargs", "--media-io-kwargs", "--override-generation-config",
  "--model-loader-extra-config", "--limit-mm-per-prompt", "--default-chat-template-kwargs", "--allowed-origins",
  "--allowed-methods", "--allowed-headers", "--default-mm-loras",
];

/** Dict-or-string values (union_dict_and_str): JSON only when written as `{...}`. */
const JSON_WHEN_BRACED = ["--hf-overrides", "--lora-modules"];

/** The table as vLLM defines its flags; vllmFlags below adds the key flag's abbreviations. */
const DEFINED: EngineFlags = {
  managed: MANAGED,
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

/**
 * `--api-key` and the prefixes argparse takes for it (./abbrev.ts; `--api-k` and longer, as
 * `--api-server-count` shares `--api-`): each is the key flag, with its list of values, so that
 * an abbreviated key is moved to the env and redacted like the whole flag.
 */
const KEY_SPELLINGS = uniquePrefixes("--api-key", flagNames(DEFINED));

export const vllmFlags: EngineFlags = {
  ...DEFINED,
  many: [...DEFINED.many, ...KEY_SPELLINGS.filter((f) => !DEFINED.many.includes(f))],
  apiKey: { ...DEFINED.apiKey, flags: KEY_SPELLINGS },
};
