import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { ActivityRecord } from "../../src/contract/read-api.js";
import { capturedBody, MAX_CAPTURE_BYTES, redact } from "../../src/gateway/capture.js";
import { routeTable } from "../../src/gateway/routes.js";
import { createGateway } from "../../src/gateway/server.js";
import { until } from "../support/until.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";

const CLIENT_KEY = "sk-client-0123456789abcdef";
const ENGINE_KEY = "sk-engine-fedcba9876543210";

test("redaction: credential properties, Bearer tokens and the known keys, wherever they are", () => {
  const body = JSON.stringify({ model: "m", api_key: "sk-a", Authorization: "Bearer sk-b", max_tokens: 5, messages: [{ role: "user", content: `my key is ${CLIENT_KEY}, use Bearer abc.def` }] });
  const out = redact(body, [CLIENT_KEY]);
  for (const secret of ["sk-a", "sk-b", CLIENT_KEY, "abc.def"]) assert.ok(!out.includes(secret), `${secret} in ${out}`);
  assert.match(out, /"max_tokens":5/, "a count is no credential");
  assert.match(out, /"api_key":"\[redacted\]"/);
});

test("a capture keeps at most its bytes, and a key cut where it ends was taken out whole", () => {
  const n = 100;
  // The key starts 5 bytes before the end of what is kept: without the window, "sk-cl" would stay.
  const body = Buffer.from(`${"x".repeat(n - 5)}${CLIENT_KEY} and more`);
  const out = capturedBody(body, n, [CLIENT_KEY]);
  assert.ok(Buffer.byteLength(out) <= n);
  assert.ok(!out.includes("sk-cl"), out);
  // A credential property cut by the end of the window is taken to its end.
  assert.equal(redact('{"api_key": "sk-cut-he', []), '{"api_key": "[redacted]"');
  assert.ok(Buffer.byteLength(capturedBody(Buffer.alloc(1 << 20, 0x61), 1 << 20, [])) <= MAX_CAPTURE_BYTES, "bounded whatever is asked");
  assert.equal(capturedBody(Buffer.from("héllo"), 2, []), "h", "a character cut in two is dropped");
});

async function throughGateway(captureBodies: number | undefined): Promise<ActivityRecord> {
  const engine = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ choices: [{ message: { content: `the engine says ${ENGINE_KEY}` } }], usage: { prompt_tokens: 3, completion_tokens: 2 } })));
  });
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const table = routeTable([deployment(`http://127.0.0.1:${(engine.address() as AddressInfo).port}`)], []);
  const got: (ActivityRecord)[] = [];
  const gw = createGateway(gatewayOptions({ routes: () => table, checkKey: (k) => k === CLIENT_KEY, engineKey: () => ENGINE_KEY, activity: (r) => got.push(r), ...(captureBodies === undefined ? {} : { captureBodies }) }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  try {
    const body = JSON.stringify({ model: "main", api_key: CLIENT_KEY, messages: [{ role: "user", content: `hello ${CLIENT_KEY}` }] });
    const res = await fetch(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${CLIENT_KEY}` }, body });
    assert.equal(res.status, 200);
    await res.text();
    await until("the record", () => got.length === 1, 5_000);
    return got[0] as ActivityRecord;
  } finally {
    gw.server.closeAllConnections();
    gw.server.close();
    await gw.close();
    engine.closeAllConnections();
    engine.close();
  }
}

test("body capture is off by default: a record has no body", async () => {
  const r = await throughGateway(undefined);
  assert.equal(r.request_body, undefined);
  assert.equal(r.response_body, undefined);
});

test("with capture on, a record keeps at most N bytes of each body, with no key in them", async () => {
  const r = await throughGateway(60);
  assert.ok(r.request_body !== undefined && r.response_body !== undefined, JSON.stringify(r));
  assert.ok(Buffer.byteLength(r.request_body) <= 60 && Buffer.byteLength(r.response_body) <= 60);
  assert.match(r.request_body, /^\{"model":"main","api_key":"\[redacted\]"/);
  const wide = await throughGateway(4096);
  assert.match(wide.request_body ?? "", /hello \[redacted\]/);
  assert.match(wide.response_body ?? "", /the engine says \[redacted\]/);
  const text = JSON.stringify([r, wide]);
  for (const key of [CLIENT_KEY, ENGINE_KEY]) assert.ok(!text.includes(key), `${key} in ${text}`);
});
