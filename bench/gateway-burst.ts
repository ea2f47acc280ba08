// A burst of streams starting at once, through the gateway and straight to the engine, in
// interleaved rounds, on this machine alone (no practice cluster: a stand-in engine of plain
// Node streams SSE chunks at a fixed pace). What bench/gateway.ts measures on the rig, in seconds
// instead of minutes, to try a change against the tree's code in one run:
//   npx tsx bench/gateway-burst.ts [--streams 64] [--chunks 50] [--rate 50] [--rounds 5]
//     [--proxy gateway|floor|floor-http] [--processes N] [--gateway-node-options=--cpu-prof]
// Prints, per path, the first chunk's p50/p99 of each round and their medians, the p99 chunk gap,
// and the proxy processes' own CPU per request (/proc, utime + stime). Compare two proxies by
// running it once for each, alternately (a shared machine's load moves between runs): --proxy
// floor is a minimal Node proxy (Node's own cost per request, which launcher's steps add to),
// --processes 2 runs the gateway twice on one port with reusePort.
// Three kinds of processes: the engine, the proxy (createGateway with one static route), and this
// one, the load; each is its own process, as on the rig.
import { fork, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent as HttpAgent, createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";

const { values } = parseArgs({
  options: {
    role: { type: "string", default: "load" },
    engine: { type: "string", default: "" },
    streams: { type: "string", default: "64" },
    chunks: { type: "string", default: "50" },
    rate: { type: "string", default: "50" },
    rounds: { type: "string", default: "5" },
    "gateway-node-options": { type: "string", default: "" },
    /** floor: a minimal Node proxy in place of launcher's gateway (what Node itself costs); floor-http: the same with node:http's client. */
    proxy: { type: "string", default: "gateway" },
    /** More than 1: that many proxy processes on one port, each listening with reusePort (Linux SO_REUSEPORT spreads connections among them). */
    processes: { type: "string", default: "1" },
    port: { type: "string", default: "0" },
  },
});
const STREAMS = Number(values.streams);
const CHUNKS = Number(values.chunks);
const RATE = Number(values.rate);
const ROUNDS = Number(values.rounds);

/** Tells the parent the port this child listens on. */
const listening = (server: Server): void => {
  process.send?.((server.address() as AddressInfo).port);
  process.on("disconnect", () => process.exit(0));
};

/**
 * How long the stand-in engine keeps an idle connection (the practice engine's is 5 s). It says
 * `Keep-Alive: timeout=3`, and undici keeps a connection that long less its 2 s threshold
 * (lib/dispatcher/client-h1.js onHeadersComplete, client.js keepAliveTimeoutThreshold): 1 s here.
 * The load waits longer between bursts, so each burst connects anew, as on the rig (where the
 * other paths' rounds take longer than the practice engine's 3 s).
 */
const ENGINE_KEEP_ALIVE_MS = 3500;
const UNDICI_KEEPS_MS = 1000;

/**
 * The stand-in engine, as the practice engine streams (docker-images/practice-engine/lib/http.js):
 * the headers flushed at once, the first chunk on the next turn of its loop, then one every
 * 1000/RATE ms, CHUNKS in all.
 */
function engine(): void {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.flushHeaders();
      let n = 0;
      let timer: NodeJS.Timeout | undefined;
      const start = Date.now();
      const step = (): void => {
        n++;
        res.write(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t${n}"}}]}\n\n`);
        if (n === CHUNKS) res.end("data: [DONE]\n\n");
        else timer = setTimeout(step, Math.max(0, start + (n * 1000) / RATE - Date.now()));
      };
      setImmediate(step);
      res.on("close", () => clearTimeout(timer));
    });
  });
  server.keepAliveTimeout = ENGINE_KEEP_ALIVE_MS;
  server.listen(0, "127.0.0.1", () => listening(server));
}

async function gateway(): Promise<void> {
  const [{ createGateway }, { routeTable }, { gatewayOptions }] = await Promise.all([
    import("../src/gateway/server.js"),
    import("../src/gateway/routes.js"),
    import("../test/unit/gateway-fixture.js"),
  ]);
  const deployment = { cluster: "c", deployment: "d", recipe: "r", recipe_hash: "h", served_model: "paced", endpoint: values.engine, status: "serving", phase: "serving", uptime_seconds: 1, missing: [], unreachable: [], ranks: [] } as const;
  const table = routeTable([deployment], []);
  const gw = createGateway(gatewayOptions({ routes: () => table, headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000, requestTimeoutMs: 60_000 }));
  gw.server.listen(listenOptions(), () => listening(gw.server));
}

/**
 * The least a Node proxy can do per request: node:http's server, undici's raw dispatch to the
 * engine with the gateway's Agent settings, each chunk written as it comes; no launcher code at
 * all. Its figures are the floor that launcher's own steps add to.
 */
function floor(): void {
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 1024, pipelining: 1 });
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      dispatcher.dispatch(
        { origin: values.engine, path: req.url ?? "/", method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat(parts) },
        {
          onRequestStart() {},
          onResponseStart(_c, status, headers) {
            res.writeHead(status, { "content-type": String(headers["content-type"] ?? "") });
            res.flushHeaders();
          },
          onResponseData(_c, chunk) {
            res.write(chunk);
          },
          onResponseEnd() {
            res.end();
          },
          onResponseError() {
            res.destroy();
          },
        },
      );
    });
  });
  server.listen(listenOptions(), () => listening(server));
}

