import assert from "node:assert/strict";
import { test } from "node:test";
import { shellJoin, shellQuote, splitShellWords } from "../../src/config/shell-words.js";

test("single-quoted JSON reaches the engine unquoted", () => {
  assert.deepEqual(splitShellWords(`'{"a":1}'`), { ok: true, words: ['{"a":1}'] });
});

test("a multi-line value trimmed is one word", () => {
  const r = splitShellWords(`'{"method":"dspark",\n "k":5}'`.trim());
  assert.deepEqual(r, { ok: true, words: ['{"method":"dspark",\n "k":5}'] });
});

test("double quotes keep spaces and honour backslash escapes", () => {
  assert.deepEqual(splitShellWords(`"a b" c\\ d "x\\"y"`), { ok: true, words: ["a b", "c d", 'x"y'] });
});

test("unbalanced quotes are reported with their offset", () => {
  assert.deepEqual(splitShellWords(`'{"a":1}`), { ok: false, message: "unbalanced single quote", offset: 0 });
  assert.deepEqual(splitShellWords(`ab "cd`), { ok: false, message: "unbalanced double quote", offset: 3 });
});

test("quoting round-trips through splitting for awkward values", () => {
  const words = ["plain", "", "it's", '{"a": [1, 2]}', "$HOME", "a\nb", "`x`", "--flag=v w"];
  for (const w of words) assert.deepEqual(splitShellWords(shellQuote(w)), { ok: true, words: [w] });
  assert.deepEqual(splitShellWords(shellJoin(words)), { ok: true, words });
});
