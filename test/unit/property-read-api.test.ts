/**
 * The read API's readers of what a client or a daemon sends, fed generated input: the SSE parser
 * (src/daemon/sse.ts) reads the same events however the stream is cut and whatever its line ends,
 * the event and answer decoders (src/contract/read-api.ts) never throw, and a logs query
 * (src/daemon/read-logs.ts) is parsed or refused with its problem, its tail always bounded.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { decodeRead, decodeReadEvent, MAX_LOG_TAIL, READ_ANSWERS, READ_EVENTS, type ReadAnswerKind } from "../../src/contract/read-api.js";
import { parseLogQuery } from "../../src/daemon/read-logs.js";
import { sseFrame, SseParser } from "../../src/daemon/sse.js";
import { holds, reportInputsTried } from "./property.js";

const eventName = fc.constantFrom(...Object.keys(READ_EVENTS), "message", "x", "__proto__", "constructor");

test("SSE: framed events are read back whole however the stream is cut, with LF or CRLF line ends", () => {
  const events = fc.array(fc.record({ event: fc.constantFrom(...Object.keys(READ_EVENTS)), data: fc.jsonValue() }), { maxLength: 8 });
  holds("sse-cuts", fc.tuple(events, fc.array(fc.nat(), { maxLength: 10 }), fc.boolean()), ([list, cuts, crlf]) => {
    const framed = list.map((e) => sseFrame(e.event, e.data)).join("");
    const text = crlf ? framed.replace(/\n/g, "\r\n") : framed;
    const parser = new SseParser();
    const got = [];
    let at = 0;
    for (const c of [...cuts.map((n) => n % (text.length + 1))].sort((a, b) => a - b)) {
      got.push(...parser.add(text.slice(at, Math.max(at, c))));
      at = Math.max(at, c);
    }
    got.push(...parser.add(text.slice(at)));
    assert.deepEqual(got, list.map((e) => ({ event: e.event, data: JSON.stringify(e.data) })));
  });
});

test("SSE: any text read as a stream gives events or a bounded-line refusal, never another error", () => {
  holds("sse-any-text", fc.string({ unit: fc.constantFrom("a", ":", " ", "\n", "\r", "d", "e", "data", "event") , maxLength: 200 }), (text) => {
    try {
      for (const e of new SseParser(100).add(text)) assert.equal(typeof e.data, "string");
    } catch (e) {
      assert.match((e as Error).message, /longer than 100 characters/);
    }
  });
});

test("read API decoders: any event or answer is decoded or refused, never thrown", () => {
  holds("read-event", fc.tuple(eventName, fc.oneof(fc.string(), fc.json())), ([name, data]) => {
    const e = decodeReadEvent(name, data);
    if (e !== undefined) assert.equal(e.event, name);
  });
  holds("read-answer", fc.tuple(fc.constantFrom(...(Object.keys(READ_ANSWERS) as ReadAnswerKind[])), fc.jsonValue()), ([kind, value]) => {
    const r = decodeRead(kind, value);
    if (!r.ok) assert.ok(r.problem.length > 0);
  });
});

test("read API logs query: parsed or refused with a problem; the tail never past its bound", () => {
  const param = fc.constantFrom("tail", "since", "follow", "cluster", "limit");
  const value = fc.oneof(fc.string({ maxLength: 30 }), fc.nat().map(String), fc.date({ noInvalidDate: true }).map((d) => d.toISOString()));
  holds("logs-query", fc.array(fc.tuple(param, value), { maxLength: 5 }), (pairs) => {
    const r = parseLogQuery(new URLSearchParams(pairs));
    if (r.ok) assert.ok(r.query.tail >= 0 && r.query.tail <= MAX_LOG_TAIL);
    else assert.ok(r.problem.length > 0);
  });
});

reportInputsTried();
