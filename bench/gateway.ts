// The same streaming workload, in one run, three ways: straight to the practice engine, through
// `launcher serve`, and through Debian's nginx as a plain streaming reverse proxy (the reference).
// Prints requests per second, the gaps between chunks as the client sees them (p50/p99), the
// gateway/nginx and gateway/direct ratios, and the gateway's memory at 64 and 256 streams.
// Run as root: npx tsx bench/gateway.ts [--streams 64] [--chunks 200] [--rounds 3]
// Targets: >= 0.8 x nginx's throughput, <= 2 ms added to p99 chunk gap, memory flat 64 -> 256.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import { launcher, rigDown, rigUp, startGateway, variant, type Daemon } from "../test/integration/practice-cluster.js";

const { values } = parseArgs({ options: { streams: { type: "string", default: "64" }, chunks: { type: "string", default: "200" }, rounds: { type: "string", default: "3" } } });
const STREAMS = Number(values.streams);
const CHUNKS = Number(values.chunks);
const ROUNDS = Number(values.rounds);
const ENGINE = "http://10.231.0.11:8000";
const NGINX_PORT = 18_481;

process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
if (spawnSync("sh", ["-c", "command -v nginx"]).status !== 0) {
  console.error("bench: installing nginx-light (the reference proxy) ...");
  spawnSync("sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light"], { stdio: "inherit" });
}
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-gw-"));

function startNginx(): ChildProcess {
  mkdirSync(path.join(dir, "nginx", "logs"), { recursive: true });
  const conf = path.join(dir, "nginx", "nginx.conf");
  writeFileSync(
    conf,
    `worker_processes auto;
pid ${dir}/nginx/nginx.pid;
error_log ${dir}/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream engine { server ${new URL(ENGINE).host}; keepalive 512; }
  server {
    listen 127.0.0.1:${NGINX_PORT};
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
`,
  );
  return spawn("nginx", ["-p", path.join(dir, "nginx"), "-c", conf, "-g", "daemon off;"], { stdio: "ignore" });
}

interface RunStats {
  readonly seconds: number;
  readonly requests: number;
  readonly gaps: number[];
  readonly failures: number;
}

/** `streams` concurrent clients, each streaming `perClient` chat completions of CHUNKS tokens. */
async function load(base: string, streams: number, perClient: number, model: string, onTick?: () => void): Promise<RunStats> {
  const agent = new Agent({ connections: streams * 2, keepAliveTimeout: 10_000 });
  const gaps: number[] = [];
  let failures = 0;
  let requests = 0;
  const body = JSON.stringify({ model, stream: true, max_tokens: CHUNKS, messages: [{ role: "user", content: "bench" }] });
  const client = async (): Promise<void> => {
    for (let i = 0; i < perClient; i++) {
      try {
        const res = await request(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body, dispatcher: agent });
        let last = performance.now();
        let first = true;
        for await (const _ of res.body) {
          const t = performance.now();
          if (!first) gaps.push(t - last);
          first = false;
          last = t;
          onTick?.();
        }
        if (res.statusCode === 200) requests++;
        else failures++;
      } catch {
        failures++;
      }
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: streams }, client));
  const seconds = (performance.now() - start) / 1000;
  await agent.close();
  return { seconds, requests, gaps, failures };
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) / 1024;
}

let nginx: ChildProcess | undefined;
let gateway: Daemon | undefined;
try {
  rigUp(1);
  const recipe = variant(dir, "bench-engine", "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\nPRACTICE_TOKENS_PER_SEC = "0"\n`);
  const up = await launcher(["up", recipe]);
  if (up.code !== 0) throw new Error(`up failed:\n${up.stderr}`);
  gateway = await startGateway();
  nginx = startNginx();
  for (let i = 0; i < 50 && !(await fetch(`http://127.0.0.1:${NGINX_PORT}/health`).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 100));
  const gatewayPid = Number(spawnSync("sh", ["-c", `pgrep -f 'dist/cli/main.js serve' | head -1`], { encoding: "utf8" }).stdout.trim());

  const targets = { direct: ENGINE, gateway: gateway.url, nginx: `http://127.0.0.1:${NGINX_PORT}` } as const;
  type Name = keyof typeof targets;
  const names = Object.keys(targets) as Name[];
  // Warm every path (connections, JIT) before measuring.
  for (const n of names) await load(targets[n], 8, 2, "practice");
  const results = new Map<Name, RunStats[]>(names.map((n) => [n, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate the order so that no path always runs first (or last) in a round.
    for (const n of [...names.slice(round % 3), ...names.slice(0, round % 3)]) results.get(n)?.push(await load(targets[n], STREAMS, 4, "practice"));
  }

  console.log(`\n${STREAMS} concurrent streams x 4 requests each, ${CHUNKS} chunks per request, ${ROUNDS} rounds; practice engine at full speed on a practice host\n`);
  console.log("path        req/s   chunk gap p50   p99     failures");
  const summary = new Map<Name, { rps: number; p50: number; p99: number }>();
  for (const n of names) {
    const runs = results.get(n) ?? [];
    const rps = runs.reduce((a, r) => a + r.requests, 0) / runs.reduce((a, r) => a + r.seconds, 0);
    const gaps = runs.flatMap((r) => r.gaps);
    const s = { rps, p50: pct(gaps, 50), p99: pct(gaps, 99) };
    summary.set(n, s);
    console.log(`${n.padEnd(10)} ${rps.toFixed(1).padStart(6)}   ${s.p50.toFixed(3).padStart(8)} ms  ${s.p99.toFixed(3).padStart(7)} ms  ${runs.reduce((a, r) => a + r.failures, 0)}`);
  }
  const g = summary.get("gateway");
  const x = summary.get("nginx");
  const d = summary.get("direct");
  if (g && x && d) {
    console.log(`\ngateway / nginx throughput:  ${(g.rps / x.rps).toFixed(2)} x   (target >= 0.8)`);
    console.log(`gateway / direct throughput: ${(g.rps / d.rps).toFixed(2)} x`);
    console.log(`p99 chunk gap added: gateway ${(g.p99 - d.p99).toFixed(3)} ms, nginx ${(x.p99 - d.p99).toFixed(3)} ms   (target: gateway <= 2 ms)`);
  }

  // Memory: the gateway's resident size at its peak under 64 and then 256 concurrent streams.
  const peakUnder = async (streams: number): Promise<number> => {
    let peak = rssMiB(gatewayPid);
    let ticks = 0;
    await load(gateway?.url ?? "", streams, 2, "practice", () => {
      if (++ticks % 500 === 0) peak = Math.max(peak, rssMiB(gatewayPid));
    });
    return peak;
  };
  const idle = rssMiB(gatewayPid);
  const at64 = await peakUnder(64);
  const at256 = await peakUnder(256);
  console.log(`\ngateway memory (RSS): idle ${idle.toFixed(1)} MiB, peak at 64 streams ${at64.toFixed(1)} MiB, at 256 streams ${at256.toFixed(1)} MiB; 256/64 = ${(at256 / at64).toFixed(2)} x   (target: flat, about 1 x)`);
} finally {
  nginx?.kill("SIGTERM");
  await gateway?.stop();
  await launcher(["down", "--all", "--grace", "1"]);
  rigDown();
  if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
}
