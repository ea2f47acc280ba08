/**
 * What launcher adds to every request it sends an engine whose recipe sets an API key (the gateway's
 * upstream requests, readiness, drain): the OpenAI convention vLLM checks on its /v1 routes
 * (vllm/entrypoints/openai/api_server.py build_app: AuthenticationMiddleware, `Authorization:
 * Bearer KEY`). Its other routes (/health, /metrics) ignore it, so it is sent everywhere alike.
 */
export function engineAuthHeaders(apiKey: string | undefined): Record<string, string> {
  return apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
}
