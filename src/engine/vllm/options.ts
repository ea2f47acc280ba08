/**
 * The vLLM release the static flag table (./flags.ts and this list) describes. Without the image's
 * own parser, launcher judges a recipe's args by this table; a vLLM older or newer than this may
 * know flags it lacks, or lack some it has.
 */
export const VLLM_TABLE_VERSION = "0.25.1";

/*
 * Every option string of `vllm serve` (long flags and aliases), for argparse's abbreviation rule
 * (./abbrev.ts): a prefix stands for a flag only when no other option starts with it, so the
 * prefixes must be reckoned against all of them, not only the flags the table gives a shape.
 * Sources: vLLM 0.17.1's `vllm serve --help=all` by group (a probe of the installed CLI, 2026-03),
 * and for what came after it, vllm/engine/arg_utils.py EngineArgs.add_cli_args and
 * vllm/entrypoints/launchers/cli_args.py make_arg_parser of vLLM main, September 2026 (-sc, -dc,
 * -dpm, --spec-*, --device-ids, --numa-bind*, --fault-tolerance-config, --shutdown-timeout ...).
 * A flag missing here only makes launcher take fewer prefixes as that flag's, never a wrong one:
 * vLLM itself refuses a prefix two flags share ("ambiguous option").
 */
export const VLLM_OPTIONS: readonly string[] = [
  // make_arg_parser and AsyncEngineArgs
  "-h", "--help", "--headless", "--api-server-count", "-asc", "--config", "--grpc", "--aggregate-engine-logging",
  "--disable-log-stats", "--enable-log-requests", "--fail-on-environ-validation",
  // FrontendArgs
  "--allow-credentials", "--allowed-headers", "--allowed-methods", "--allowed-origins", "--api-key", "--chat-template",
  "--chat-template-content-format", "--default-chat-template-kwargs", "--disable-access-log-for-endpoints",
  "--disable-fastapi-docs", "--disable-frontend-multiprocessing", "--disable-uvicorn-access-log",
  "--enable-auto-tool-choice", "--enable-force-include-usage", "--enable-log-deltas", "--enable-log-outputs",
  "--enable-offline-docs", "--enable-prompt-tokens-details", "--enable-request-id-headers",
  "--enable-server-load-tracking", "--enable-ssl-refresh", "--enable-tokenizer-info-endpoint",
  "--exclude-tools-when-tool-choice-none", "--h11-max-header-count", "--h11-max-incomplete-event-size", "--host",
  "--log-config-file", "--log-error-stack", "--lora-modules", "--max-log-len", "--middleware", "--port",
  "--response-role", "--return-tokens-as-token-ids", "--root-path", "--ssl-ca-certs", "--ssl-cert-reqs",
  "--ssl-certfile", "--ssl-ciphers", "--ssl-keyfile", "--tokens-only", "--tool-call-parser", "--tool-parser-plugin",
  "--tool-server", "--trust-request-chat-template", "--uds", "--use-gpu-for-pooling-score", "--uvicorn-log-level",
  "--enable-per-request-metrics", "--enable-flash-late-interaction", "--cohere-is-reasoning-model",
  // ModelConfig
  "--allow-deprecated-quantization", "--allowed-local-media-path", "--allowed-media-domains", "--code-revision",
  "--config-format", "--convert", "--disable-cascade-attn", "--disable-sliding-window", "--dtype",
  "--enable-prompt-embeds", "--enable-return-routed-experts", "--enable-sleep-mode", "--enforce-eager",
  "--generation-config", "--hf-config-path", "--hf-overrides", "--hf-token", "--io-processor-plugin",
  "--logits-processors", "--logprobs-mode", "--max-logprobs", "--max-model-len", "--model", "--model-impl",
  "--override-attention-dtype", "--override-generation-config", "--pooler-config", "--quantization", "-q",
  "--revision", "--runner", "--seed", "--served-model-name", "--skip-tokenizer-init", "--tokenizer",
  "--tokenizer-mode", "--tokenizer-revision", "--trust-remote-code",
  // LoadConfig
  "--download-dir", "--ignore-patterns", "--load-format", "--model-loader-extra-config", "--pt-load-map-location",
  "--safetensors-load-strategy", "--use-tqdm-on-load",
  // AttentionConfig, StructuredOutputsConfig
  "--attention-backend", "--reasoning-parser", "--reasoning-parser-plugin",
  // ParallelConfig
  "--all2all-backend", "--cp-kv-cache-interleave-size", "--data-parallel-address", "-dpa", "--data-parallel-backend",
  "-dpb", "--data-parallel-external-lb", "-dpe", "--data-parallel-hybrid-lb", "-dph", "--data-parallel-rank", "-dpn",
  "--data-parallel-rpc-port", "-dpp", "--data-parallel-size", "-dp", "--data-parallel-size-local", "-dpl",
  "--data-parallel-start-rank", "-dpr", "--data-parallel-multi-port-external-lb", "-dpm",
  "--dbo-decode-token-threshold", "--dbo-prefill-token-threshold", "--dcp-kv-cache-interleave-size",
  "--decode-context-parallel-size", "-dcp", "--disable-custom-all-reduce", "--disable-nccl-for-dp-synchronization",
  "--distributed-executor-backend", "--enable-dbo", "--enable-elastic-ep", "--enable-eplb", "--enable-expert-parallel",
  "-ep", "--eplb-config", "--expert-placement-strategy", "--master-addr", "--master-port",
  "--max-parallel-loading-workers", "--nnodes", "-n", "--node-rank", "-r", "--pipeline-parallel-size", "-pp",
  "--prefill-context-parallel-size", "-pcp", "--ray-workers-use-nsight", "--tensor-parallel-size", "-tp",
  "--ubatch-size", "--worker-cls", "--worker-extension-cls", "--dcp-comm-backend", "--dcp-q-replicate",
  "--distributed-timeout-seconds", "--cpu-distributed-timeout-seconds", "--numa-bind", "--numa-bind-nodes",
  "--numa-bind-cpus", "--device-ids", "--enable-fault-tolerance", "--enable-multimodal-encoder-data-parallel",
  "--enable-ep-weight-filter", "--eplb-log-balancedness",
  // CacheConfig
  "--block-size", "--calculate-kv-scales", "--enable-prefix-caching", "--gpu-memory-utilization", "--kv-cache-dtype",
  "--kv-cache-memory-bytes", "--kv-offloading-backend", "--kv-offloading-size", "--kv-sharing-fast-prefill",
  "--mamba-block-size", "--mamba-cache-dtype", "--mamba-cache-mode", "--mamba-ssm-cache-dtype",
  "--num-gpu-blocks-override", "--prefix-caching-hash-algo", "--swap-space", "--enable-cumem-allocator",
  // OffloadConfig
  "--cpu-offload-gb", "--cpu-offload-params", "--offload-backend", "--offload-group-size", "--offload-num-in-group",
  "--offload-params", "--offload-prefetch-step",
  // MultiModalConfig
  "--enable-mm-embeds", "--interleave-mm-strings", "--language-model-only", "--limit-mm-per-prompt",
  "--media-io-kwargs", "--mm-encoder-attn-backend", "--mm-encoder-only", "--mm-encoder-tp-mode",
  "--mm-processor-cache-gb", "--mm-processor-cache-type", "--mm-processor-kwargs", "--mm-shm-cache-max-object-size-mb",
  "--skip-mm-profiling", "--video-pruning-rate", "--mm-processor-device", "--disable-mm-preprocessor-cache",
  // LoRAConfig
  "--default-mm-loras", "--enable-lora", "--enable-tower-connector-lora", "--fully-sharded-loras", "--lora-dtype",
  "--max-cpu-loras", "--max-lora-rank", "--max-loras", "--specialize-active-lora", "--lora-target-modules",
  // ObservabilityConfig
  "--collect-detailed-traces", "--cudagraph-metrics", "--enable-layerwise-nvtx-tracing",
  "--enable-logging-iteration-details", "--enable-mfu-metrics", "--kv-cache-metrics", "--kv-cache-metrics-sample",
  "--otlp-traces-endpoint", "--show-hidden-metrics-for-version",
  // SchedulerConfig
  "--async-scheduling", "--disable-chunked-mm-input", "--disable-hybrid-kv-cache-manager", "--enable-chunked-prefill",
  "--long-prefill-token-threshold", "--max-long-partial-prefills", "--max-num-batched-tokens",
  "--max-num-partial-prefills", "--max-num-seqs", "--scheduler-cls", "--scheduling-policy", "--stream-interval",
  // CompilationConfig, KernelConfig
  "--cudagraph-capture-sizes", "--max-cudagraph-capture-size", "--enable-flashinfer-autotune", "--moe-backend",
  "--linear-backend", "--gdn-prefill-backend", "--kda-prefill-backend",
  // VllmConfig
  "--additional-config", "--attention-config", "-ac", "--compilation-config", "-cc", "--ec-transfer-config",
  "--kernel-config", "--kv-events-config", "--kv-transfer-config", "--optimization-level", "--performance-mode",
  "--profiler-config", "--speculative-config", "-sc", "--structured-outputs-config", "--weight-transfer-config",
  "--diffusion-config", "-dc", "--reasoning-config", "--ec-manager-config", "--fault-tolerance-config",
  "--spec-method", "--spec-model", "--spec-tokens", "--shutdown-timeout",
];