/**
 * reusePort: Node 22.12+ / 23.1+ (doc/api/net.md, server.listen(options): "allows multiple
 * sockets on the same host to bind to the same port. Incoming connections are distributed by the
 * operating system to listening sockets. This option is available only on some platforms, such
 * as Linux 3.9+").
 */
const listenOptions = (): { port: number; host: string; reusePort?: boolean } => ({ port: Number(values.port), host: "127.0.0.1", ...(Number(values.processes) > 1 ? { reusePort: true } : {}) });

/** The floor again with node:http's client (its native llhttp parser) in place of undici's (llhttp in WebAssembly). */
function floorHttp(): void {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: 1024 });
  const engineUrl = new URL(values.engine ?? "");
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const body = Buffer.concat(parts);
      const up = httpRequest({ agent, host: engineUrl.hostname, port: engineUrl.port, path: req.url, method: "POST", headers: { "content-type": "application/json", "content-length": body.length } }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, { "content-type": String(answer.headers["content-type"] ?? "") });
        res.flushHeaders();
        answer.on("data", (c: Buffer) => res.write(c));
        answer.on("end", () => res.end());
      });
      up.on("error", () => res.destroy());
      up.end(body);
    });
  });
  server.listen(listenOptions(), () => listening(server));
}

function child(role: string, extra: string[], nodeOptions: string): Promise<{ proc: ChildProcess; url: string }> {
  const proc = fork(process.argv[1] ?? "", ["--role", role, ...extra], { execArgv: ["--import", "tsx", ...nodeOptions.split(" ").filter(Boolean)], stdio: "inherit" });
  return new Promise((resolve, reject) => {
    proc.once("message", (port) => resolve({ proc, url: `http://127.0.0.1:${String(port)}` }));
    proc.once("exit", (code) => reject(new Error(`${role} exited with ${code}`)));
  });
}

const pct = (xs: readonly number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

/** CPU time (user + system) of a process so far, ms (/proc/PID/stat fields 14 and 15, clock ticks of 10 ms). */
const cpuMs = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(f[11] ?? 0) + Number(f[12] ?? 0)) * 10;
};

async function burst(base: string): Promise<{ firsts: number[]; gaps: number[] }> {
  const agent = new Agent({ connections: STREAMS * 2 });
  const body = JSON.stringify({ model: "paced", stream: true, max_tokens: CHUNKS, messages: [{ role: "user", content: "bench" }] });
  const firsts: number[] = [];
  const gaps: number[] = [];
  await Promise.all(
    Array.from({ length: STREAMS }, async () => {
      const sent = performance.now();
      const res = await request(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, dispatcher: agent });
      let last: number | undefined;
      for await (const _ of res.body) {
        const t = performance.now();
        if (last === undefined) firsts.push(t - sent);
        else gaps.push(t - last);
        last = t;
      }
    }),
  );
  await agent.close();
  return { firsts, gaps };
}

async function load(): Promise<void> {
  const e = await child("engine", ["--chunks", String(CHUNKS), "--rate", String(RATE)], "");
  const processes = Number(values.processes);
  const g = await child(values.proxy ?? "gateway", ["--engine", e.url, "--processes", String(processes)], values["gateway-node-options"]);
  const more = await Promise.all(Array.from({ length: processes - 1 }, () => child(values.proxy ?? "gateway", ["--engine", e.url, "--processes", String(processes), "--port", new URL(g.url).port], values["gateway-node-options"])));
  const proxyPids = [g, ...more].map((x) => x.proc.pid ?? 0);
  try {
    const paths = { direct: e.url, gateway: g.url };
    for (const base of Object.values(paths)) await burst(base);
    const rounds: Record<string, { firsts: number[]; gaps: number[] }[]> = { direct: [], gateway: [] };
    let gatewayCpu = 0;
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, base] of r % 2 === 0 ? Object.entries(paths) : Object.entries(paths).reverse()) {
        await new Promise((r) => setTimeout(r, UNDICI_KEEPS_MS + 500));
        const before = proxyPids.reduce((a, p) => a + cpuMs(p), 0);
        rounds[name]?.push(await burst(base));
        if (name === "gateway") gatewayCpu += proxyPids.reduce((a, p) => a + cpuMs(p), 0) - before;
      }
    }
    console.log(`node ${process.version}; the proxy: ${values.proxy ?? ""} x ${processes}; ${STREAMS} streams at once, ${CHUNKS} chunks at ${RATE}/s, ${ROUNDS} rounds, load average ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
    for (const [name, rs] of Object.entries(rounds)) {
      const p99s = rs.map((x) => pct(x.firsts, 99));
      console.log(
        `${name.padEnd(8)} first chunk p50 ${pct(rs.flatMap((x) => x.firsts), 50).toFixed(1)} ms, p99 per round ${p99s.map((x) => x.toFixed(0)).join("/")} ms, median round ${pct(p99s, 50).toFixed(1)} ms; chunk gap p99 ${pct(rs.flatMap((x) => x.gaps), 99).toFixed(2)} ms`,
      );
    }
    console.log(`gateway CPU per request: ${(gatewayCpu / (ROUNDS * STREAMS)).toFixed(2)} ms`);
  } finally {
    for (const x of [g, ...more]) x.proc.disconnect();
    e.proc.disconnect();
  }
}

const roles: Record<string, () => unknown> = { engine, gateway, floor, "floor-http": floorHttp, load };
await roles[values.role ?? "load"]?.();
