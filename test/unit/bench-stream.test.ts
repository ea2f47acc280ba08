import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ChatStreamClock, SseMessages } from "../../src/measure/bench/stream.js";

const close = (a: number, b: number, what: string): void => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);
const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usage = (prompt: number, completion: number): string => `data: ${JSON.stringify({ id: "x", choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`;

describe("a streamed chat completion timed as vllm bench serve times it", () => {
  test("SSE messages are whole across chunk borders; comments and other fields are dropped", () => {
    const sse = new SseMessages();
    const text = `: ping\n\n${chunk({ content: "a" })}event: x\n${chunk({ content: "b" })}data: [DONE]\n\n`;
    const got: string[] = [];
    for (let i = 0; i < text.length; i += 7) got.push(...sse.add(text.slice(i, i + 7)));
    assert.equal(got.length, 3);
    assert.ok(got[0]?.includes('"a"') && got[1]?.includes('"b"'));
    assert.equal(got[2], "data: [DONE]");
  });

  test("TTFT at the first chunk with choices, one ITL per later chunk with choices, latency at the last chunk with choices (not the usage message), tokens from usage", () => {
    const clock = new ChatStreamClock(10);
    const feed: [string, number][] = [
      [chunk({ role: "assistant", content: "the " }), 10.1],
      [chunk({ content: "quick " }), 10.2],
      [chunk({ content: "fox " }), 10.35],
      [chunk({}, "length"), 10.4],
      [usage(12, 3), 10.41],
      ["data: [DONE]\n\n", 10.5],
    ];
    const sse = new SseMessages();
    for (const [text, at] of feed) for (const m of sse.add(text)) clock.message(m, at);
    const o = clock.outcome(9, 99);
    assert.equal(o.ok, true);
    if (!o.ok) return;
    close(o.start_s, 1, "start from the level's start");
    close(o.ttft_s, 0.1, "ttft");
    assert.equal(o.itl_s.length, 3, "the finish chunk has choices: vLLM counts its gap too");
    [0.1, 0.15, 0.05].forEach((x, i) => close(o.itl_s[i] as number, x, `itl ${i}`));
    close(o.latency_s, 0.4, "latency ends at the last token chunk: vLLM's endpoint_request_func.py moves the end only on chunks with choices, not on the usage message");
    assert.equal(o.output_tokens, 3);
    assert.equal(o.input_tokens, 12, "input from usage, not the planned length");
  });

  test("without usage, the chunks that carried text are the output count and the planned length the input", () => {
    const clock = new ChatStreamClock(0);
    clock.message(`data: ${JSON.stringify({ choices: [{ delta: { content: "a" } }] })}`, 1);
    clock.message(`data: ${JSON.stringify({ choices: [{ delta: { reasoning_content: "b" } }] })}`, 2);
    clock.message(`data: ${JSON.stringify({ choices: [{ delta: {} }] })}`, 3);
    const o = clock.outcome(0, 7);
    assert.ok(o.ok);
    assert.equal(o.output_tokens, 2);
    assert.equal(o.input_tokens, 7);
  });

  test("a stream without a chunk of choices, or with a message that is not JSON, failed and says why", () => {
    const empty = new ChatStreamClock(0);
    empty.message("data: [DONE]", 1);
    const e = empty.outcome(0, 5);
    assert.equal(e.ok, false);
    assert.match(e.ok ? "" : e.error, /never received a chunk with choices/);
    const bad = new ChatStreamClock(0);
    bad.message(`data: ${JSON.stringify({ choices: [{ delta: { content: "a" } }] })}`, 1);
    bad.message("data: {oops", 2);
    const b = bad.outcome(0, 5);
    assert.equal(b.ok, false);
    assert.match(b.ok ? "" : b.error, /not JSON: \{oops/);
  });
});
