import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// A stand-in engine on loopback, answering as a ready vLLM (and the practice engine) does:
// /health 200, /metrics in Prometheus text, and /v1/chat/completions streamed as server-sent events.

export interface FakeEngine {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  /** The chat requests it answered (their JSON bodies). */
  readonly chats: unknown[];
  close(): Promise<void>;
}

/** The Prometheus text of an idle vLLM (names from vllm/v1/metrics/loggers.py). */
const METRICS = (model: string): string =>
  [
    "# TYPE vllm:num_requests_running gauge",
    `vllm:num_requests_running{model_name="${model}"} 0.0`,
    "# TYPE vllm:num_requests_waiting gauge",
    `vllm:num_requests_waiting{model_name="${model}"} 0.0`,
    "# TYPE vllm:kv_cache_usage_perc gauge",
    `vllm:kv_cache_usage_perc{model_name="${model}"} 0.0`,
    "",
  ].join("\n");

/** One streamed chunk; `model` is the served name, as vLLM sets it in each chunk. */
const chunk = (model: string, content: string): string => `data: ${JSON.stringify({ object: "chat.completion.chunk", model, choices: [{ index: 0, delta: { content } }] })}\n\n`;

/** Listens on `host:port` (port 0: any free one). */
export async function startFakeEngine(options: { host?: string; port?: number; model?: string } = {}): Promise<FakeEngine> {
  const model = options.model ?? "m";
  const chats: unknown[] = [];
  const server = createServer((req, res) => {
    if (req.url === "/health") return void res.writeHead(200).end();
    if (req.url === "/metrics") return void res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(METRICS(model));
    if (req.url === "/v1/models") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data: [{ id: model, object: "model" }] }));
    if (req.url !== "/v1/chat/completions" || req.method !== "POST") return void res.writeHead(404).end();
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d.length + body.length > 1 << 20 ? "" : d));
    req.on("end", () => {
      try {
        chats.push(JSON.parse(body) as unknown);
      } catch {
        chats.push(body);
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`${chunk(model, "hi")}data: [DONE]\n\n`);
    });
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    chats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on now, on `host`: where a fake deployment's engine will listen. */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, host, resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}
