import assert from "node:assert/strict";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { test } from "node:test";
import fc from "fast-check";
import { cutLine, LINE_MAX, LineSplitter } from "../../src/remote/lines.js";

const split = (chunks: readonly string[], max = LINE_MAX): string[] => {
  const out: string[] = [];
  const s = new LineSplitter((l) => out.push(l), max);
  for (const c of chunks) s.push(c);
  s.end();
  return out;
};

async function readlineLines(chunks: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const l of createInterface({ input: Readable.from(chunks.map((c) => Buffer.from(c))), crlfDelay: Number.POSITIVE_INFINITY })) out.push(l);
  return out;
}

test("lines end where node's readline ends them (\\n, \\r\\n, a lone \\r), whatever the chunks", async () => {
  assert.deepEqual(split(["a\r", "\nb\rc\n\nd"]), ["a", "b", "c", "", "d"]);
  await fc.assert(
    // A pipe never delivers an empty chunk (readline would take one as the end of a "\r\n" wait).
    fc.asyncProperty(fc.array(fc.string({ unit: fc.constantFrom("a", "é", "\r", "\n"), minLength: 1 }), { maxLength: 8 }), async (chunks) => {
      assert.deepEqual(split(chunks), await readlineLines(chunks));
    }),
    { seed: 25, numRuns: 300 },
  );
});

test("a line past the cap keeps its head and says how much was cut; the next line is whole", () => {
  const ten = "x".repeat(10 * 1024 * 1024);
  const chunks = [];
  for (let i = 0; i < ten.length; i += 65536) chunks.push(ten.slice(i, i + 65536));
  const [long, next] = split([...chunks, "\nnext\n"]);
  assert.equal(long, `${"x".repeat(LINE_MAX)} [launcher: ${ten.length - LINE_MAX} more characters cut]`);
  assert.equal(next, "next");
  assert.equal(cutLine("abcdef", 4), "abcd [launcher: 2 more characters cut]");
  // A surrogate pair is never split: one character less is kept.
  assert.equal(cutLine("abc😀z", 4), "abc [launcher: 3 more characters cut]");
  assert.deepEqual(split(["ab", "cdef\n"], 3), ["abc [launcher: 3 more characters cut]"]);
});
