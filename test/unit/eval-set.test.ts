import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { parseEvalSet } from "../../src/measure/eval/set.js";

const lines = (...ls: string[]): string => ls.join("\n");
const shown = (text: string): string[] => parseEvalSet("set.jsonl", text).diagnostics.map((d) => formatDiagnostic(d).split("\n")[0] ?? "");

test("eval set: prompt and messages items, default grader and ids, blank lines skipped", () => {
  const r = parseEvalSet(
    "set.jsonl",
    lines(
      '{"id": "a", "prompt": "What is 2 + 3?", "expected": "5"}',
      "",
      '{"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "Pick"}], "expected": "B", "grader": "choice"}',
      '{"id": 7, "prompt": "x", "expected": "^y$", "grader": "regex"}\r',
    ),
  );
  assert.deepEqual(r.diagnostics, []);
  assert.deepEqual(
    r.items.map((i) => [i.id, i.line, i.grader, i.messages.length]),
    [
      ["a", 1, "exact", 1],
      ["line 3", 3, "choice", 2],
      ["7", 4, "regex", 1],
    ],
  );
  assert.deepEqual(r.items[0]?.messages, [{ role: "user", content: "What is 2 + 3?" }]);
});

test("eval set: every bad line is reported with file:line:col, the field named", () => {
  const out = shown(
    lines(
      '{"prompt": "ok", "expected": "1"}',
      '{"prompt": "x", "expected": "1",}',
      '["not", "an", "object"]',
      '{"prompt": "x"}',
      '{"prompt": "x", "expected": "1", "grader": "exactly"}',
      '{"prompt": "x", "expected": "1", "promt": "y"}',
      '{"expected": "1"}',
      '{"prompt": "x", "messages": [{"role": "user", "content": "x"}], "expected": "1"}',
      '{"prompt": "x", "expected": "(", "grader": "regex"}',
      '{"prompt": "x", "expected": "AB", "grader": "choice"}',
      '{"id": "d", "prompt": "x", "expected": "1"}',
      '{"id": "d", "prompt": "y", "expected": "2"}',
    ),
  );
  assert.equal(out.length, 10, out.join("\n"));
  assert.match(out[0] ?? "", /^set\.jsonl:2:\d+: error: not JSON/);
  assert.match(out[1] ?? "", /^set\.jsonl:3:1: error: not a JSON object/);
  assert.match(out[2] ?? "", /^set\.jsonl:4:1: error: `expected` is missing/);
  assert.equal(out[3], 'set.jsonl:5:34: error: unknown grader "exactly"');
  assert.equal(out[4], "set.jsonl:6:34: error: unknown field `promt`");
  assert.match(out[5] ?? "", /^set\.jsonl:7:1: error: neither `prompt` nor `messages`/);
  assert.match(out[6] ?? "", /^set\.jsonl:8:1: error: both `prompt` and `messages`/);
  assert.match(out[7] ?? "", /^set\.jsonl:9:17: error: `expected` is not a valid regular expression/);
  assert.match(out[8] ?? "", /^set\.jsonl:10:17: error: `expected` is "AB", not a choice letter/);
  assert.match(out[9] ?? "", /^set\.jsonl:12:2: error: id "d" is also the id of line 11/);
});

test("eval set: hints name the nearest grader and field", () => {
  const d = parseEvalSet("s", '{"prompt": "x", "expected": "1", "grader": "contain", "expectd": 1}').diagnostics;
  assert.ok(d.some((x) => x.hint?.includes('did you mean "contains"')));
  assert.ok(d.some((x) => x.hint?.includes("did you mean `expected`")));
});

test("eval set: an empty file is an error, not a 0/0 run", () => {
  assert.deepEqual(shown("\n\n"), ["set.jsonl:1:1: error: the set has no items"]);
});
