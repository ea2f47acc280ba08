import { createInterface } from "node:readline";
import { Option, type Command } from "commander";
import { createLogUpdate } from "log-update";
import { colourFor, plain, RANK_STYLE, STATUS_STYLE, type Paint } from "./colour.js";
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

/** The text of `status`: a line per deployment, then its ranks, painted by `paint`. */
export function statusLines(deployments: readonly DeploymentStatus[], paint: Paint = plain): string[] {
  if (deployments.length === 0) return ["no deployments"];
  return deployments.flatMap((d) => [
    `${paint("bold", d.deployment)}  ${paint(STATUS_STYLE[d.status], d.status)}${d.status === "booting" ? ` (${d.phase})` : ""}${d.lane === undefined ? "" : `  lane ${d.lane}`}  recipe ${d.recipe} (${d.recipe_hash})  model ${d.served_model}  ${d.endpoint}/v1  up ${uptime(d.uptime_seconds)}`,
    ...d.ranks.map((r) => `  rank ${r.rank}  ${r.node.padEnd(10)} ${paint(RANK_STYLE[r.state], r.state)}${r.exit_code === undefined ? "" : ` (exit ${r.exit_code})`}  ${r.container}`),
    ...d.missing.map((m) => `  missing: ${m}`),
    ...(d.unreachable.length > 0 ? [`  unreachable: ${d.unreachable.join(", ")} (${d.status === "serving" ? "its head answers /health" : "it cannot be judged"})`] : []),
  ]);
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
    .option("--watch <interval>", "poll again every interval, e.g. 5s (on a terminal: redrawn in place; else appended; with --json: one JSON line per poll; a line on stdin polls at once)")
    // The gateway's watchers: a parent that dies closes their stdin, and that must end them.
    .addOption(new Option("--exit-with-stdin", "end the watch when stdin closes").hideHelp())
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (opts: { cluster?: string; json?: boolean; watch?: string; exitWithStdin?: boolean }) => {
      const session = await openSession(loadCluster(opts.cluster));
      if (opts.watch === undefined) {
        const r = await clusterStatus(session, new Date());
        for (const w of warnings(r)) io.warn(w);
        if (opts.json) io.json(JSON.parse(encodeStatusLine(r)));
        else for (const line of statusLines(r.deployments, colourFor(process.stdout))) io.out(line);
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
      // A line on stdin polls at once. Stdin at its end (</dev/null, nohup, cron) is no reason to
      // stop watching, except for the gateway's watchers: their parent going away ends them. A
      // terminal is not read: a watch run in the background (`&`) would be stopped by SIGTTIN.
      const input = process.stdin.isTTY ? undefined : createInterface({ input: process.stdin });
      // A line that comes during a poll asks for one more right after it: the poll under way may
      // have read the nodes before what the line is about (the daemon's supervisor asks so).
      let asked = false;
      input?.on("line", () => {
        if (wake === undefined) asked = true;
        else wake();
      });
      if (opts.exitWithStdin) input?.on("close", stop);
      // On a terminal the picture is redrawn in place; a pipe or a file gets each poll appended (so
      // does a terminal that reports no size: log-update cuts a frame to the terminal's rows).
      const live = !opts.json && process.stdout.isTTY === true && (process.stdout.rows ?? 0) > 0 ? createLogUpdate(process.stdout) : undefined;
      const paint = colourFor(process.stdout);
      let said = new Set<string>();
      try {
        while (!stopped) {
          // A node that cannot be read is reported in the line and the watch goes on.
          const r = await clusterStatus(session, new Date());
          const now = warnings(r);
          if (opts.json) process.stdout.write(`${encodeStatusLine(r)}\n`);
          else if (live !== undefined) live([`${paint("dim", `every ${opts.watch}, at ${r.at} (Ctrl-C ends)`)}`, ...statusLines(r.deployments, paint), ...now.map((w) => `${paint("yellow", "warning:")} ${w}`)].join("\n"));
          else for (const line of [`--- ${r.at}`, ...statusLines(r.deployments)]) io.out(line);
          // Appended output says each warning once, until it changes; the live picture shows them all.
          if (live === undefined) for (const w of now) if (!said.has(w)) io.err(`warning: ${w}`);
          said = new Set(now);
          if (stopped) break;
          if (asked) {
            asked = false;
            continue;
          }
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
        live?.done();
        input?.close();
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    });
}
