import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { parseConcurrencies, parsePrompts, syntheticPrompt } from "../../src/measure/bench/workload.js";

const words = (s: string): number => s.split(/\s+/).filter(Boolean).length;

describe("bench workloads", () => {
  test("--concurrency is distinct whole numbers from 1", () => {
    assert.deepEqual(parseConcurrencies("1,4,8"), [1, 4, 8]);
    assert.deepEqual(parseConcurrencies(" 2 "), [2]);
    for (const bad of ["0", "1,,4", "a", "1,1", "-1", "1.5", "99999"]) assert.throws(() => parseConcurrencies(bad), UserError, bad);
  });

  test("a synthetic prompt has the input length in words, after --depth words of context, and differs per request", () => {
    const text = (m: { content: unknown } | undefined): string => String(m?.content ?? "");
    const p = syntheticPrompt(3, 50, 0);
    assert.equal(p.messages.length, 1);
    assert.equal(words(text(p.messages[0])), 50);
    assert.notEqual(text(syntheticPrompt(4, 50, 0).messages[0]).split(" ")[0], text(p.messages[0]).split(" ")[0]);
    const deep = syntheticPrompt(3, 50, 200);
    assert.equal(words(text(deep.messages[0])), 200);
    assert.equal(deep.messages.at(-1)?.content, p.messages[0]?.content);
    assert.equal(deep.planned_input, 251);
  });

  test("a prompts file: prompt or messages a line, output_len kept, its SHA-256", () => {
    const text = '{"prompt": "why is the sky blue", "output_len": 32}\n\n{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]}\n';
    const { prompts, sha256 } = parsePrompts("p.jsonl", text);
    assert.equal(prompts.length, 2);
    assert.deepEqual(prompts[0], { messages: [{ role: "user", content: "why is the sky blue" }], planned_input: 5, output_len: 32 });
    assert.equal(prompts[1]?.planned_input, 4);
    assert.match(sha256, /^[0-9a-f]{64}$/);
  });

  test("every bad line of a prompts file is named by file and line", () => {
    const text = '{"prompt": "ok"}\nnot json\n{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}\n{"prompt": "x", "output_len": 0}\n{"promt": "x"}\n';
    try {
      parsePrompts("p.jsonl", text);
      assert.fail("no error");
    } catch (e) {
      assert.ok(e instanceof UserError);
      const lines = e.diagnostics.map((d) => `${d.loc.file}:${d.loc.line}`);
      assert.deepEqual([...new Set(lines)], ["p.jsonl:2", "p.jsonl:3", "p.jsonl:4", "p.jsonl:5"]);
    }
    assert.throws(() => parsePrompts("e.jsonl", "\n\n"), /holds no prompts/);
  });

  test("a bad line of a prompts file is named by line, column and field, as eval names a bad line of its set", () => {
    const text = '{"prompt": "ok"}\n{"prompt": "x", "output_len": 0}\n{"promt": "x"}\n';
    try {
      parsePrompts("p.jsonl", text);
      assert.fail("no error");
    } catch (e) {
      assert.ok(e instanceof UserError);
      const said = e.diagnostics.map((d) => `${d.loc.line}:${d.loc.col} ${d.message} ${d.hint ?? ""}`);
      assert.ok(said.some((s) => /^2:17 `output_len`: /.test(s)), said.join("\n"));
      assert.ok(said.some((s) => /^3:2 unknown field `promt` did you mean `prompt`\?/.test(s)), said.join("\n"));
    }
  });
});
