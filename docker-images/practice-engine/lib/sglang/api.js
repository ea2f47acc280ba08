'use strict';
// practice-engine's SGLang persona: SGLang's HTTP server (a stand-in, not SGLang), on top of the
// practice OpenAI API (../http.js), as python/sglang/srt/entrypoints/http_server.py answers:
// - GET /health (and /health_generate): 503 until the warm-up request is done, 200 after; over a
//   hung scheduler (alive, silent) its health check's one-token request gets no answer, and the
//   route gives up after HEALTH_CHECK_TIMEOUT (SGLANG_HEALTH_CHECK_TIMEOUT, 20 s: http_server.py
//   health_generate) with 503. PRACTICE_SGLANG_HEALTH_TIMEOUT_MS shortens that wait for tests.
//   A dead scheduler takes the whole process down (./serve.js), so it has no /health at all;
// - GET /metrics: SGLang's Prometheus names (python/sglang/srt/metrics/collector.py);
// - GET /get_model_info and POST /generate, SGLang's native routes its own warm-up calls;
// - the OpenAI routes under /v1, which over a hung scheduler never answer (the tokenizer manager
//   waits for a reply that does not come);
// - --api-key (add_api_key_middleware): every route but /health* and /metrics needs
//   `Authorization: Bearer KEY`, else 401 {"error": "Unauthorized"}.

const { createApi } = require('../http.js');

function sglangMetrics(stats, servedName, kvTokens) {
  const label = `{model_name="${servedName.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"}`;
  const usage = Math.min(1, Math.max(0, stats.activeTokens / kvTokens));
  return [
    '# HELP sglang:num_running_reqs The number of running requests.',
    '# TYPE sglang:num_running_reqs gauge',
    `sglang:num_running_reqs${label} ${stats.running}`,
    '# HELP sglang:num_queue_reqs The number of requests in the waiting queue.',
    '# TYPE sglang:num_queue_reqs gauge',
    `sglang:num_queue_reqs${label} ${stats.waiting}`,
    '# HELP sglang:token_usage The token usage.',
    '# TYPE sglang:token_usage gauge',
    `sglang:token_usage${label} ${usage}`,
    '# HELP sglang:prompt_tokens_total Number of prefill tokens processed.',
    '# TYPE sglang:prompt_tokens_total counter',
    `sglang:prompt_tokens_total${label} ${stats.promptTokens}`,
    '# HELP sglang:generation_tokens_total Number of generation tokens processed.',
    '# TYPE sglang:generation_tokens_total counter',
    `sglang:generation_tokens_total${label} ${stats.generationTokens}`,
    '# HELP practice_open_streams Streaming responses currently open (practice-engine only).',
    '# TYPE practice_open_streams gauge',
    `practice_open_streams ${stats.streamsOpen}`,
    '',
  ].join('\n');
}

function send(res, code, body, type = 'application/json') {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** SGLang's wait for its health check's answer, in ms (20 s; at most 10 minutes from the knob). */
function healthTimeoutMs(env) {
  const text = (env.PRACTICE_SGLANG_HEALTH_TIMEOUT_MS ?? '').trim();
  return /^\d{1,6}$/.test(text) ? Number(text) : 20_000;
}

/** opts: createApi's, with apiKey (one key or undefined). Returns the api with warm() and hangScheduler(). */
function createSglangApi(opts) {
  const api = createApi({ ...opts, apiKeys: [] });
  const [openai] = api.server.listeners('request');
  api.server.removeAllListeners('request');
  let warm = false;
  let schedulerHung = false;
  const waitMs = healthTimeoutMs(process.env);
  const stuck = new Set();
  /** A request the scheduler never answers: it ends when its client gives up or the server closes. */
  const hold = (res) => {
    stuck.add(res);
    res.on('close', () => stuck.delete(res));
  };

  api.server.on('request', (req, res) => {
    const path = (req.url || '/').split('?')[0];
    const open = req.method === 'OPTIONS' || path.startsWith('/health') || path.startsWith('/metrics');
    if (!open && opts.apiKey !== undefined && req.headers.authorization !== `Bearer ${opts.apiKey}`) return send(res, 401, { error: 'Unauthorized' });
    const route = `${req.method} ${path}`;
    if (route === 'GET /health' || route === 'GET /health_generate') {
      if (warm && schedulerHung) {
        hold(res);
        const t = setTimeout(() => {
          stuck.delete(res);
          res.writeHead(503, { 'Content-Length': 0 });
          res.end();
        }, waitMs);
        res.on('close', () => clearTimeout(t));
        return undefined;
      }
      res.writeHead(warm ? 200 : 503, { 'Content-Length': 0 });
      return res.end();
    }
    if (route === 'GET /metrics') return send(res, 200, sglangMetrics(api.stats, opts.servedNames[0], opts.kvTokens), 'text/plain; version=0.0.4; charset=utf-8');
    if (route === 'GET /get_model_info') return send(res, 200, { model_path: opts.model, tokenizer_path: opts.model, is_generation: true });
    if (schedulerHung && (route === 'POST /generate' || path.startsWith('/v1/'))) return hold(res);
    if (route === 'POST /generate') return send(res, 200, { text: ' practice', meta_info: { prompt_tokens: 6, completion_tokens: 1 } });
    return openai(req, res);
  });

  return {
    ...api,
    warm: () => {
      warm = true;
    },
    hangScheduler: () => {
      schedulerHung = true;
    },
  };
}

module.exports = { createSglangApi, sglangMetrics, healthTimeoutMs };
