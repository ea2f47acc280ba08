import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { removeContainers } from "../deploy/down.js";
import { openSession } from "../deploy/session.js";
import { loadCluster, PACKAGE_ROOT } from "./load.js";
import type { Output } from "./output.js";
import { runUp } from "./up.js";

const DEMO_DIR = "/tmp/launcher-demo";
const CLUSTER = path.join(DEMO_DIR, "cluster.toml");

function step(io: Output, what: string, program: string, args: string[]): void {
  io.err(`demo: ${what} ...`);
  const r = spawnSync(program, args, { cwd: PACKAGE_ROOT, env: { ...process.env, RIG_DIR: DEMO_DIR }, stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new UserError(`demo: ${what} failed`, (r.stderr || r.stdout).trim().split("\n").slice(-10).join("\n"));
}

async function demoDown(io: Output): Promise<void> {
  if (existsSync(CLUSTER)) {
    const removed = await removeContainers(await openSession(loadCluster(CLUSTER)), () => true, 5);
    for (const r of removed) io.out(`stopped ${r.deployment}: ${r.node} ${r.container}`);
  }
  step(io, "removing the practice cluster", "bash", ["test/rig/rig.sh", "down"]);
  io.out("the demo is gone: practice hosts, daemons, users and files removed");
}

export function registerDemo(program: Command, io: Output): void {
  program
    .command("demo")
    .description("make a 2-node practice cluster on this machine, launch practice-2x, answer a chat request (root)")
    .option("--down", "remove the demo and its practice cluster")
    .action(async (opts: { down?: boolean }) => {
      if (process.getuid?.() !== 0) throw new UserError("the demo makes network namespaces, users and Docker daemons: run it as root");
      if (opts.down) return demoDown(io);
      step(io, "checking dockerd, sshd and iproute2 (installing them if missing)", "bash", ["scripts/install-deps"]);
      step(io, "making 2 practice hosts (network namespaces with sshd and dockerd)", "bash", ["test/rig/rig.sh", "up", "2"]);
      step(io, "building the practice engine image (a stand-in for vLLM) on the hosts", "bash", ["test/rig/build-image.sh", "practice-engine:local", "docker-images/practice-engine"]);
      const cluster = loadCluster(CLUSTER);
      const session = await openSession(cluster);
      await removeContainers(session, () => true, 2);
      await runUp(path.join(PACKAGE_ROOT, "recipes", "practice-2x"), { cluster: CLUSTER }, io);
      const head = session.cluster.nodes[0];
      const endpoint = `http://${head?.address ?? head?.host ?? "?"}:${cluster.api_port}/v1`;
      const question = "Say hello to the practice cluster.";
      const res = await fetch(`${endpoint}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "practice", max_tokens: 12, messages: [{ role: "user", content: question }] }),
        signal: AbortSignal.timeout(30_000),
      });
      const body = (await res.json()) as { choices?: { message?: { content?: string } }[] };
      io.out(`\nyou:       ${question}`);
      io.out(`practice:  ${body.choices?.[0]?.message?.content?.trim() ?? JSON.stringify(body)}`);
      io.out(`           (the practice engine is a stand-in for vLLM: its words are deterministic, not a model's)\n`);
      io.out("next, try:");
      io.out(`  export LAUNCHER_CLUSTER=${CLUSTER}`);
      io.out("  npx launcher status");
      io.out("  npx launcher logs practice-2x --tail 20");
      io.out(`  curl -s ${endpoint}/models`);
      io.out(`  curl -sN ${endpoint}/chat/completions -H 'content-type: application/json' -d '{"model":"practice","stream":true,"messages":[{"role":"user","content":"hi"}]}'`);
      io.out("  npx launcher down practice-2x");
      io.out("  npx launcher demo --down      # remove the practice cluster");
    });
}
