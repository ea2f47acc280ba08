import assert from "node:assert/strict";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import fc from "fast-check";
import { MAX_BOOT_EVENTS } from "../../src/supervise/boots.js";
import { cutLine, LINE_MAX, LineSplitter } from "../../src/remote/lines.js";
import { STREAM_QUEUE_LINES } from "../../src/remote/transport.js";

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

test("once a line is cut, nothing from past the cut joins it, whatever the chunks", async () => {
  // The pair held back at the cut left room for one character: "Z" came after the cut.
  assert.deepEqual(split(["abc😀", "Z\n"], 4), ["abc [launcher: 3 more characters cut]"]);
  // Nor half a pair from past the cut (a lone low surrogate).
  assert.deepEqual(split(["abc😀", "😀\n"], 4), ["abc [launcher: 4 more characters cut]"]);
  // However a line arrives, it is what cutting it whole gives.
  await fc.assert(
    fc.asyncProperty(fc.array(fc.string({ unit: fc.constantFrom("a", "😀", "\n"), minLength: 1 }), { maxLength: 8 }), fc.integer({ min: 1, max: 6 }), async (chunks, max) => {
      const whole = (await readlineLines(chunks)).map((l) => cutLine(l, max));
      assert.deepEqual(split(chunks, max), whole);
    }),
    { seed: 25, numRuns: 300 },
  );
});

test("README states the bounds on what launcher reads from the same constants", () => {
  const readme = readFileSync("README.md", "utf8").replace(/\s+/g, " ");
  const section = readme.slice(readme.indexOf("## Bounds on what launcher reads"));
  assert.ok(LINE_MAX % 1024 === 0 && section.includes(`cut to ${LINE_MAX / 1024} KiB as it enters launcher (\`LINE_MAX\``), "the line length");
  assert.ok(section.includes(`at most ${MAX_BOOT_EVENTS} events of a boot`), "the events per boot");
  assert.ok(section.includes(`once ${STREAM_QUEUE_LINES} lines wait`), "the lines a stream holds");
});
