import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

// A stand-in engine for the generation probe programs (src/engine/generation-probe.ts), and the
// programs run as the kubelet runs an exec probe: their argv, the container's env.

/** What the stand-in engine saw of one request. */
export interface Seen {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly body: string;
}

export type Answer = (res: ServerResponse, n: number, seen: Seen) => void;

export async function engine(answer: Answer): Promise<{ server: Server; port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const one = { method: req.method ?? "", url: req.url ?? "", authorization: req.headers.authorization, body: Buffer.concat(parts).toString("utf8") };
      seen.push(one);
      answer(res, seen.length, one);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

export const json = (status: number, body: unknown): Answer => (res) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(typeof body === "string" ? body : JSON.stringify(body));
};
export const TOKEN = { choices: [{ text: "!" }], usage: { completion_tokens: 1, prompt_tokens: 1, total_tokens: 2 } };

export interface Run {
  readonly code: number | null;
  readonly signal: string | null;
  readonly out: string;
  readonly ms: number;
  readonly argv: readonly string[];
}

/** Runs a program as the kubelet would: its argv, the container's env (the key only there). */
export function run(argv: readonly string[], env: Record<string, string>, limitMs: number): Promise<Run> {
  const [file, ...args] = argv;
  assert.ok(file !== undefined);
  const started = performance.now();
  return new Promise((resolve) => {
    // PATH for python3, curl, date, head, sleep; the proxy variables set to show they are not used.
    const childEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin", http_proxy: "http://127.0.0.1:9", HTTP_PROXY: "http://127.0.0.1:9", ...env };
    execFile(file, args, { env: childEnv, timeout: limitMs, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
      const e = error as (Error & { code?: number | string; signal?: string | null }) | null;
      resolve({ code: e === null ? 0 : typeof e.code === "number" ? e.code : null, signal: e?.signal ?? null, out: `${stdout}${stderr}`, ms: performance.now() - started, argv });
    });
  });
}

export const close = (s: Server): Promise<void> => new Promise((resolve) => { s.closeAllConnections(); s.close(() => resolve()); });

