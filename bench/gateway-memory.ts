// The gateway's memory under large request bodies (issue 25): 8 concurrent 50 MB chat requests to a
// lane (so each body is read, its model found and rewritten to the served name), against a local
// stand-in engine on loopback that holds each large request 2 s. The gateway runs in a child
// process, so that its RSS is its own (read from /proc: VmRSS idle, VmHWM the peak); the engine
// and the clients run here. Meanwhile a small request goes every 100 ms: its latency shows the
// gateway answering while the large ones hold its body budget (src/gateway/budget.ts).
// Run: node --import tsx bench/gateway-memory.ts   (BENCH_BODIES, default 8; BENCH_BODY_MB, default 50)
import { fork, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

const BODIES = Number(process.env.BENCH_BODIES ?? "8");
const BODY_BYTES = Number(process.env.BENCH_BODY_MB ?? "50") * 1_000_000;
/** launcher serve's limit of one request's body (src/gateway/budget.ts MAX_BODY_BYTES). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const HOLD_MS = 2000;
const MIB = 1024 * 1024;

async function child(engine: string): Promise<void> {
  const { createGateway } = await import("../src/gateway/server.js");
  const { routeTable } = await import("../src/gateway/routes.js");
  const { deployment, gatewayOptions } = await import("../test/unit/gateway-fixture.js");
  const table = routeTable([deployment(engine)], [{ name: "main", cluster: "c", state: "serving", since: "t", deployment: "practice-2x" }]);
  const gw = createGateway(gatewayOptions({ routes: () => table, maxBodyBytes: MAX_BODY_BYTES, requestTimeoutMs: 120_000, headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 }));
  gw.server.listen(0, "127.0.0.1", () => process.send?.({ port: (gw.server.address() as AddressInfo).port }));
}

/** A stand-in engine: counts a body's bytes without keeping them; holds a large one HOLD_MS. */
function engine(): Promise<Server> {
  const server = createServer((req, res) => {
    let size = 0;
    req.on("data", (c: Buffer) => (size += c.length));
    req.on("end", () =>
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ received: size }));
      }, size > MIB ? HOLD_MS : 0),
    );
  });
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r(server)));
}

function post(url: string, body: Buffer): Promise<number> {
  return new Promise((resolve) => {
    const req = request(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "content-length": String(body.length) } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    // A 413 answered from the Content-Length may cut the upload short: its status came first.
    req.on("error", () => resolve(-1));
    req.end(body);
  });
}

const kib = (pid: number, field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN) * 1024;
const mib = (n: number): string => `${(n / MIB).toFixed(0)} MiB`;

async function main(): Promise<void> {
  const { BODY_BUDGET_BYTES } = await import("../src/gateway/budget.js");
  const stand = await engine();
  const engineUrl = `http://127.0.0.1:${(stand.address() as AddressInfo).port}`;
  const gw: ChildProcess = fork(fileURLToPath(import.meta.url), ["child", engineUrl], { execArgv: ["--import", "tsx"] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      gw.once("message", (m) => resolve((m as { port: number }).port));
      gw.once("exit", (code) => reject(new Error(`the gateway exited (${code})`)));
    });
    const url = `http://127.0.0.1:${port}`;
    const small = Buffer.from('{"model":"main","messages":[{"role":"user","content":"hi"}]}');
    for (let i = 0; i < 5; i++) await post(url, small);
    await new Promise((r) => setTimeout(r, 1000));
    const pid = gw.pid ?? 0;
    const idle = kib(pid, "VmRSS");
    const head = '{"model":"main","messages":[{"role":"user","content":"';
    const tail = '"}]}';
    const big = Buffer.alloc(BODY_BYTES, 0x78);
    big.write(head, 0);
    big.write(tail, BODY_BYTES - tail.length);
    const latencies: number[] = [];
    let running = true;
    const smalls = (async () => {
      while (running) {
        const t = Date.now();
        const status = await post(url, small);
        if (status === 200) latencies.push(Date.now() - t);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const statuses = await Promise.all(Array.from({ length: BODIES }, () => post(url, big)));
    running = false;
    await smalls;
    const peak = kib(pid, "VmHWM");
    const sorted = [...latencies].sort((a, b) => a - b);
    const count = (s: number): number => statuses.filter((x) => x === s).length;
    console.log(`${BODIES} concurrent bodies of ${BODY_BYTES / 1e6} MB: ${count(200)} answered 200, ${count(413)} answered 413 (the body budget), ${count(-1)} cut while sending`);
    console.log(`gateway RSS: idle ${mib(idle)} | peak ${mib(peak)} | idle + budget ${mib(idle + BODY_BUDGET_BYTES)} (budget ${mib(BODY_BUDGET_BYTES)})`);
    console.log(`small requests meanwhile: ${latencies.length} answered, latency median ${sorted[Math.floor(sorted.length / 2)] ?? "?"} ms, max ${sorted.at(-1) ?? "?"} ms`);
    if (peak > idle + BODY_BUDGET_BYTES) process.exitCode = 1;
  } finally {
    gw.kill();
    stand.closeAllConnections();
    stand.close();
  }
}

if (process.argv[2] === "child") await child(process.argv[3] ?? "");
else await main();
