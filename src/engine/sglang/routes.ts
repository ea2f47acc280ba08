/**
 * SGLang's HTTP routes under /v1, and which of them a gateway client may reach with the engine's
 * key. Read from python/sglang/srt/entrypoints/http_server.py (sgl-project/sglang 001067ff): the
 * OpenAI-compatible routes (/v1/completions, /v1/chat/completions, /v1/embeddings, /v1/rerank,
 * /v1/score, /v1/responses, /v1/models) beside SGLang's native ones outside /v1 (/generate,
 * /health, /health_generate, /flush_cache, /update_weights_from_disk, ...), which the gateway never
 * forwards (it forwards nothing outside /v1).
 */

/** Forwarded: stateless inference, each request answered on its own. */
export const SGLANG_FORWARDED: Readonly<Record<string, readonly string[]>> = {
  "/v1/chat/completions": ["POST"],
  "/v1/completions": ["POST"],
  "/v1/embeddings": ["POST"],
  "/v1/rerank": ["POST"],
  "/v1/score": ["POST"],
  "/v1/responses": ["POST"],
};

/** Routes under /v1 SGLang has and the gateway never forwards, with why. */
export const SGLANG_REFUSED: Readonly<Record<string, string>> = {
  // Stored responses are read and cancelled by their id alone (as vLLM's, ../vllm/routes.ts).
  "/v1/responses/{response_id}": "a stored response is read by its id alone, so any client could read another's",
  "/v1/responses/{response_id}/cancel": "a response is cancelled by its id alone, so any client could cancel another's",
  // The files and batches API: uploads and batch jobs kept in the server, listed and read by id.
  "/v1/files": "uploaded files are kept in the engine for every client (read by id alone)",
  "/v1/batches": "batch jobs are kept in the engine for every client (read and cancelled by id alone)",
};
