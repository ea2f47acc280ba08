'use strict';
// The practice engine's /metrics as launcher's live view reads it: vLLM's names
// (vllm/v1/metrics/loggers.py PrometheusStatLogger), with figures that move while it serves.
//   node --test docker-images/practice-engine/test/metrics.test.js

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { createApi } = require('../lib/http.js');

function get(port, p) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve(s));
    }).on('error', reject);
  });
}

/** A streamed chat request held open: resolves once its first chunk arrived, with a way to end it. */
function openStream(port, maxTokens) {
  return new Promise((resolve, reject) => {
    const q = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } }, (res) => {
      res.once('data', () => resolve({ close: () => q.destroy() }));
    });
    q.on('error', () => {});
    q.end(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'one two three four' }], max_tokens: maxTokens, stream: true }));
    setTimeout(() => reject(new Error('no first chunk within 30 s')), 30000).unref();
  });
}

const figure = (text, name) => {
  const m = new RegExp(`^${name}\\{model_name="m"\\} (\\S+)$`, 'm').exec(text);
  assert.ok(m, `${name} in\n${text}`);
  return Number(m[1]);
};

async function withApi(opts, f) {
  const api = createApi({ model: 'm', servedNames: ['m'], maxModelLen: 4096, startTime: 0, ...opts });
  await api.listen('127.0.0.1', 0);
  try {
    await f(api.server.address().port, api);
  } finally {
    api.close();
  }
}

test('/metrics has the gauges and counters of vLLM that launcher scrapes, with their TYPE lines', async () => {
  await withApi({ kvTokens: 1000, tokensPerSec: 0 }, async (port) => {
    const text = await get(port, '/metrics');
    for (const [name, type] of [
      ['vllm:num_requests_running', 'gauge'],
      ['vllm:num_requests_waiting', 'gauge'],
      ['vllm:kv_cache_usage_perc', 'gauge'],
      ['vllm:prompt_tokens_total', 'counter'],
      ['vllm:generation_tokens_total', 'counter'],
      ['vllm:num_preemptions_total', 'counter'],
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, 'm'));
      assert.equal(figure(text, name), 0, `${name} idle`);
    }
  });
});

test('while it serves, running and KV cache usage rise and fall back, and the token counters grow', async () => {
  await withApi({ kvTokens: 1000, tokensPerSec: 20 }, async (port) => {
    const s = await openStream(port, 4096);
    const busy = await get(port, '/metrics');
    assert.equal(figure(busy, 'vllm:num_requests_running'), 1);
    assert.ok(figure(busy, 'vllm:kv_cache_usage_perc') > 0, 'the prompt and the tokens so far hold KV');
    assert.ok(figure(busy, 'vllm:prompt_tokens_total') >= 4);
    assert.ok(figure(busy, 'vllm:generation_tokens_total') >= 1);
    s.close();
    let idle;
    for (let i = 0; i < 100; i++) {
      idle = await get(port, '/metrics');
      if (figure(idle, 'vllm:num_requests_running') === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(figure(idle, 'vllm:num_requests_running'), 0);
    assert.equal(figure(idle, 'vllm:kv_cache_usage_perc'), 0);
  });
});

test('a request whose tokens outgrow the KV cache is preempted once', async () => {
  await withApi({ kvTokens: 10, tokensPerSec: 0 }, async (port, api) => {
    // 4 prompt tokens + 8 generated pass 10 tokens of KV.
    const full = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'one two three four' }], max_tokens: 8 });
    await new Promise((resolve, reject) => {
      const q = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      q.on('error', reject);
      q.end(full);
    });
    assert.equal(figure(await get(port, '/metrics'), 'vllm:num_preemptions_total'), 1);
    assert.equal(api.stats.waiting, 0, 'a request that arrived with room did not wait');
  });
});

test('a request that arrives with the KV cache full waits until a running one ends, and is then served', async () => {
  await withApi({ kvTokens: 4, tokensPerSec: 50 }, async (port) => {
    // The first holds at least its 4 prompt tokens of KV: the cache is full when the second arrives.
    const first = await openStream(port, 4096);
    const second = openStream(port, 4096);
    let text;
    for (let i = 0; i < 200; i++) {
      text = await get(port, '/metrics');
      if (figure(text, 'vllm:num_requests_waiting') === 1) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(figure(text, 'vllm:num_requests_waiting'), 1, 'the second waits');
    assert.equal(figure(text, 'vllm:num_requests_running'), 1, 'only the first runs');
    first.close();
    // Its first chunk comes only once the first request ended.
    (await second).close();
    assert.equal(figure(await get(port, '/metrics'), 'vllm:num_requests_waiting'), 0);
  });
});
