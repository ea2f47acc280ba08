'use strict';
// practice-engine's llama.cpp persona (not llama.cpp): llama-server's HTTP as tools/server answers
// it (server.cpp registers the routes; server-http.cpp answers before the model is loaded):
//   GET /health, /v1/health   503 {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}
//                             until the model is loaded, then 200 {"status":"ok"}; no API key asked
//   GET /models, /v1/models   the model under its alias; no API key asked
//   POST /v1/chat/completions, /chat/completions, /v1/completions, /completions (stream or not)
//   GET /metrics              with --metrics: llamacpp:* (server-context.cpp), else 501
// With --api-key (or LLAMA_API_KEY) every other route wants `Authorization: Bearer KEY`, else 401
// {"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}; while the
// model loads, every route answers 503 first, the key unasked.

const http = require('node:http');
const { answerFor, answerTokens } = require('../answers.js');
const { hash, tokenAt } = require('../http.js');

const PUBLIC = new Set(['/health', '/v1/health', '/models', '/v1/models']);

function error(res, code, message, type) {
  const body = JSON.stringify({ error: { code, message, type } });
  res.writeHead(code, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function json(res, value) {
  const body = JSON.stringify(value);
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const text = (c) => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('') : '');
const words = (s) => Math.max(1, s.split(/\s+/).filter(Boolean).length);

/** The server; `state` is shared with the boot: { loaded, alias, keys, metrics, tokensPerSec, wrongAnswers, counters }. */
function createLlamaApi(state) {
  const c = state.counters;
  const metricsText = () => {
    const lines = [];
    const put = (type, name, help, value) => lines.push(`# HELP llamacpp:${name} ${help}`, `# TYPE llamacpp:${name} ${type}`, `llamacpp:${name} ${value}`);
    put('counter', 'prompt_tokens_total', 'Number of prompt tokens processed.', c.prompt);
    put('counter', 'prompt_seconds_total', 'Prompt process time', c.promptSeconds);
    put('counter', 'tokens_predicted_total', 'Number of generation tokens processed.', c.predicted);
    put('counter', 'tokens_predicted_seconds_total', 'Predict process time', c.predictedSeconds);
    put('counter', 'n_decode_total', 'Total number of llama_decode() calls', c.decodes);
    put('gauge', 'requests_processing', 'Number of requests processing.', c.processing);
    put('gauge', 'requests_deferred', 'Number of requests deferred.', 0);
    return `${lines.join('\n')}\n`;
  };

  async function generate(req, res, body, chat) {
    const prompt = chat ? text(body.messages[body.messages.length - 1]?.content) : String(body.prompt ?? '');
    const promptTokens = chat ? body.messages.reduce((a, m) => a + words(text(m && m.content)), 0) : words(prompt);
    const answer = chat ? answerFor(prompt, body, { hash, wrongAnswers: state.wrongAnswers }) : null;
    const answerToks = answer === null ? null : answerTokens(answer);
    // server-task.cpp params_from_json_cmpl (ggml-org/llama.cpp 00efb3e1): n_predict, else
    // max_completion_tokens, else max_tokens.
    const asked = [body.n_predict, body.max_completion_tokens, body.max_tokens].find((v) => v !== undefined);
    const max = Number.isInteger(asked) && asked > 0 ? asked : 16;
    const n = answerToks === null ? max : Math.min(max, answerToks.length);
    const finish = answerToks !== null && n === answerToks.length ? 'stop' : 'length';
    const seed = hash(prompt);
    const tok = (i) => (answerToks === null ? tokenAt(i, seed) : answerToks[i]);
    const id = `chatcmpl-${seed.toString(36)}${Date.now().toString(36)}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { completion_tokens: n, prompt_tokens: promptTokens, total_tokens: n + promptTokens };
    const gapMs = 1000 / Math.max(1, state.tokensPerSec);
    c.processing++;
    c.prompt += promptTokens;
    const started = Date.now();
    let gone = false;
    res.on('close', () => (gone = true));
    try {
      if (body.stream === true) {
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
        const chunk = (choice, extra = {}) => res.write(`data: ${JSON.stringify({ choices: [choice], created, id, model: state.alias, system_fingerprint: state.fingerprint, object: chat ? 'chat.completion.chunk' : 'text_completion', ...extra })}\n\n`);
        if (chat) chunk({ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } });
        for (let i = 0; i < n && !gone; i++) {
          await new Promise((r) => setTimeout(r, gapMs));
          c.predicted++;
          c.decodes++;
          chunk(chat ? { finish_reason: null, index: 0, delta: { content: tok(i) } } : { text: tok(i), index: 0, logprobs: null, finish_reason: null });
        }
        const timings = { timings: { predicted_n: n, prompt_n: promptTokens } };
        // server-task.cpp to_json_oaicompat_chat_stream: a chat's finish chunk, then, with
        // stream_options.include_usage, a chunk of empty choices with the usage (OpenAI's spec for
        // the last chunk); the timings ride the last one.
        const includeUsage = chat && !!(body.stream_options && body.stream_options.include_usage);
        const last = chat ? (includeUsage ? {} : timings) : { usage, ...timings };
        chunk(chat ? { finish_reason: finish, index: 0, delta: {} } : { text: '', index: 0, logprobs: null, finish_reason: finish }, last);
        if (includeUsage) res.write(`data: ${JSON.stringify({ choices: [], created, id, model: state.alias, system_fingerprint: state.fingerprint, object: 'chat.completion.chunk', usage, ...timings })}\n\n`);
        res.end('data: [DONE]\n\n');
        return;
      }
      let out = '';
      for (let i = 0; i < n && !gone; i++) {
        await new Promise((r) => setTimeout(r, gapMs));
        c.predicted++;
        c.decodes++;
        out += tok(i);
      }
      const choice = chat ? { finish_reason: finish, index: 0, message: { role: 'assistant', content: out } } : { text: out, index: 0, logprobs: null, finish_reason: finish };
      json(res, { choices: [choice], created, model: state.alias, system_fingerprint: state.fingerprint, object: chat ? 'chat.completion' : 'text_completion', usage, id, timings: { predicted_n: n, prompt_n: promptTokens } });
    } finally {
      c.processing--;
      c.predictedSeconds += (Date.now() - started) / 1000;
    }
  }

  function route(req, res, raw) {
    const url = new URL(req.url, 'http://x');
    const p = url.pathname;
    // server-http.cpp's middlewares in their order: the server's state (503 "Loading model" for
    // every route until the model is loaded), then the API key.
    if (!state.loaded) return error(res, 503, 'Loading model', 'unavailable_error');
    if (!PUBLIC.has(p) && state.keys.length > 0) {
      const auth = req.headers.authorization ?? '';
      if (!state.keys.some((k) => auth === `Bearer ${k}`)) return error(res, 401, 'Invalid API Key', 'authentication_error');
    }
    if (req.method === 'GET' && (p === '/health' || p === '/v1/health')) return json(res, { status: 'ok' });
    if (req.method === 'GET' && (p === '/models' || p === '/v1/models')) {
      const created = Math.floor(Date.now() / 1000);
      return json(res, { models: [{ name: state.alias, model: state.alias, type: 'model' }], object: 'list', data: [{ id: state.alias, object: 'model', created, owned_by: 'llamacpp', meta: { n_ctx_train: state.ctx } }] });
    }
    if (req.method === 'GET' && p === '/metrics') {
      if (!state.metrics) return error(res, 501, 'This server does not support metrics endpoint. Start it with `--metrics`', 'not_supported_error');
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      return res.end(metricsText());
    }
    const chat = p === '/v1/chat/completions' || p === '/chat/completions';
    const completion = p === '/v1/completions' || p === '/completions' || p === '/completion';
    if (req.method === 'POST' && (chat || completion)) {
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        return error(res, 400, 'Failed to parse the request body as JSON', 'invalid_request_error');
      }
      if (chat && (!Array.isArray(body.messages) || body.messages.length === 0)) return error(res, 400, "'messages' is required", 'invalid_request_error');
      return void generate(req, res, body, chat).catch(() => res.destroy());
    }
    return error(res, 404, 'File Not Found', 'not_found_error');
  }

  return http.createServer((req, res) => {
    const parts = [];
    let size = 0;
    req.on('data', (d) => {
      size += d.length;
      if (size > 8 << 20) req.destroy();
      else parts.push(d);
    });
    req.on('end', () => route(req, res, Buffer.concat(parts).toString('utf8')));
  });
}

module.exports = { createLlamaApi };
