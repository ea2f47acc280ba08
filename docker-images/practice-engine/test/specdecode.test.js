'use strict';
// node --test docker-images/practice-engine/test/
const test = require('node:test');
const assert = require('node:assert/strict');
const { createSpecDecode } = require('../lib/specdecode.js');
const { ConfigError } = require('../lib/config.js');

const spec = (k, rate) => createSpecDecode({ 'speculative-config': JSON.stringify({ method: 'eagle', num_speculative_tokens: k }) }, rate === undefined ? {} : { PRACTICE_SPEC_ACCEPT_RATE: rate });

test('no speculative config: no speculative decoding, no counters (as vLLM)', () => {
  assert.equal(createSpecDecode({}, {}), null);
  assert.equal(createSpecDecode({ 'speculative-config': '{"method":"ngram"}' }, {}), null);
});

test('accepted / drafted follows PRACTICE_SPEC_ACCEPT_RATE, each step yielding accepted + 1 tokens', () => {
  const s = spec(5, '0.6');
  for (let i = 0; i < 4000; i++) s.onToken();
  const c = s.counters;
  assert.ok(Math.abs(c.accepted / c.draftTokens - 0.6) < 0.01, `${c.accepted}/${c.draftTokens}`);
  assert.equal(c.draftTokens, 5 * c.drafts);
  // Tokens emitted = accepted + one bonus per step (the last step may be part-way).
  assert.ok(Math.abs(c.accepted + c.drafts - 4000) <= 5);
  assert.equal(c.perPos.reduce((a, x) => a + x, 0), c.accepted);
  assert.ok(c.perPos[0] >= c.perPos[4], 'an earlier position is accepted at least as often');
});

test('the /metrics lines are vLLM\'s counter names with _total, labels model_name and engine', () => {
  const s = spec(2, '1');
  s.onToken();
  const text = s.metricsLines('practice').join('\n');
  assert.match(text, /^# TYPE vllm:spec_decode_num_draft_tokens_total counter$/m);
  assert.match(text, /^vllm:spec_decode_num_drafts_total\{model_name="practice",engine="0"\} 1\.0$/m);
  assert.match(text, /^vllm:spec_decode_num_draft_tokens_total\{model_name="practice",engine="0"\} 2\.0$/m);
  assert.match(text, /^vllm:spec_decode_num_accepted_tokens_total\{model_name="practice",engine="0"\} 2\.0$/m);
  assert.match(text, /^vllm:spec_decode_num_accepted_tokens_per_pos_total\{model_name="practice",engine="0",position="1"\} 1\.0$/m);
});

test('a bad PRACTICE_SPEC_ACCEPT_RATE is a knob error', () => {
  for (const bad of ['1.5', '-0.1', 'x']) assert.throws(() => spec(3, bad), ConfigError, bad);
});
