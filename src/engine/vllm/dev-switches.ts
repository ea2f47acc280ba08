/*
 * vLLM's env switches that open admin or development routes. Sources (vllm-project/vllm):
 * - VLLM_SERVER_DEV_MODE (vllm/envs.py, default "0"): api_server.py build_app registers the dev
 *   routers only `if envs.VLLM_SERVER_DEV_MODE` (register_vllm_dev_api_routers:
 *   vllm/entrypoints/serve/dev/: /collective_rpc, /sleep, /wake_up, /reset_prefix_cache,
 *   /server_info, the RLHF weight routes), logging "SECURITY WARNING: Development endpoints are
 *   enabled!". None is under /v1, so --api-key / VLLM_API_KEY guards none of them (the
 *   authentication middleware passes every path not starting with /v1).
 * - VLLM_ALLOW_RUNTIME_LORA_UPDATING (vllm/envs.py): vllm/entrypoints/serve/lora/api_router.py
 *   attach_router adds /v1/load_lora_adapter and /v1/unload_lora_adapter ("This should ONLY be
 *   used for local development!"): the served models change and any path on the node is loaded.
 * - VLLM_TORCH_PROFILER_DIR (vllm/envs.py): api_server.py registers /start_profile and
 *   /stop_profile (outside /v1) while it is set, "ONLY ... for local development!", and the
 *   traces are written into the container.
 * Any value counts (even "0"): the recipe names the switch, so it states the opt-in as well.
 */
export const VLLM_DEV_SWITCHES: readonly { readonly env: string; readonly opens: string }[] = [
  { env: "VLLM_SERVER_DEV_MODE", opens: "vLLM's development routes (/collective_rpc, /sleep, /wake_up, /reset_prefix_cache, /server_info, ...) with no key" },
  { env: "VLLM_ALLOW_RUNTIME_LORA_UPDATING", opens: "/v1/load_lora_adapter and /v1/unload_lora_adapter, which load any path on the node as an adapter" },
  { env: "VLLM_TORCH_PROFILER_DIR", opens: "/start_profile and /stop_profile with no key" },
];
