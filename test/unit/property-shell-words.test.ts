/**
 * Shell words at volume (issue 25): quoting round-trips through splitting for any strings, and
 * splitting any text gives words or a problem at an offset inside the text. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import fc from "fast-check";
import { remoteCommand, shellJoin, shellQuote, splitShellWords } from "../../src/config/shell-words.js";
import { holds, reportInputsTried } from "./property.js";

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
  // The words a node's shell passes on: /bin/sh (dash on Debian) runs printf with them, one NUL after each.
  const noNul = word.map((w) => w.replace(/\0/g, ""));
  holds("shell: /bin/sh receives the quoted words", fc.array(noNul, { minLength: 1, maxLength: 5 }), (words) => {
    const out = spawnSync("/bin/sh", ["-c", `printf '%s\\0' ${shellJoin(words)}`], { encoding: "utf8", timeout: 10_000 });
    assert.equal(out.status, 0, out.stderr);
    assert.deepEqual(out.stdout.split("\0").slice(0, -1), words);
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
