import assert from "node:assert/strict";
import { test } from "node:test";
import { extractChoice, grade } from "../../src/measure/eval/grade.js";
import { requestOptions } from "../../src/measure/eval/request-options.js";
import { UserError } from "../../src/config/errors.js";

test("choice: simple-evals' `Answer: X`, first match, after markdown/LaTeX wrappers and a think block", () => {
  const cases: [string, string | undefined][] = [
    ["Let me think.\nAnswer: B", "B"],
    ["answer: c", "C"],
    ["**Answer: D**", "D"],
    ["Answer: $\\boxed{A}$", "A"],
    ["Answer:\tE", "E"],
    ["<think>Answer: A looks wrong</think>\nAnswer: C", "C"],
    ["Answer: B\nAnswer: C", "B"],
    ["B", "B"],
    ["(c)", "C"],
    ["D.", "D"],
    [" A) \n", "A"],
    // "Answer: because" is no letter B; prose is no answer.
    ["Answer: because it is", undefined],
    ["I think it is B", undefined],
    ["", undefined],
  ];
  for (const [answer, letter] of cases) assert.equal(extractChoice(answer), letter, JSON.stringify(answer));
});

test("graders: exact trims, contains is a substring, regex matches anywhere, choice compares letters", () => {
  assert.equal(grade("exact", "5", "5\n"), true);
  assert.equal(grade("exact", "5", "55"), false);
  assert.equal(grade("exact", "Paris", "paris"), false);
  assert.equal(grade("contains", "Paris", "It is Paris."), true);
  assert.equal(grade("contains", "Paris", "It is Rome."), false);
  assert.equal(grade("regex", "^4[0-9]$", "42"), true);
  assert.equal(grade("regex", "\\b42\\b", "the answer is 42."), true);
  assert.equal(grade("regex", "^42$", "142"), false);
  assert.equal(grade("choice", "b", "Answer: B"), true);
  assert.equal(grade("choice", "B", "Answer: C"), false);
  assert.equal(grade("choice", "B", "no letter"), false);
});

test("request options: chat_template_kwargs an object, reasoning_effort as given, nothing else sent", () => {
  assert.deepEqual(requestOptions({}), {});
  assert.deepEqual(requestOptions({ chatTemplateKwargs: '{"thinking":false}', reasoningEffort: "low" }), { chat_template_kwargs: { thinking: false }, reasoning_effort: "low" });
  assert.throws(() => requestOptions({ chatTemplateKwargs: "{thinking:false}" }), (e) => e instanceof UserError && /not JSON/.test(e.message));
  assert.throws(() => requestOptions({ chatTemplateKwargs: "[1]" }), (e) => e instanceof UserError && /must be a JSON object/.test(e.message));
});
