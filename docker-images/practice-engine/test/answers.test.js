'use strict';
// The practice engine's eval answers (lib/answers.js): node --test docker-images/practice-engine/test/

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { postChat } = require('./loopback-http.js');
const { freePort } = require('./free-port.js');
const path = require('node:path');
const { answerFor, answerTokens } = require('../lib/answers.js');
const { hash } = require('../lib/http.js');

const plain = { hash, wrongAnswers: 0 };

test('arithmetic questions get the result; others get no answer (filler)', () => {
  assert.equal(answerFor('What is 2 + 3?', {}, plain), '5');
  assert.equal(answerFor('Quick: what is 7 * -6 ?', {}, plain), '-42');
  assert.equal(answerFor('What is 10 - 12?', {}, plain), '-2');
  assert.equal(answerFor('Tell me a story', {}, plain), null);
});

test('options: the letter of the option equal to the result, as simple-evals asks for it', () => {
  const q = 'What is 4 + 4?\nA) 7\nB) 8\nC) 9\nD) 10';
  assert.equal(answerFor(q, {}, plain), '4 + 4 = 8.\nAnswer: B');
  assert.equal(answerFor('What is 1 + 1?\nA) 3\nB) 4', {}, plain), 'None of the options is 2.');
});

test('PRACTICE_WRONG_ANSWERS: the same prompts are wrong every time, about that share of them', () => {
  const prompts = Array.from({ length: 400 }, (_, i) => `What is ${i} + 1?`);
  const wrong = (f) => prompts.filter((p) => answerFor(p, {}, { hash, wrongAnswers: f }) !== String(Number(/(\d+)/.exec(p)[1]) + 1));
  const a = wrong(0.25);
  assert.deepEqual(wrong(0.25), a);
  assert.ok(a.length > 60 && a.length < 140, `${a.length} of 400 wrong`);
  assert.equal(wrong(0).length, 0);
  assert.equal(wrong(1).length, 400);
  // A wrong choice answer names the next option.
  assert.equal(answerFor('What is 4 + 4?\nA) 7\nB) 8', {}, { hash, wrongAnswers: 1 }), '4 + 4 = 7.\nAnswer: A');
});

test('chat_template_kwargs thinking: a <think> block before the answer; tokens join back to the answer', () => {
  const t = answerFor('What is 2 + 3?', { chat_template_kwargs: { thinking: true } }, plain);
  assert.equal(t, '<think>Working out 2 + 3.</think>\n5');
  assert.equal(answerFor('What is 2 + 3?', { chat_template_kwargs: { enable_thinking: false } }, plain), '5');
  assert.equal(answerTokens(t).join(''), t);
});


const post = postChat;

test('the engine answers over HTTP, streamed or not, and refuses bad request options with 400 as vLLM does', async (t) => {
  const port = await freePort();
  const proc = spawn(process.execPath, [path.join(__dirname, '..', 'serve'), 'm', '--port', String(port), '--host', '127.0.0.1'], {
    env: { PATH: process.env.PATH, PRACTICE_PHASE_DELAY_MS: '1', PRACTICE_LOAD_DELAY_MS: '1', PRACTICE_ENV_CHECKS: '0', PRACTICE_TOKENS_PER_SEC: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => proc.kill('SIGKILL'));
  let out = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in 10 s:\n${out}`)), 10_000);
    proc.stdout.on('data', (d) => {
      out += d;
      if (/Application startup complete/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const ask = (content, extra = {}) => post(port, { model: 'm', messages: [{ role: 'user', content }], temperature: 0, ...extra });
  const r = await ask('What is 4 + 4?\nA) 7\nB) 8', { chat_template_kwargs: { thinking: false }, reasoning_effort: 'low' });
  assert.equal(r.status, 200, r.body);
  const choice = JSON.parse(r.body).choices[0];
  assert.equal(choice.message.content, '4 + 4 = 8.\nAnswer: B');
  assert.equal(choice.finish_reason, 'stop');
  const s = await ask('What is 2 + 3?', { stream: true });
  const text = s.body.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)).choices[0].delta.content || '').join('');
  assert.equal(text, '5');
  assert.equal((await ask('x', { reasoning_effort: 'max' })).status, 400);
  assert.equal((await ask('x', { chat_template_kwargs: '{"thinking":false}' })).status, 400);
  assert.equal((await ask('x', { temperature: -1 })).status, 400);
});
