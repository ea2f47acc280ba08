// What the activity log costs the gateway: two gateways in one run, one without it and one with it
// (its ring, and a store on disk written once a second, as the daemon wires it), each its own
// process, in front of one stand-in engine, with the same bursts sent to each in interleaved rounds
// (A, B, A, B, ...: a shared machine's load moves between rounds, not between the two). No
// practice cluster is needed:
//   npx tsx bench/gateway-activity.ts [--streams 64] [--chunks 50] [--rounds 6]
// Prints, per round and as medians, each gateway's own CPU per request (/proc, utime + stime) and
// the burst's wall time, and their ratios, with/without (target: the log adds nothing measurable,
// a ratio within the rounds' own spread of 1); and first the log's own work per request, timed
// alone in this process, to set beside the gateway's CPU per request.
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";

const { values } = parseArgs({
  options: {
    role: { type: "string", default: "load" },
    engine: { type: "string", default: "" },
    activity: { type: "boolean", default: false },
    store: { type: "string", default: "" },
    streams: { type: "string", default: "64" },
    chunks: { type: "string", default: "50" },
    rounds: { type: "string", default: "6" },
  },
});
const STREAMS = Number(values.streams);
const CHUNKS = Number(values.chunks);
const ROUNDS = Number(values.rounds);

const listening = (server: Server): void => {
  process.send?.((server.address() as AddressInfo).port);
  process.on("disconnect", () => process.exit(0));
};

/** A stand-in engine: CHUNKS chunks as fast as it can, then a usage chunk and [DONE], as vLLM streams with include_usage. */
function engine(): void {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let n = 0;
      const step = (): void => {
        n++;
        res.write(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t${n}"}}]}\n\n`);
        if (n < CHUNKS) return void setImmediate(step);
        res.write(`data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${CHUNKS},"total_tokens":${CHUNKS + 12}}}\n\n`);
        res.end("data: [DONE]\n\n");
      };
      setImmediate(step);
    });
  });
  server.listen(0, "127.0.0.1", () => listening(server));
}

async function gateway(): Promise<void> {
  const [{ createGateway }, { routeTable }, { gatewayOptions, deployment }, { ActivityLog, ACTIVITY_FLUSH_MS, ACTIVITY_KEEP_ROWS, ACTIVITY_RING }, { Store }] = await Promise.all([
    import("../src/gateway/server.js"),
    import("../src/gateway/routes.js"),
    import("../test/unit/gateway-fixture.js"),
    import("../src/gateway/activity-log.js"),
    import("../src/store/store.js"),
  ]);
  const table = routeTable([deployment(values.engine)], []);
  const log = values.activity ? new ActivityLog({ store: new Store(values.store), ringSize: ACTIVITY_RING, keepRows: ACTIVITY_KEEP_ROWS, flushMs: ACTIVITY_FLUSH_MS }) : undefined;
  log?.start();
  const gw = createGateway(gatewayOptions({ routes: () => table, checkKey: (k) => k === "sk-bench", headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000, requestTimeoutMs: 60_000, ...(log === undefined ? {} : { activity: (r) => log.add(r) }) }));
  gw.server.listen(0, "127.0.0.1", () => listening(gw.server));
}

