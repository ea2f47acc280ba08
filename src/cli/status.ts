import { createInterface } from "node:readline";
import type { Command } from "commander";
import { EXIT_USER } from "../config/errors.js";
import { encodeStatusLine, type DeploymentStatus } from "../deploy/contract.js";
import { clusterStatus } from "../deploy/status.js";
import { openSession } from "../deploy/session.js";
import { parseDuration } from "./duration.js";
import { loadCluster } from "./load.js";
import type { Output } from "./output.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

const uptime = (s: number | undefined): string =>
  s === undefined ? "-" : s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;

function printText(io: Output, deployments: readonly DeploymentStatus[]): void {
  if (deployments.length === 0) io.out("no deployments");
  for (const d of deployments) {
    io.out(`${d.deployment}  ${d.status}${d.status === "booting" ? ` (${d.phase})` : ""}${d.lane === undefined ? "" : `  lane ${d.lane}`}  recipe ${d.recipe} (${d.recipe_hash})  model ${d.served_model}  ${d.endpoint}/v1  up ${uptime(d.uptime_seconds)}`);
    for (const r of d.ranks) io.out(`  rank ${r.rank}  ${r.node.padEnd(10)} ${r.state}${r.exit_code === undefined ? "" : ` (exit ${r.exit_code})`}  ${r.container}`);
    for (const m of d.missing) io.out(`  missing: ${m}`);
    if (d.unreachable.length > 0) io.out(`  unreachable: ${d.unreachable.join(", ")} (${d.status === "serving" ? "its head answers /health" : "it cannot be judged"})`);
  }
}

/** Warnings go to stderr in every mode (a watch says each one once, until it changes). */
function warnings(r: Awaited<ReturnType<typeof clusterStatus>>): string[] {
  return [...r.problems, ...[...r.reasons].map(([n, why]) => `${n} could not be read (${why}); what runs there is unknown (its ranks show as unreachable)`)];
}

export function registerStatus(program: Command, io: Output): void {
  program
    .command("status")
    .alias("ps")
    .description("every deployment found on the nodes, from the containers' labels")
    .addOption(clusterOption())
    .option("--watch <interval>", "poll again every interval (with --json: one JSON line per poll; a line on stdin polls at once)")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (opts: { cluster?: string; json?: boolean; watch?: string }) => {
      const session = await openSession(loadCluster(opts.cluster));
      if (opts.watch === undefined) {
        const r = await clusterStatus(session, new Date());
        for (const w of warnings(r)) io.warn(w);
        if (opts.json) io.json(JSON.parse(encodeStatusLine(r)));
        else printText(io, r.deployments);
        // The answer is incomplete: scripts must not take it for the whole truth.
        if (r.unreachable.length > 0) process.exitCode = EXIT_USER;
        return;
      }
      const intervalMs = parseDuration(opts.watch, "--watch");
      let stopped = false;
      let wake: (() => void) | undefined;
      const stop = (): void => {
        stopped = true;
        wake?.();
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      // A reader that goes away (the gateway that started this) ends the watch.
      const input = createInterface({ input: process.stdin });
      input.on("line", () => wake?.());
      input.on("close", () => {
        if (!process.stdin.isTTY) stop();
      });
      let said = new Set<string>();
      try {
        while (!stopped) {
          // A node that cannot be read is reported in the line and the watch goes on.
          const r = await clusterStatus(session, new Date());
          if (opts.json) process.stdout.write(`${encodeStatusLine(r)}\n`);
          else {
            io.out(`--- ${r.at}`);
            printText(io, r.deployments);
          }
          const now = warnings(r);
          for (const w of now) if (!said.has(w)) io.err(`warning: ${w}`);
          said = new Set(now);
          if (stopped) break;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, intervalMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
        }
      } finally {
        input.close();
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    });
}
