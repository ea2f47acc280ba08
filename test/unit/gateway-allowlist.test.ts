import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { test } from "node:test";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { engineRefusedRoutes } from "../../src/engine/registry.js";
import { GATEWAY_METHODS, methodMatcher } from "../../src/gateway/methods.js";
import { canonicalPath } from "../../src/gateway/paths.js";
import { routeTable } from "../../src/gateway/routes.js";
import { createGateway, type GatewayOptions } from "../../src/gateway/server.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";
import { addEngineKeyHow } from "../../src/daemon/engine-key.js";

// ---------------------------------------------------------------- the normaliser (pure)

test("paths: dot segments, empty segments, encoded separators and encoded unreserved characters are refused", () => {
  for (const p of [
    "/v1/../collective_rpc",
    "/v1/./chat/completions",
    "/v1/chat/completions/..",
    "/v1/%2e%2e/collective_rpc",
    "/v1/%2E%2E/collective_rpc",
    "/v1/.%2e/x",
    "/v1/chat%2Fcompletions",
    "/v1/chat%2fcompletions",
    "/v1/chat%5Ccompletions",
    "/v1/chat\\completions",
    "//v1/chat/completions",
    "/v1//chat/completions",
    "/v1/chat/completions/",
    "/v1/chat/%63ompletions",
    "/v1/chat/completions%",
    "/v1/chat/completions%zz",
    "/v1/chat completions",
    "v1/chat/completions",
    "*",
    `/v1/${"a".repeat(3000)}`,
  ]) {
    const v = canonicalPath(p);
    assert.equal(v.ok, false, p);
    assert.equal(!v.ok && v.code, "invalid_path", p);
  }
});

test("paths: a plain path passes as it is, its query kept apart; %2F only where the gateway answers itself", () => {
  assert.deepEqual(canonicalPath("/v1/chat/completions"), { ok: true, path: "/v1/chat/completions", query: "" });
  assert.deepEqual(canonicalPath("/v1/completions?x=../y"), { ok: true, path: "/v1/completions", query: "?x=../y" });
  assert.deepEqual(canonicalPath("/"), { ok: true, path: "/", query: "" });
  assert.deepEqual(canonicalPath("/v1/models/org%2Fname", true), { ok: true, path: "/v1/models/org%2Fname", query: "" });
  assert.equal(canonicalPath("/v1/models/org%2Fname").ok, false);
  assert.equal(canonicalPath("/v1/models/%2e%2e", true).ok, false, "dots stay refused");
  assert.equal(canonicalPath("/v1/models/a%20b").ok, true, "a reserved or other character may be encoded");
});

// ---------------------------------------------------------------- the allow-list (pure)

test("allow-list: inference routes forwarded; LoRA loading, responses by id and cancel, unknown routes are not", () => {
  const methodsOf = methodMatcher([GATEWAY_METHODS, vllm.apiMethods]);
  for (const p of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages"]) assert.deepEqual(methodsOf(p), ["POST"], p);
  for (const p of ["/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1/responses/abc", "/v1/responses/abc/cancel", "/v1/collective_rpc", "/collective_rpc", "/v1/x"]) {
    assert.equal(methodsOf(p), undefined, p);
  }
  const refused = engineRefusedRoutes();
  for (const p of ["/v1/load_lora_adapter", "/v1/responses/{response_id}", "/v1/responses/{response_id}/cancel"]) assert.ok(refused[p], p);
  for (const p of Object.keys(refused)) assert.equal(vllm.apiMethods[p], undefined, `${p} is both forwarded and refused`);
});

// ---------------------------------------------------------------- over HTTP

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

async function standIn(): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

/** One raw HTTP/1.1 request, the request target exactly as written (no client library rewrites it). */
function raw(gw: string, method: string, target: string, body = ""): Promise<{ status: number; body: string }> {
  const { port } = new URL(gw);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1", () =>
      socket.write(`${method} ${target} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer gw-key\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`),
    );
    let got = "";
    socket.on("data", (c: Buffer) => (got += c.toString("utf8")));
    socket.on("close", () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m === null) reject(new Error(`no HTTP answer: ${JSON.stringify(got.slice(0, 200))}`));
      else resolve({ status: Number(m[1]), body: got.slice(got.indexOf("\r\n\r\n") + 4) });
    });
    socket.on("error", reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer in 10 s")));
  });
}