function start(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(process.argv[1] as string, args, { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return new Promise((resolve, reject) => {
    child.once("message", (port) => resolve({ child, port: port as number }));
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code}`)));
  });
}

/** utime + stime of a process, in ms (proc(5): fields 14 and 15, in clock ticks of 1/100 s). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function burst(port: number, agent: Agent): Promise<void> {
  const body = JSON.stringify({ model: "main", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hi" }] });
  await Promise.all(
    Array.from({ length: STREAMS }, async () => {
      const res = await request(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer sk-bench" }, body, dispatcher: agent });
      for await (const _ of res.body) void _;
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    }),
  );
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/**
 * The log's own work per request, alone and in this process (a sharper figure than the gateways'
 * CPU, whose /proc ticks are 10 ms): a stream's usage read from its last chunks, the record made
 * and added to the ring, and the store's write of it (one transaction per flush).
 */
async function steps(dir: string): Promise<string> {
  const [{ activityRecord }, { streamUsage }, { ActivityLog }, { Store }] = await Promise.all([import("../src/gateway/activity.js"), import("../src/gateway/proxy.js"), import("../src/gateway/activity-log.js"), import("../src/store/store.js")]);
  const store = new Store(path.join(dir, "steps.db"));
  const log = new ActivityLog({ store, ringSize: 1000, keepRows: 100_000, flushMs: 1000 });
  const tail = [Buffer.from(`data: {"choices":[{"index":0,"delta":{"content":"t"}}]}\n\n`), Buffer.from(`data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${CHUNKS}}}\n\ndata: [DONE]\n\n`)];
  const N = 200_000;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const usage = streamUsage(tail);
    log.add(activityRecord({ t: i, model: "main", lane: "main", status: 200, key: "sk-bench", trail: { deployment: "d", ttftMs: 5, tokensOut: usage?.completion ?? 0, tokensPerSecond: 50 } }));
    if (i % 1000 === 999) log.stop(); // a flush per 1000 requests, as at 1000 requests/s
  }
  const perRequest = ((performance.now() - t0) * 1000) / N;
  store.close();
  return `the log's own work: ${perRequest.toFixed(1)} us per request (usage read, record, ring, the store's batched write), ${N} requests`;
}

async function load(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-activity-"));
  const eng = await start(["--role", "engine", "--chunks", String(CHUNKS)]);
  const engineUrl = `http://127.0.0.1:${eng.port}`;
  const off = await start(["--role", "gateway", "--engine", engineUrl]);
  const on = await start(["--role", "gateway", "--engine", engineUrl, "--activity", "--store", path.join(dir, "launcher.db")]);
  const agent = new Agent({ connections: STREAMS, pipelining: 1 });
  const figures = { off: { cpu: [] as number[], wall: [] as number[] }, on: { cpu: [] as number[], wall: [] as number[] } };
  try {
    for (const g of [off, on]) await burst(g.port, agent); // warm-up: JIT, connections
    console.log(`Node ${process.version}; ${STREAMS} streams of ${CHUNKS} chunks per burst; load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`);
    console.log(await steps(dir));
    for (let round = 0; round < ROUNDS; round++) {
      const line: string[] = [];
      for (const [name, g] of round % 2 === 0 ? ([["off", off], ["on", on]] as const) : ([["on", on], ["off", off]] as const)) {
        const pid = g.child.pid as number;
        const cpu0 = cpuMs(pid);
        const t0 = performance.now();
        await burst(g.port, agent);
        const wall = performance.now() - t0;
        const cpu = (cpuMs(pid) - cpu0) / STREAMS;
        figures[name].cpu.push(cpu);
        figures[name].wall.push(wall);
        line.push(`${name}: ${cpu.toFixed(2)} ms CPU/request, burst ${wall.toFixed(0)} ms`);
      }
      console.log(`round ${round + 1}: ${line.join("; ")}`);
    }
    const ratio = (k: "cpu" | "wall"): string => (median(figures.on[k]) / median(figures.off[k])).toFixed(2);
    console.log(`medians: without ${median(figures.off.cpu).toFixed(2)} ms CPU/request, burst ${median(figures.off.wall).toFixed(0)} ms; with the activity log ${median(figures.on.cpu).toFixed(2)} ms, ${median(figures.on.wall).toFixed(0)} ms`);
    console.log(`with/without: CPU per request ${ratio("cpu")}x, burst wall time ${ratio("wall")}x`);
  } finally {
    await agent.close();
    for (const g of [eng, off, on]) g.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

const ROLES: Readonly<Record<string, () => void | Promise<void>>> = { engine, gateway, load };
await (ROLES[values.role] ?? load)();
