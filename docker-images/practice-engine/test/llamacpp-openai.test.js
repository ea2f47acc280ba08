'use strict';
// The llama.cpp persona's chat completions as an OpenAI client (launcher bench, eval) reads them:
// the length asked and the streamed usage, as llama-server's server-task.cpp gives them.
//   node --test docker-images/practice-engine/test/llamacpp-openai.test.js

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { createLlamaApi } = require('../lib/llamacpp/http.js');
const { postChat } = require('./loopback-http.js');

/** The persona's HTTP server, loaded, at full speed, on a free loopback port; closed after the test. */
async function server(t) {
  const state = { loaded: true, alias: 'practice', keys: [], ctx: 4096, metrics: true, tokensPerSec: 100_000, wrongAnswers: 0, fingerprint: 'b0-practice', counters: { prompt: 0, promptSeconds: 0, predicted: 0, predictedSeconds: 0, decodes: 0, processing: 0 } };
  const s = createLlamaApi(state);
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => s.close(resolve)));
  return s.address().port;
}

/** A chat completion's body text. */
const post = async (port, body) => (await postChat(port, body)).body;

const events = (text) => text.split('\n\n').map((m) => m.trim()).filter((m) => m.startsWith('data: ') && m !== 'data: [DONE]').map((m) => JSON.parse(m.slice(6)));
const messages = [{ role: 'user', content: 'tell me something long' }];

test('the length asked: n_predict, else max_completion_tokens, else max_tokens', async (t) => {
  const port = await server(t);
  const len = async (body) => JSON.parse(await post(port, { messages, ...body })).usage.completion_tokens;
  assert.equal(await len({ max_completion_tokens: 20 }), 20);
  assert.equal(await len({ max_completion_tokens: 7, max_tokens: 3 }), 7);
  assert.equal(await len({ n_predict: 5, max_completion_tokens: 7 }), 5);
  assert.equal(await len({ max_tokens: 3 }), 3);
});

test('a stream with stream_options.include_usage ends with a chunk of empty choices and the usage; without, no usage', async (t) => {
  const port = await server(t);
  const withUsage = events(await post(port, { messages, max_completion_tokens: 6, stream: true, stream_options: { include_usage: true } }));
  const last = withUsage.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 6);
  assert.ok(last.usage.prompt_tokens > 0);
  assert.equal(withUsage.at(-2).choices[0].finish_reason, 'length');
  assert.equal(withUsage.filter((e) => e.usage !== undefined).length, 1, 'usage only in the last chunk');
  assert.equal(withUsage.filter((e) => typeof e.choices[0]?.delta?.content === 'string').length, 6);

  const without = events(await post(port, { messages, max_completion_tokens: 6, stream: true }));
  assert.ok(without.every((e) => e.usage === undefined && e.choices.length === 1), JSON.stringify(without.at(-1)));
  assert.ok(without.at(-1).timings, 'the timings ride the last chunk');
});