async function withGateway(over: Partial<GatewayOptions>, run: (gw: string, seen: Seen[]) => Promise<void>): Promise<void> {
  const engine = await standIn();
  const table = routeTable([deployment(engine.url)], [{ name: "main", cluster: "c", state: "serving", since: "t", deployment: "practice-2x" }]);
  const gw = createGateway(gatewayOptions({ routes: () => table, checkKey: (k) => k === "gw-key", engineKey: () => "engine-secret", apiRefused: engineRefusedRoutes(), ...over }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  try {
    await run(`http://127.0.0.1:${(gw.server.address() as AddressInfo).port}`, engine.seen);
  } finally {
    gw.server.closeAllConnections();
    await new Promise<void>((r) => gw.server.close(() => r()));
    await gw.close();
    engine.server.closeAllConnections();
    engine.server.close();
  }
}

const BODY = '{"model":"main","messages":[]}';

test("HTTP: refused routes and non-canonical paths never reach the engine, so never carry its key; chat still does", async () => {
  await withGateway({}, async (gw, seen) => {
    const cases: [string, string, number][] = [
      ["POST", "/v1/load_lora_adapter", 404],
      ["POST", "/v1/unload_lora_adapter", 404],
      ["GET", "/v1/responses/abc", 404],
      ["POST", "/v1/responses/abc/cancel", 404],
      ["POST", "/v1/collective_rpc", 404],
      ["GET", "/v1/anything-else", 404],
      ["POST", "/v1/../collective_rpc", 400],
      ["POST", "/v1/chat/completions/../../collective_rpc", 400],
      ["POST", "/v1/%2e%2e/collective_rpc", 400],
      ["POST", "/v1/chat%2Fcompletions", 400],
      ["POST", "//v1/chat/completions", 400],
      ["POST", "/v1//chat/completions", 400],
      ["POST", "/v1/chat/%63ompletions", 400],
    ];
    for (const [method, target, status] of cases) {
      const a = await raw(gw, method, target, method === "POST" ? BODY : "");
      assert.equal(a.status, status, `${method} ${target}: ${a.body}`);
      const error = (JSON.parse(a.body) as { error: { code: string; type: string } }).error;
      assert.equal(error.code, status === 404 ? "not_found" : "invalid_path", target);
      assert.equal(error.type, "invalid_request_error");
    }
    const lora = await raw(gw, "POST", "/v1/load_lora_adapter", BODY);
    assert.match(lora.body, /changes the engine for every client/, "the 404 says why");
    assert.equal(seen.length, 0, "nothing reached the engine");
    const chat = await raw(gw, "POST", "/v1/chat/completions?trace=1", BODY);
    assert.equal(chat.status, 200, chat.body);
    assert.deepEqual(seen.map((s) => `${s.method} ${s.url} ${s.headers.authorization ?? ""}`), ["POST /v1/chat/completions?trace=1 Bearer engine-secret"]);
  });
});

test("HTTP: a gateway with API keys does not route a deployment whose engine demands no key (503 saying what to add)", async () => {
  await withGateway({ engineKey: () => undefined, requireEngineKey: { how: addEngineKeyHow } }, async (gw, seen) => {
    const a = await raw(gw, "POST", "/v1/chat/completions", BODY);
    assert.equal(a.status, 503, a.body);
    const error = (JSON.parse(a.body) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, "engine_key_missing");
    assert.match(error.message, /deployment practice-2x\) is not routed: its engine demands no API key/);
    assert.match(error.message, /--api-key KEY to its args \(or VLLM_API_KEY to its \[env\]\) in recipe practice-2x/);
    assert.equal(seen.length, 0);
  });
  await withGateway({ requireEngineKey: { how: addEngineKeyHow } }, async (gw, seen) => {
    assert.equal((await raw(gw, "POST", "/v1/chat/completions", BODY)).status, 200, "with a recorded key it routes");
    assert.equal(seen.length, 1);
  });
  await withGateway({ engineKey: () => undefined }, async (gw, seen) => {
    assert.equal((await raw(gw, "POST", "/v1/chat/completions", BODY)).status, 200, "without keys (loopback) it routes as before");
    assert.equal(seen[0]?.headers.authorization, undefined);
  });
});
