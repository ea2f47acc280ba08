'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): a tiny OpenAI-compatible
// HTTP API with deterministic output, built on node:http.

const http = require('node:http');
const { answerFor, answerTokens, badChatOptions } = require('./answers.js');

const WORDS = [
  'the', 'quick', 'brown', 'fox', 'jumps', 'over', 'a', 'lazy', 'dog', 'while',
  'practice', 'engine', 'tokens', 'stream', 'gently', 'across', 'many', 'spark', 'nodes', 'and',
  'every', 'answer', 'is', 'made', 'up', 'for', 'testing', 'only', 'not', 'real',
  'model', 'output',
];

const MAX_BODY = 16 * 1024 * 1024;
const MAX_TOKENS_CAP = 4096;

/** FNV-1a 32-bit with a murmur3 finaliser (so near-identical strings differ). */
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

function tokenAt(i, seed) {
  return WORDS[(i + seed) % WORDS.length] + ' ';
}

function contentText(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p) => (typeof p === 'string' ? p : p && typeof p.text === 'string' ? p.text : '')).join('');
  }
  return content == null ? '' : JSON.stringify(content);
}

function countWords(s) {
  const m = s.match(/\S+/g);
  return m ? m.length : 0;
}

function embedding(s) {
  const v = [];
  for (let j = 0; j < 8; j++) v.push((hash(`${j}:${s}`) / 0xffffffff) * 2 - 1);
  const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0)) || 1;
  return v.map((x) => Number((x / norm).toFixed(6)));
}

class HttpError extends Error {
  constructor(code, type, message) {
    super(message);
    this.code = code;
    this.type = type;
  }
}

