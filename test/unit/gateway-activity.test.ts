import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import type { ActivityRecord } from "../../src/contract/read-api.js";
import { activityRecord, keyId } from "../../src/gateway/activity.js";
import { streamUsage } from "../../src/gateway/proxy.js";
import { routeTable } from "../../src/gateway/routes.js";
import { createGateway, type Gateway } from "../../src/gateway/server.js";
import { until } from "../support/until.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";

const CLIENT_KEY = "sk-client-secret-0123456789";
const ENGINE_KEY = "sk-engine-secret-9876543210";

/** An engine answering chat as vLLM does: a stream of 3 tokens (with a usage chunk when asked), or a whole answer with usage. */
function engineServer(): Server {
  return createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (raw += d));
    req.on("end", () => {
      const body = JSON.parse(raw) as { stream?: boolean; stream_options?: { include_usage?: boolean } };
      if (body.stream !== true) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "chat.completion", choices: [{ index: 0, message: { content: "a b c d" } }], usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const word of ["a", "b", "c"]) res.write(`data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: word } }] })}\n\n`);
      if (body.stream_options?.include_usage === true) res.write(`data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
}

let engine: Server;
let gateway: Gateway;
let url: string;
const records: ActivityRecord[] = [];

before(async () => {
  engine = engineServer();
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const endpoint = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const table = routeTable([deployment(endpoint)], []);
  gateway = createGateway(gatewayOptions({ routes: () => table, checkKey: (k) => k === CLIENT_KEY, engineKey: () => ENGINE_KEY, activity: (r) => records.push(r) }));
  await new Promise<void>((r) => gateway.server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`;
});

after(async () => {
  gateway.server.closeAllConnections();
  gateway.server.close();
  await gateway.close();
  engine.closeAllConnections();
  engine.close();
});

/** Sends one chat request and reads the whole answer; resolves with the one record it made. */
async function oneRecord(body: Record<string, unknown>, key: string | undefined = CLIENT_KEY): Promise<ActivityRecord> {
  const before = records.length;
  const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) }, body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }) });
  await res.text();
  await until("the request's activity record", () => records.length > before, 5_000);
  assert.equal(records.length, before + 1, "one record per request");
  return records[before] as ActivityRecord;
}

test("a streamed request yields one record: lane, deployment, model, the key's id, status, TTFT, the engine's usage", async () => {
  const t0 = Date.now();
  const r = await oneRecord({ model: "main", stream: true, stream_options: { include_usage: true } });
  assert.ok(r.t >= t0 && r.t <= Date.now());
  assert.equal(r.lane, "main");
  assert.equal(r.deployment, "practice-2x");
  assert.equal(r.model, "main");
  assert.equal(r.key_id, createHash("sha256").update(CLIENT_KEY).digest("hex").slice(0, 8));
  assert.equal(r.status, 200);
  assert.equal(typeof r.ttft_ms, "number");
  assert.equal(r.tokens_in, 7, "the usage chunk's prompt tokens");
  assert.equal(r.tokens_out, 3, "the usage chunk's completion tokens");
  assert.equal(r.error, undefined);
});

test("a stream without usage counts its chunks; a whole answer gives its usage", async () => {
  const streamed = await oneRecord({ model: "practice", stream: true });
  assert.equal(streamed.tokens_out, 3);
  assert.equal(streamed.tokens_in, undefined, "no usage: the prompt's tokens are not known");
  const whole = await oneRecord({ model: "practice" });
  assert.deepEqual([whole.tokens_in, whole.tokens_out, whole.ttft_ms], [5, 4, undefined]);
});

test("a failed request says why in the gateway's own code; no record holds a key", async () => {
  const unknown = await oneRecord({ model: "ghost" });
  assert.deepEqual([unknown.status, unknown.error, unknown.deployment], [404, "model_not_found", undefined]);
  const text = JSON.stringify(records);
  for (const secret of [CLIENT_KEY, ENGINE_KEY, "Bearer"]) assert.ok(!text.includes(secret), `no ${secret} in the records`);
});

