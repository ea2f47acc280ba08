import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { formatRemoval, removeContainers } from "../deploy/down.js";
import { openSession } from "../deploy/session.js";
import { loadCluster, PACKAGE_ROOT, selfArgv } from "./load.js";
import type { Output } from "./output.js";
import { runUp } from "./up.js";
import { runImagesBuild, runImagesPush } from "./images.js";
import { runModelsSync } from "./models.js";

const DEMO_DIR = "/tmp/launcher-demo";
const CLUSTER = path.join(DEMO_DIR, "cluster.toml");
const GATEWAY_PID = path.join(DEMO_DIR, "serve.pid");
const GATEWAY_LOG = path.join(DEMO_DIR, "serve.log");
const LANE = "chat";

/** 8080 when it is free, else any free loopback port. */
function freePort(preferred: number): Promise<number> {
  const attempt = (port: number): Promise<number | undefined> =>
    new Promise((resolve) => {
      const srv = createServer();
      srv.once("error", () => resolve(undefined));
      srv.listen(port, "127.0.0.1", () => {
        const addr = srv.address();
        srv.close(() => resolve(typeof addr === "object" && addr !== null ? addr.port : undefined));
      });
    });
  return attempt(preferred).then(async (p) => p ?? (await attempt(0)) ?? preferred);
}

function stopGateway(): void {
  if (!existsSync(GATEWAY_PID)) return;
  const pid = Number(readFileSync(GATEWAY_PID, "utf8"));
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    // already gone
  }
  rmSync(GATEWAY_PID, { force: true });
}

/** `launcher serve` in the background, so that the demo's endpoint outlives the demo command. */
async function startGateway(port: number): Promise<string> {
  stopGateway();
  const log = openSync(GATEWAY_LOG, "w");
  const [program, ...args] = selfArgv(["serve", "--listen", `127.0.0.1:${port}`, "--cluster", CLUSTER]);
  const child = spawn(program as string, args, { detached: true, stdio: ["ignore", log, log] });
  closeSync(log);
  child.unref();
  writeFileSync(GATEWAY_PID, String(child.pid));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const models = await fetch(`${url}/v1/models`).then((r) => r.json() as Promise<{ data?: { id: string; status: string }[] }>, () => undefined);
    if (models?.data?.some((m) => m.id === LANE && m.status === "serving")) return url;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new UserError("demo: the gateway did not come up", readFileSync(GATEWAY_LOG, "utf8").trim().split("\n").slice(-10).join("\n"));
}

function step(io: Output, what: string, program: string, args: string[]): void {
  io.err(`demo: ${what} ...`);
  const r = spawnSync(program, args, { cwd: PACKAGE_ROOT, env: { ...process.env, RIG_DIR: DEMO_DIR }, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new UserError(`demo: ${what} failed`, (r.stderr || r.stdout).trim().split("\n").slice(-10).join("\n"));
}

async function demoDown(io: Output): Promise<void> {
  stopGateway();
  if (existsSync(CLUSTER)) {
    for (const line of formatRemoval(await removeContainers(await openSession(loadCluster(CLUSTER)), () => true, 5, true), "npx launcher demo --down", "per-container")) io.out(line);
  }
  step(io, "removing the practice cluster", "bash", ["test/rig/rig.sh", "down"]);
  io.out("the demo is gone: practice hosts, daemons, users and files removed");
}

export function registerDemo(program: Command, io: Output): void {
  program
    .command("demo")
    .description("make a 2-node practice cluster on this machine, launch practice-2x in a lane, answer a chat request through the gateway (root)")
    .option("--down", "remove the demo and its practice cluster")
    .action(async (opts: { down?: boolean }) => {
      if (process.getuid?.() !== 0) throw new UserError("the demo makes network namespaces, users and Docker daemons: run it as root");
      if (opts.down) return demoDown(io);
      step(io, "checking dockerd, sshd and iproute2 (installing them if missing)", "bash", ["scripts/install-deps"]);
      step(io, "making 2 practice hosts (network namespaces with sshd and dockerd)", "bash", ["test/rig/rig.sh", "up", "2"]);
      io.err("demo: building the practice engine image (a stand-in for vLLM) on the head and pushing it to the other host ...");
      const practice = path.join(PACKAGE_ROOT, "recipes", "practice-2x");
      await runImagesBuild(practice, { cluster: CLUSTER }, io);
      await runImagesPush(practice, { cluster: CLUSTER }, io);
      step(io, "putting a small practice model into n1's Hugging Face cache", "bash", ["test/rig/seed-model.sh", "1", String(4 << 20)]);
      io.err("demo: copying it to the other host (launcher models sync) ...");
      await runModelsSync(practice, { cluster: CLUSTER }, io);
      const cluster = loadCluster(CLUSTER);
      const session = await openSession(cluster);
      await removeContainers(session, () => true, 2);
      await runUp(practice, { cluster: CLUSTER, lane: LANE }, io);
      io.err("demo: starting the gateway (launcher serve) in the background ...");
      const gateway = await startGateway(await freePort(8080));
      const endpoint = `${gateway}/v1`;
      const question = "Say hello to the practice cluster.";
      const res = await fetch(`${endpoint}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: LANE, max_tokens: 12, messages: [{ role: "user", content: question }] }),
        signal: AbortSignal.timeout(30_000),
      });
      const body = (await res.json()) as { choices?: { message?: { content?: string } }[] };
      io.out(`\nthrough the gateway ${endpoint}, model "${LANE}" (the lane; the recipe serves "practice"):`);
      io.out(`you:       ${question}`);
      io.out(`practice:  ${body.choices?.[0]?.message?.content?.trim() ?? JSON.stringify(body)}`);
      io.out(`           (the practice engine is a stand-in for vLLM: its words are deterministic, not a model's)\n`);
      io.out("next, try:");
      io.out(`  export LAUNCHER_CLUSTER=${CLUSTER}`);
      io.out("  npx launcher status");
      io.out("  npx launcher lanes");
      io.out("  npx launcher history");
      io.out("  npx launcher logs practice-2x --tail 20");
      io.out(`  curl -s ${endpoint}/models`);
      io.out(`  curl -sN ${endpoint}/chat/completions -H 'content-type: application/json' -d '{"model":"${LANE}","stream":true,"messages":[{"role":"user","content":"hi"}]}'`);
      io.out(`  curl -s ${gateway}/metrics | grep launcher_gateway_requests`);
      io.out("  npx launcher down practice-2x");
      io.out("  npx launcher demo --down      # remove the practice cluster");
    });
}
