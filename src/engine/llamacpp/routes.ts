/**
 * llama-server's routes under /v1 (tools/server/server.cpp, where each is registered with
 * ctx_http.get/post), and which the gateway forwards with the engine's key.
 */

/** Forwarded: stateless inference, each request answered on its own. */
export const LLAMACPP_FORWARDED: Readonly<Record<string, readonly string[]>> = {
  "/v1/chat/completions": ["POST"],
  "/v1/completions": ["POST"],
  "/v1/embeddings": ["POST"],
  "/v1/responses": ["POST"],
  "/v1/rerank": ["POST"],
  "/v1/messages": ["POST"],
  "/v1/messages/count_tokens": ["POST"],
  "/v1/audio/transcriptions": ["POST"],
};

/** Routes under /v1 llama-server has and the gateway never forwards, with why. */
export const LLAMACPP_REFUSED: Readonly<Record<string, string>> = {
  // server.cpp: GET/DELETE /v1/stream/:conv_id resume or drop a stream by its conversation id
  // alone, and GET /v1/streams lists them: any client could read or end another's.
  "/v1/stream/{conv_id}": "a stream is read or dropped by its conversation id alone, so any client could reach another's",
  "/v1/streams": "it lists every client's streams",
  // POST /v1/chat/completions/control steers a running generation by its id.
  "/v1/chat/completions/control": "it steers a running generation by its id alone, so any client could steer another's",
};
