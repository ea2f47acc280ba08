/**
 * vLLM's HTTP routes, and which of them a gateway client may reach with the engine's key.
 *
 * Read from vllm-project/vllm (main, vllm/entrypoints/openai/api_server.py at 0001948b: build_app
 * registers vllm/entrypoints/serve/__init__.py's routers (instrumentator: /health, /metrics,
 * /version ...; lora/api_router.py; profile/api_router.py; tokenize/api_router.py), the models
 * router, sagemaker's (/ping, /invocations), dev-mode routers under VLLM_SERVER_DEV_MODE
 * (/collective_rpc, /reset_prefix_cache, /sleep ...), then by task: generate/api_router.py
 * (openai/chat_completion, openai/responses, openai/completion, anthropic, generative scoring),
 * serve/disagg, serve/elastic_ep, serve/render, speech_to_text, pooling (embed, score, rerank).
 *
 * The engine's key opens every one of them alike (AuthenticationMiddleware checks only that the
 * key is there), so the gateway, which adds that key to whatever it forwards, forwards only what
 * one API client may do without touching another's work or the server itself.
 */

/** Forwarded: stateless inference, each request answered on its own. */
export const VLLM_FORWARDED: Readonly<Record<string, readonly string[]>> = {
  "/v1/chat/completions": ["POST"],
  "/v1/completions": ["POST"],
  // Tokenizer and template only: what the prompt becomes, nothing generated or kept.
  "/v1/completions/render": ["POST"],
  "/v1/embeddings": ["POST"],
  // Creating a response is inference; reading or cancelling one by id is not (below).
  "/v1/responses": ["POST"],
  // multipart/form-data bodies, passed through untouched.
  "/v1/audio/transcriptions": ["POST"],
  "/v1/audio/translations": ["POST"],
  "/v1/score": ["POST"],
  "/v1/rerank": ["POST"],
  // vllm/entrypoints/anthropic/api_router.py: Anthropic's Messages API on the same engine.
  "/v1/messages": ["POST"],
  "/v1/messages/count_tokens": ["POST"],
};

/**
 * Routes under /v1 the engine has and the gateway never forwards, with why. Routes outside /v1
 * (/collective_rpc, /sleep, /start_profile, /tokenize, /scale_elastic_ep, /invocations ...) are
 * never forwarded either: the gateway forwards nothing outside /v1 at all.
 */
export const VLLM_REFUSED: Readonly<Record<string, string>> = {
  // openai/responses/api_router.py: GET /v1/responses/{response_id} and POST .../cancel act on a
  // stored response by its id alone. The engine has no notion of which client made it, so behind
  // one shared engine key any client could read or cancel another's.
  "/v1/responses/{response_id}": "a stored response is read by its id alone, so any client could read another's",
  "/v1/responses/{response_id}/cancel": "a response is cancelled by its id alone, so any client could cancel another's",
  // serve/lora/api_router.py (registered when VLLM_ALLOW_RUNTIME_LORA_UPDATING is set): loads a
  // path or repo the client names into the engine, for every client: the server's state, not a request's.
  "/v1/load_lora_adapter": "loading an adapter changes the engine for every client (an operator's action)",
  "/v1/unload_lora_adapter": "unloading an adapter changes the engine for every client (an operator's action)",
};
