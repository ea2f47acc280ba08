import assert from "node:assert/strict";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { test } from "node:test";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { methodMatcher, allowedMethods, GATEWAY_METHODS } from "../../src/gateway/methods.js";
import { routeTable } from "../../src/gateway/routes.js";
import { createGateway } from "../../src/gateway/server.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";

// What the gateway does per request and per read of an engine's socket, measured where it shows:
// the writes it makes to its client's socket.

const SSE = ["data: {\"n\":1}\n\n", "data: {\"n\":2}\n\n", "data: [DONE]\n\n"];
const chunked = (parts: readonly string[]): string => parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join("") + "0\r\n\r\n";

/** An engine that answers any request with its headers and a whole short stream in ONE write. */
async function oneReadEngine(): Promise<{ url: string; close: () => void }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    let seen = "";
    socket.on("data", (d: Buffer) => {
      seen += d.toString("latin1");
      const end = seen.indexOf("\r\n\r\n");
      if (end === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(seen.slice(0, end))?.[1] ?? "0");
      if (seen.length < end + 4 + length) return;
      seen = "";
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunked(SSE)}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}


test("a stream whose headers and chunks come in one read of the engine's socket reaches the client in one write", async () => {
  const engine = await oneReadEngine();
  const table = routeTable([deployment(engine.url)], []);
  const gw = createGateway(gatewayOptions({ routes: () => table }));
  // Every write the gateway makes to a client's socket, counted where Node's Writable hands it to
  // the socket (one _write or _writev is one syscall's worth).
  let writes = 0;
  gw.server.on("connection", (socket: Socket) => {
    const write = socket._write.bind(socket);
    const writev = socket._writev?.bind(socket);
    socket._write = (...a) => {
      writes++;
      write(...a);
    };
    if (writev !== undefined) {
      socket._writev = (...a) => {
        writes++;
        writev(...a);
      };
    }
  });
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  const client = connect((gw.server.address() as AddressInfo).port, "127.0.0.1");
  try {
    const body = JSON.stringify({ model: "practice", stream: true, messages: [{ role: "user", content: "hi" }] });
    const answer = await new Promise<string>((resolve, reject) => {
      let text = "";
      const timer = setTimeout(() => reject(new Error(`no whole answer in 5 s: ${JSON.stringify(text)}`)), 5000);
      client.on("data", (d: Buffer) => {
        text += d.toString("latin1");
        if (text.endsWith("0\r\n\r\n")) {
          clearTimeout(timer);
          resolve(text);
        }
      });
      client.on("error", reject);
      client.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
    for (const part of SSE) assert.ok(answer.includes(part), `the answer holds ${JSON.stringify(part)}`);
    // Before: the headers alone (flushHeaders), then the chunks and the end: two writes.
    assert.equal(writes, 1, "headers, chunks and the end of one read leave in one write");
  } finally {
    client.destroy();
    gw.server.closeAllConnections();
    await new Promise<void>((r) => gw.server.close(() => r()));
    await gw.close();
    engine.close();
  }
});

test("the method matcher, built once, answers as the table lookup does", () => {
  const tables = [GATEWAY_METHODS, vllm.apiMethods];
  const match = methodMatcher(tables);
  for (const p of ["/v1/chat/completions", "/v1/models", "/v1/models/x", "/v1/models/", "/health", "/v1/responses/r1", "/v1/nope", "/", ""]) {
    assert.deepEqual(match(p), allowedMethods(tables, p), p);
  }
  assert.deepEqual(match("/v1/models/some-model"), ["GET", "HEAD"]);
  assert.equal(match("/v1/models/"), undefined, "an empty {model} segment names no route");
});
