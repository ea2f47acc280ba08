'use strict';
// PRACTICE_WEDGE_AFTER_MS: an engine that looks healthy and generates nothing (an EngineCore in a
// decode hang). /health stays 200; a completion makes no token and never ends.
//   node --test docker-images/practice-engine/test/wedge.test.js

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { createApi } = require('../lib/http.js');
const { readConfig, ConfigError } = require('../lib/config.js');

/** One request; resolves with its status and body, or 'no answer' once `waitMs` passed without its end. */
function ask(port, method, path, body, waitMs) {
  return new Promise((resolve, reject) => {
    const q = http.request({ host: '127.0.0.1', port, method, path, headers: { 'content-type': 'application/json' } }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (s += c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode, body: s });
      });
    });
    const timer = setTimeout(() => {
      q.destroy();
      resolve('no answer');
    }, waitMs);
    q.on('error', (e) => {
      clearTimeout(timer);
      if (!q.destroyed || e.code !== 'ECONNRESET') reject(e);
    });
    q.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const oneToken = { model: 'm', prompt: 'Hello', max_tokens: 1 };

async function withApi(opts, f) {
  const api = createApi({ model: 'm', servedNames: ['m'], maxModelLen: 4096, kvTokens: 1000, tokensPerSec: 0, startTime: 0, ...opts });
  await api.listen('127.0.0.1', 0);
  try {
    await f(api.server.address().port, api);
  } finally {
    api.close();
  }
}

test('before its wedge it generates; once wedged /health answers 200 and a one-token completion never ends', async () => {
  await withApi({ wedgeAfterMs: 400 }, async (port) => {
    const before = await ask(port, 'POST', '/v1/completions', oneToken, 5000);
    assert.equal(before.status, 200);
    assert.equal(JSON.parse(before.body).usage.completion_tokens, 1);
    // Bounded: the wedge is 400 ms after the API started; this waits for the moment it is due, at most 5 s.
    const due = Date.now() + 5000;
    let held;
    while (Date.now() < due) {
      held = await ask(port, 'POST', '/v1/completions', oneToken, 300);
      if (held === 'no answer') break;
    }
    assert.equal(held, 'no answer', 'a completion still ended 5 s after the wedge was due');
    const health = await ask(port, 'GET', '/health', undefined, 5000);
    assert.equal(health.status, 200);
    const chat = await ask(port, 'POST', '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }, 500);
    assert.equal(chat, 'no answer');
    const models = await ask(port, 'GET', '/v1/models', undefined, 5000);
    assert.equal(models.status, 200);
  });
});

test('a held completion whose client goes away is counted aborted, not left running', async () => {
  await withApi({ wedgeAfterMs: 0 }, async (port, api) => {
    assert.equal(await ask(port, 'POST', '/v1/completions', { ...oneToken, stream: true }, 300), 'no answer');
    // The client's close reaches the server a moment later: bounded by 5 s.
    const due = Date.now() + 5000;
    while (api.stats.running !== 0 && Date.now() < due) await new Promise((r) => setTimeout(r, 10));
    assert.equal(api.stats.running, 0);
    assert.equal(api.stats.streamsAborted, 1);
  });
});

test('PRACTICE_WEDGE_AFTER_MS: unset is never; a count of ms is read; anything else is a usage error', () => {
  const args = { nnodes: 1 };
  assert.equal(readConfig({}, args).wedgeAfterMs, null);
  assert.equal(readConfig({ PRACTICE_WEDGE_AFTER_MS: '2500' }, args).wedgeAfterMs, 2500);
  assert.throws(() => readConfig({ PRACTICE_WEDGE_AFTER_MS: 'soon' }, args), (e) => e instanceof ConfigError && /PRACTICE_WEDGE_AFTER_MS must be an integer >= 0/.test(e.message));
});
