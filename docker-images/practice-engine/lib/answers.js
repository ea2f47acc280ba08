'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): answers that an eval set can grade.
//
// The rule (README "Answers"): a chat whose last message asks `What is A + B?` (also -, *, x;
// integers) is answered with the result, `-12`; when that message also lists options, one a line
// as `B) 7` (or `B. 7`, `B: 7`), the answer ends with simple-evals' last line `Answer: B`, the
// letter of the option equal to the result. Any other prompt gets the usual filler words.
//
// PRACTICE_WRONG_ANSWERS=F (0..1): the prompts whose hash falls in the first F of the hash range are
// answered wrongly (the result plus one; for options, the next option's letter), always the same
// ones for the same prompt, so that two deployments can differ on chosen items and `compare` can
// tell them apart.
//
// chat_template_kwargs `{"thinking": true}` (or `enable_thinking`) puts a `<think>...</think>`
// block before the answer, as a reasoning model's template without a reasoning parser does; the
// request fields are checked as vLLM's ChatCompletionRequest checks them
// (vllm/entrypoints/openai/protocol.py): a bad one is a 400.

const QUESTION = /What is (-?\d+) *([-+*x]) *(-?\d+) *\?/i;
const OPTION = /^\s*\(?([A-Z])[).:]\s*(-?\d+)\s*$/gm;
const REASONING_EFFORTS = ['low', 'medium', 'high'];

const OPS = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  x: (a, b) => a * b,
};

/** A request field vLLM's pydantic model would refuse: the message of its 400, or null. */
function badChatOptions(body) {
  const k = body.chat_template_kwargs;
  if (k !== undefined && k !== null && (typeof k !== 'object' || Array.isArray(k))) {
    return `chat_template_kwargs: Input should be a valid dictionary, got ${JSON.stringify(k)}`;
  }
  const e = body.reasoning_effort;
  if (e !== undefined && e !== null && !REASONING_EFFORTS.includes(e)) {
    return `reasoning_effort: Input should be 'low', 'medium' or 'high', got ${JSON.stringify(e)}`;
  }
  const t = body.temperature;
  if (t !== undefined && t !== null && (typeof t !== 'number' || t < 0)) {
    return `temperature must be non-negative, got ${JSON.stringify(t)}.`;
  }
  return null;
}

/** Whether the chat template is asked to think (Qwen3's `enable_thinking`, DeepSeek's `thinking`). */
function thinking(body) {
  const k = body.chat_template_kwargs;
  return !!k && typeof k === 'object' && (k.thinking === true || k.enable_thinking === true);
}

/**
 * The answer text for `prompt` (the last message's text), or null when it is not a question of
 * the rule. `hash` is the engine's prompt hash, `wrongAnswers` the knob's fraction.
 */
function answerFor(prompt, body, { hash, wrongAnswers }) {
  const q = QUESTION.exec(prompt);
  if (!q) return null;
  const right = OPS[q[2].toLowerCase()](Number(q[1]), Number(q[3]));
  const wrong = wrongAnswers > 0 && hash(prompt) / 0x100000000 < wrongAnswers;
  const options = [...prompt.matchAll(OPTION)].map((m) => ({ letter: m[1], value: Number(m[2]) }));
  let text;
  if (options.length > 0) {
    const at = options.findIndex((o) => o.value === right);
    const pick = at < 0 ? null : options[wrong ? (at + 1) % options.length : at];
    text = pick === null ? `None of the options is ${right}.` : `${q[1]} ${q[2]} ${q[3]} = ${pick.value}.\nAnswer: ${pick.letter}`;
  } else {
    text = String(wrong ? right + 1 : right);
  }
  return thinking(body) ? `<think>Working out ${q[1]} ${q[2]} ${q[3]}.</think>\n${text}` : text;
}

/** The answer split into tokens as generation streams them: words with their following space. */
function answerTokens(text) {
  return text.match(/\S+\s*|\s+/g) || [];
}

module.exports = { answerFor, answerTokens, badChatOptions };
