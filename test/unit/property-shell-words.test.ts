/**
 * Shell words at volume (issue 25): quoting round-trips through splitting for any strings, and
 * splitting any text gives words or a problem at an offset inside the text. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import fc from "fast-check";
import { remoteCommand, shellJoin, shellQuote, splitShellWords } from "../../src/config/shell-words.js";
import { holds, holdsAll, reportInputsTried } from "./property.js";

/** Strings weighted toward what shells treat specially. */
const word = fc.oneof(
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.string({ unit: fc.constantFrom("'", '"', "\\", " ", "\t", "\n", "\r", "$", "`", "!", "*", "?", "~", "#", ";", "&", "|", "<", ">", "(", ")", "{", "}", "=", "-", "a", "é", "\0"), maxLength: 20 }),
);

test("splitting the quoted words gives the words back, for any strings", () => {
  holds("shell: split(join(words)) == words", fc.array(word, { maxLength: 8 }), (words) => {
    assert.deepEqual(splitShellWords(shellJoin(words)), { ok: true, words });
  });
});

test("a quoted word is one word, whatever surrounds it", () => {
  holds("shell: quote is one word", fc.tuple(word, fc.constantFrom("", " ", "\t", "\n  ")), ([w, pad]) => {
    assert.deepEqual(splitShellWords(`${pad}${shellQuote(w)}${pad}`), { ok: true, words: [w] });
  });
});

test("the remote command of an argv splits back into the argv", () => {
  holds("shell: remoteCommand round trip", fc.array(word, { minLength: 1, maxLength: 6 }), (argv) => {
    assert.deepEqual(splitShellWords(remoteCommand(argv)), { ok: true, words: argv });
  });
});

test("a POSIX shell given the quoted words gets the words back", () => {
  // The words a node's shell passes on: /bin/sh (dash on Debian) runs printf with them, one NUL
  // after each. One shell reads every input's command from its stdin, since a shell per input
  // costs a process start each (1000 of them under test-all): each prints its word count before
  // and after its words, so a word the shell split or joined shows at the input where it happened.
  const noNul = word.map((w) => w.replace(/\0/g, ""));
  holdsAll("shell: /bin/sh receives the quoted words", fc.array(noNul, { minLength: 1, maxLength: 5 }), (inputs) => {
    const script = inputs.map((words) => `printf '%s\\0' ${words.length} ${shellJoin(words)} ${words.length}\n`).join("");
    const out = spawnSync("/bin/sh", [], { input: script, encoding: "utf8", timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
    assert.equal(out.status, 0, out.stderr);
    const got = out.stdout.split("\0");
    let at = 0;
    for (const words of inputs) {
      const n = words.length;
      const heard = got.slice(at, at + n + 2);
      assert.deepEqual(heard, [String(n), ...words, String(n)], `the shell heard ${JSON.stringify(heard)} for ${JSON.stringify(words)}`);
      at += n + 2;
    }
    assert.deepEqual(got.slice(at), [""], "nothing after the last input");
  }, 0.2);
});

test("any text splits into words or a problem at an offset inside it", () => {
  const text = fc.oneof(fc.string({ unit: "binary", maxLength: 60 }), fc.string({ unit: fc.constantFrom("'", '"', "\\", " ", "\n", "a", "$"), maxLength: 30 }));
  holds("shell: split any text", text, (t) => {
    const r = splitShellWords(t);
    if (r.ok) {
      assert.ok(Array.isArray(r.words) && r.words.every((w) => typeof w === "string"));
      // No word is longer than the text: nothing is expanded.
      assert.ok(r.words.every((w) => w.length <= t.length));
    } else {
      assert.ok(Number.isInteger(r.offset) && r.offset >= 0 && r.offset < t.length, `offset ${r.offset} outside a ${t.length}-character text`);
      assert.ok(`'"\\`.includes(t[r.offset] as string), `the offset ${r.offset} points at ${JSON.stringify(t[r.offset])}, not a quote or backslash`);
      assert.notEqual(r.message.trim(), "");
    }
  }, 3);
});

reportInputsTried();