test("a request refused for its key reaches no record (it never reached the proxy); /v1/models makes none", async () => {
  const before = records.length;
  assert.equal((await fetch(`${url}/v1/chat/completions`, { method: "POST", body: "{}" })).status, 401);
  assert.equal((await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } })).status, 200);
  // A request after them is recorded: had they made records, these would come before it.
  await oneRecord({ model: "main" });
  assert.equal(records.length, before + 1);
});

test("the record, pure: a key's id is 8 hex of its SHA-256; failures without a gateway code are the engine's", () => {
  assert.match(keyId("k"), /^[0-9a-f]{8}$/);
  assert.notEqual(keyId("k1"), keyId("k2"));
  assert.deepEqual(activityRecord({ t: 1, model: "m", lane: "", status: 400, key: undefined, trail: { deployment: "d" } }), { t: 1, deployment: "d", model: "m", status: 400, error: "engine_error" });
  assert.deepEqual(activityRecord({ t: 1, model: "m", lane: "l", status: 200, key: "k", trail: { error: "upstream_broke" } }), { t: 1, lane: "l", model: "m", key_id: keyId("k"), status: 200, error: "upstream_broke" });
});

test("a stream's usage: the last data event with usage in its last two chunks, split across them or not", () => {
  const event = 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\ndata: [DONE]\n\n';
  assert.deepEqual(streamUsage([Buffer.from(event)]), { prompt: 7, completion: 3 });
  assert.deepEqual(streamUsage([Buffer.from(event.slice(0, 30)), Buffer.from(event.slice(30))]), { prompt: 7, completion: 3 });
  assert.equal(streamUsage([Buffer.from('data: {"choices":[{"delta":{"content":"x"}}]}\n\n')]), undefined);
  assert.equal(streamUsage([Buffer.from('data: {"usage": null}\n\n')]), undefined);
});

test("an engine that does not answer: the record names the deployment and the gateway's upstream_failed", async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
  const endpoint = `http://127.0.0.1:${(dead.address() as AddressInfo).port}`;
  await new Promise<void>((r) => dead.close(() => r()));
  const table = routeTable([deployment(endpoint)], []);
  const got: ActivityRecord[] = [];
  const gw = createGateway(gatewayOptions({ routes: () => table, activity: (r) => got.push(r) }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  try {
    const res = await fetch(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "main", messages: [] }) });
    assert.equal(res.status, 502);
    await res.text();
    await until("the 502's record", () => got.length === 1, 5_000);
    assert.deepEqual({ ...got[0], t: 0 }, { t: 0, lane: "main", deployment: "practice-2x", model: "main", status: 502, error: "upstream_failed" });
  } finally {
    gw.server.closeAllConnections();
    gw.server.close();
    await gw.close();
  }
});

test("a stream whose chunks carry several tokens: the rate counts the engine's tokens, not its chunks", async () => {
  // Four tokens a chunk (vLLM with speculative decoding or --stream-interval 4), with the usage chunk.
  const chunky = createServer((req, res) => {
    req.resume();
    req.on("end", async () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const w of ["a b c d", "e f g h", "i j k l"]) {
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: w } }] })}\n\n`);
        // The fake engine's own pace between chunks (what the rate is measured over), not a wait in the test.
        await new Promise((r) => setTimeout(r, 50));
      }
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 12 } })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => chunky.listen(0, "127.0.0.1", r));
  const table = routeTable([deployment(`http://127.0.0.1:${(chunky.address() as AddressInfo).port}`)], []);
  const got: ActivityRecord[] = [];
  const gw = createGateway(gatewayOptions({ routes: () => table, activity: (r) => got.push(r) }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  try {
    const started = performance.now();
    const res = await fetch(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "main", stream: true, stream_options: { include_usage: true }, messages: [] }) });
    await res.text();
    const elapsed = (performance.now() - started) / 1000;
    await until("the record", () => got.length > 0, 5_000);
    const r = got[0] as ActivityRecord;
    assert.equal(r.tokens_out, 12);
    // 11 tokens after the first, within the request's own time (the whole request's at most): counted
    // by chunks it would be 3 within that time, under a third of this.
    assert.ok((r.tokens_per_second ?? 0) >= 11 / elapsed, `${r.tokens_per_second} tok/s over ${elapsed} s`);
  } finally {
    gw.server.closeAllConnections();
    gw.server.close();
    await gw.close();
    chunky.closeAllConnections();
    chunky.close();
  }
});