function sendJson(res, code, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res, code, type, message) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, code, { error: { message, type, code } });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new HttpError(413, 'BadRequestError', `Request body larger than ${MAX_BODY} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/**
 * opts: { model, servedNames: string[], maxModelLen, kvTokens, tokensPerSec, startTime (s) }
 * Returns { server, listen(host, port): Promise<void>, close() }.
 */
function createApi(opts) {
  const servedName = opts.servedNames[0];
  // PRACTICE_WEDGE_AFTER_MS: from then on every generation stalls before its next token, as a
  // decode hang does; /health, /v1/models and /metrics still answer (the API server lives).
  const wedgeAt = opts.wedgeAfterMs === null || opts.wedgeAfterMs === undefined ? Infinity : Date.now() + opts.wedgeAfterMs;
  const names = new Set([...opts.servedNames, opts.model]);
  const stats = {
    running: 0,
    activeTokens: 0,
    promptTokens: 0,
    generationTokens: 0,
    streamsOpen: 0,
    streamsStarted: 0,
    streamsAborted: 0,
    waiting: 0,
    preemptions: 0,
  };
  let seq = 0;
  const waitingQueue = [];

  function checkModel(body) {
    if (body.model === undefined || body.model === null) return servedName;
    if (typeof body.model !== 'string' || !names.has(body.model)) {
      throw new HttpError(404, 'NotFoundError', `The model \`${body.model}\` does not exist.`);
    }
    return body.model;
  }

  function maxTokens(body) {
    let n = body.max_tokens ?? body.max_completion_tokens;
    if (n === undefined || n === null) return 16;
    if (!Number.isInteger(n) || n < 1) {
      throw new HttpError(400, 'BadRequestError', `max_tokens must be a positive integer, got ${JSON.stringify(n)}`);
    }
    return Math.min(n, MAX_TOKENS_CAP);
  }

  /**
   * Emit n tokens at opts.tokensPerSec (0 = as fast as possible, yielding with
   * setImmediate between tokens). Returns cancel(). onEnd(aborted) runs once.
   */
  function generate(n, seed, onToken, onEnd, tokenOf = (i) => tokenAt(i, seed)) {
    const rate = opts.tokensPerSec;
    const start = Date.now();
    let i = 0;
    let timer = null;
    let immediate = null;
    let finished = false;
    const step = () => {
      timer = null;
      immediate = null;
      if (finished) return;
      // Wedged: no token and no end, ever; only the client going away (cancel) ends it.
      if (Date.now() >= wedgeAt) return;
      if (i >= n) {
        finished = true;
        onEnd(false);
        return;
      }
      onToken(i, tokenOf(i));
      i++;
      if (finished) return;
      if (rate > 0) {
        const due = start + (i * 1000) / rate;
        timer = setTimeout(step, Math.max(0, due - Date.now()));
      } else {
        immediate = setImmediate(step);
      }
    };
    immediate = setImmediate(step);
    return function cancel() {
      if (finished) return;
      finished = true;
      if (timer) clearTimeout(timer);
      if (immediate) clearImmediate(immediate);
      onEnd(true);
    };
  }

  function completion(req, res, body, kind) {
    const model = checkModel(body);
    let n = maxTokens(body);
    let seedText;
    let promptTokens;
    if (kind === 'chat') {
      if (!Array.isArray(body.messages) || body.messages.length === 0) {
        throw new HttpError(400, 'BadRequestError', '`messages` must be a non-empty array');
      }
      const last = body.messages[body.messages.length - 1];
      seedText = contentText(last && last.content);
      const bad = badChatOptions(body);
      if (bad) throw new HttpError(400, 'BadRequestError', bad);
      promptTokens = body.messages.reduce((a, m) => a + countWords(contentText(m && m.content)), 0);
    } else {
      if (body.prompt === undefined || body.prompt === null) {
        throw new HttpError(400, 'BadRequestError', '`prompt` is required');
      }
      seedText = Array.isArray(body.prompt) ? body.prompt.map((p) => (typeof p === 'string' ? p : JSON.stringify(p))).join('') : String(body.prompt);
      promptTokens = countWords(seedText);
    }
    promptTokens = Math.max(1, promptTokens);
    const seed = hash(seedText);
    // An eval question of lib/answers.js's rule gets its answer (to its end: finish_reason stop).
    const answer = kind === 'chat' ? answerFor(seedText, body, { hash, wrongAnswers: opts.wrongAnswers || 0 }) : null;
    const answerToks = answer === null ? null : answerTokens(answer);
    if (answerToks) n = Math.min(n, answerToks.length);
    const finish = answerToks && n === answerToks.length ? 'stop' : 'length';
    const stream = body.stream === true;
    const includeUsage = !!(body.stream_options && body.stream_options.include_usage);
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-practice-${++seq}`;
    const created = Math.floor(Date.now() / 1000);
    const object = kind === 'chat' ? (stream ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion';
    const usage = (c) => ({ prompt_tokens: promptTokens, completion_tokens: c, total_tokens: promptTokens + c });

    // One whose tokens outgrow the KV cache is preempted once (vllm:num_preemptions), as vLLM's
    // scheduler preempts a request when no KV block is left for it; it is not recomputed here.
    let preempted = false;
    let generated = 0;
    let text = '';
    if (stream) {
      stats.streamsOpen++;
      stats.streamsStarted++;
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
      res.flushHeaders();
    }
    const write = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const chunk = (choice) => ({ id, object, created, model, choices: [choice] });

    let cancel = null;
    const begin = () => {
      stats.running++;
      stats.promptTokens += promptTokens;
      stats.activeTokens += promptTokens;
      cancel = generate(
        n,
        seed,
        (i, tok) => {
          generated++;
          stats.generationTokens++;
          if (opts.onToken) opts.onToken();
          stats.activeTokens++;
          if (!preempted && stats.activeTokens > opts.kvTokens) {
            preempted = true;
            stats.preemptions++;
          }
          if (stream) {
            if (kind === 'chat') {
              const delta = i === 0 ? { role: 'assistant', content: tok } : { content: tok };
              write(chunk({ index: 0, delta, logprobs: null, finish_reason: null }));
            } else {
              write(chunk({ index: 0, text: tok, logprobs: null, finish_reason: null }));
            }
          } else {
            text += tok;
          }
        },
        (aborted) => {
          stats.running--;
          stats.activeTokens -= promptTokens + generated;
          admitWaiting();
          if (stream) {
            stats.streamsOpen--;
            if (aborted) stats.streamsAborted++;
          }
          if (aborted) return;
          if (stream) {
            if (kind === 'chat') write(chunk({ index: 0, delta: {}, logprobs: null, finish_reason: finish }));
            else write(chunk({ index: 0, text: '', logprobs: null, finish_reason: 'length' }));
            if (includeUsage) write({ id, object, created, model, choices: [], usage: usage(generated) });
            res.end('data: [DONE]\n\n');
          } else if (kind === 'chat') {
            sendJson(res, 200, {
              id, object, created, model,
              choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finish }],
              usage: usage(generated),
            });
          } else {
            sendJson(res, 200, {
              id, object, created, model,
              choices: [{ index: 0, text, logprobs: null, finish_reason: 'length' }],
              usage: usage(generated),
            });
          }
        },
        answerToks ? (i) => answerToks[i] : undefined,
      );
    };
    // vLLM's scheduler admits a request only while KV blocks are free for it: one that arrives
    // with the cache full waits (vllm:num_requests_waiting) until running requests end.
    if (stats.running > 0 && stats.activeTokens >= opts.kvTokens) {
      waitingQueue.push(begin);
      stats.waiting++;
    } else {
      begin();
    }
    // Client went away before we finished: stop generating right now (or stop waiting).
    res.on('close', () => {
      if (res.writableFinished) return;
      if (cancel) {
        cancel();
        return;
      }
      const at = waitingQueue.indexOf(begin);
      if (at === -1) return;
      waitingQueue.splice(at, 1);
      stats.waiting--;
      if (stream) {
        stats.streamsOpen--;
        stats.streamsAborted++;
      }
    });
  }

  /** Starts waiting requests, oldest first, while the KV cache has room (or nothing runs). */
  function admitWaiting() {
    while (waitingQueue.length > 0 && (stats.running === 0 || stats.activeTokens < opts.kvTokens)) {
      stats.waiting--;
      waitingQueue.shift()();
    }
  }

  function embeddings(res, body) {
    const model = checkModel(body);
    let inputs = body.input;
    if (inputs === undefined || inputs === null) throw new HttpError(400, 'BadRequestError', '`input` is required');
    if (!Array.isArray(inputs) || (inputs.length > 0 && typeof inputs[0] === 'number')) inputs = [inputs];
    if (inputs.length === 0) throw new HttpError(400, 'BadRequestError', '`input` must not be empty');
    let tokens = 0;
    const data = inputs.map((x, index) => {
      const s = typeof x === 'string' ? x : JSON.stringify(x);
      tokens += Math.max(1, countWords(s));
      const v = embedding(s);
      // vLLM honours encoding_format; the openai client asks for base64 (float32, little-endian).
      const out = body.encoding_format === 'base64' ? Buffer.from(Float32Array.from(v).buffer).toString('base64') : v;
      return { object: 'embedding', index, embedding: out };
    });
    stats.promptTokens += tokens;
    sendJson(res, 200, {
      id: `embd-practice-${++seq}`,
      object: 'list',
      created: Math.floor(Date.now() / 1000),
      model,
      data,
      usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
    });
  }

  function metrics(res) {
    const label = `{model_name="${servedName.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"}`;
    const usage = Math.min(1, Math.max(0, stats.activeTokens / opts.kvTokens));
    const lines = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running${label} ${stats.running}`,
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting${label} ${stats.waiting}`,
      '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
      '# TYPE vllm:kv_cache_usage_perc gauge',
      `vllm:kv_cache_usage_perc${label} ${usage}`,
      '# HELP vllm:prompt_tokens_total Number of prefill tokens processed.',
      '# TYPE vllm:prompt_tokens_total counter',
      `vllm:prompt_tokens_total${label} ${stats.promptTokens}`,
      '# HELP vllm:generation_tokens_total Number of generation tokens processed.',
      '# TYPE vllm:generation_tokens_total counter',
      `vllm:generation_tokens_total${label} ${stats.generationTokens}`,
      '# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.',
      '# TYPE vllm:num_preemptions_total counter',
      `vllm:num_preemptions_total${label} ${stats.preemptions}`,
      '# HELP practice_open_streams Streaming responses currently open (practice-engine only).',
      '# TYPE practice_open_streams gauge',
      `practice_open_streams ${stats.streamsOpen}`,
      ...(opts.extraMetrics ? opts.extraMetrics(servedName) : []),
      '',
    ];
    const body = lines.join('\n');
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }

  // vLLM's AuthenticationMiddleware (vllm/entrypoints/openai/server_utils.py, added by build_app
  // when --api-key or VLLM_API_KEY is set): OPTIONS passes, routes under /v1 (and /v2,
  // /inference) need `Authorization: Bearer KEY`, others (/health, /metrics) do not; a refusal
  // is 401 {"error": "Unauthorized"}.
  const keys = opts.apiKeys || [];
  function authorized(req, path) {
    if (keys.length === 0 || req.method === 'OPTIONS') return true;
    if (!['/v1', '/v2', '/inference'].some((p) => path === p || path.startsWith(`${p}/`))) return true;
    return keys.some((k) => req.headers.authorization === `Bearer ${k}`);
  }

  async function handle(req, res) {
    const path = (req.url || '/').split('?')[0];
    if (!authorized(req, path)) {
      sendJson(res, 401, { error: 'Unauthorized' });
      return;
    }
    const route = `${req.method} ${path}`;
    switch (route) {
      case 'GET /health':
        res.writeHead(200, { 'Content-Length': 0 });
        res.end();
        return;
      case 'GET /version':
        sendJson(res, 200, { version: '0.0.0+practice-engine' });
        return;
      case 'GET /v1/models':
        sendJson(res, 200, {
          object: 'list',
          data: [{
            id: servedName, object: 'model', created: opts.startTime, owned_by: 'practice-engine',
            root: opts.model, parent: null, max_model_len: opts.maxModelLen, permission: [],
          }],
        });
        return;
      case 'GET /metrics':
        metrics(res);
        return;
      case 'GET /practice/streams':
        sendJson(res, 200, { open: stats.streamsOpen, started: stats.streamsStarted, aborted: stats.streamsAborted });
        return;
      case 'POST /v1/chat/completions':
      case 'POST /v1/completions':
      case 'POST /v1/embeddings': {
        const raw = await readBody(req);
        let body;
        try {
          body = JSON.parse(raw);
        } catch (e) {
          throw new HttpError(400, 'BadRequestError', `Invalid JSON body: ${e.message}`);
        }
        if (!body || typeof body !== 'object' || Array.isArray(body)) {
          throw new HttpError(400, 'BadRequestError', 'Request body must be a JSON object');
        }
        if (path === '/v1/embeddings') embeddings(res, body);
        else completion(req, res, body, path === '/v1/chat/completions' ? 'chat' : 'text');
        return;
      }
      default:
        throw new HttpError(404, 'NotFoundError', `Not Found: ${req.method} ${path}`);
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      if (e instanceof HttpError) sendError(res, e.code, e.type, e.message);
      else sendError(res, 500, 'InternalServerError', String(e && e.message));
    });
  });
  server.keepAliveTimeout = 5000;

  function listen(host, port) {
    return new Promise((resolve, reject) => {
      const onErr = (e) => reject(e);
      server.once('error', onErr);
      server.listen({ host, port }, () => {
        server.removeListener('error', onErr);
        resolve();
      });
    });
  }

  function close() {
    try {
      server.close();
      server.closeAllConnections();
    } catch {
      /* ignore */
    }
  }

  return { server, listen, close, stats };
}

module.exports = { createApi, WORDS, hash, tokenAt, embedding };
