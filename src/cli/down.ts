import type { Command } from "commander";
import { EXIT_USER, RemoteError, UserError } from "../config/errors.js";
import { cancelBoot, listBoots, type DaemonTarget } from "../daemon/client.js";
import { decodeError } from "../boot/up-events.js";
import { daemonOption, findDaemon } from "./daemon-target.js";
import { formatRemoval, removedOf, type Removed } from "../nodes/down.js";
import { parseTarget } from "../nodes/labels.js";
import { down, type DownResult } from "../app/down.js";
import { DEFAULTS } from "../contract/defaults.js";
import { openSession } from "../nodes/session.js";
import { loadCluster } from "../app/this-process.js";
import { withStore } from "../app/host.js";
import { parseGraceSeconds } from "./duration.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

/** A removed container as `down --json` prints it: snake_case keys, as every JSON answer. */
export const removedJson = (r: Removed): { readonly node: string; readonly container: string; readonly deployment: string; readonly was_running: boolean } => ({
  node: r.node,
  container: r.container,
  deployment: r.deployment,
  was_running: r.wasRunning,
});

/** `down --json`'s answer: what was removed, the nodes that did not answer, and whether that is all. */
export const downJson = (r: DownResult): { readonly removed: readonly ReturnType<typeof removedJson>[]; readonly unreachable: readonly { readonly node: string; readonly reason: string }[]; readonly complete: boolean } => ({
  removed: removedOf(r.outcomes).map(removedJson),
  unreachable: r.unreachable.map((u) => ({ node: u.node, reason: u.reason })),
  complete: r.unreachable.length === 0,
});

/** `down`'s lines on stdout: a line per container stopped and per node not reached, or that there was nothing to stop. */
export function downText(r: DownResult, target: string | undefined): string[] {
  if (r.outcomes.every((o) => o.kind === "removed" && o.removed.length === 0)) return [`nothing to stop${target === undefined ? "" : ` for ${target}`}`];
  return formatRemoval(r.outcomes, r.again, "per-container");
}

/** Not done: what the unreachable nodes run is unknown, and the labels will still say so (stderr; exit status 1). */
export const unfinishedLine = (r: DownResult): string =>
  `launcher: ${r.unreachable.map((u) => u.node).join(", ")} could not be reached: what runs there was not stopped; once it answers, \`${r.again}\` finishes the job`;

/**
 * Cancels in the daemon what `down` names there: with --all every boot in progress (then the nodes
 * are cleared as usual), else the boot of that deployment, which ends the command (its rollback
 * removed what it started). Whether the command is done.
 */
async function cancelInDaemon(daemon: DaemonTarget, target: string | undefined, all: boolean, json: boolean, io: Output): Promise<boolean> {
  if (all) {
    for (const b of (await listBoots(daemon)).filter((b) => b.running)) {
      const final = await cancelBoot(daemon, b.deployment);
      if (final !== undefined) io.err(`launcher: cancelled the boot of ${b.deployment} in the daemon at ${daemon.url}`);
    }
    return false;
  }
  const parsed = target === undefined ? undefined : parseTarget(target);
  if (parsed === undefined || (parsed.kind !== undefined && parsed.kind !== "deployment")) return false;
  const final = await cancelBoot(daemon, parsed.name);
  if (final === undefined) return false;
  const ended = final.type === "error" ? decodeError(final.error) : undefined;
  const detail = ended instanceof RemoteError ? (ended.detail ?? "") : "";
  if (json) io.json({ cancelled: parsed.name, daemon: daemon.url, outcome: final.type === "error" ? final.error : { ready: true } });
  else {
    io.out(`cancelled the boot of ${parsed.name} in the daemon at ${daemon.url}: ${ended?.message ?? "it had become ready"}`);
    for (const line of detail.split("\n").filter((l) => l.startsWith("rolled back:") || l.startsWith("NOT stopped"))) io.out(line);
  }
  return true;
}

export function registerDown(program: Command, io: Output): void {
  program
    .command("down")
    .description("stop and remove a deployment on every node (SIGTERM, a grace period, then kill)")
    .argument("[target]", "deployment, lane or recipe name (deployment/NAME, lane/NAME, recipe/NAME when a name fits several)")
    .option("--all", "every launcher deployment on the cluster")
    .addOption(clusterOption())
    .option("--grace <duration>", "how long between SIGTERM and kill (10s, 1m; plain seconds too)", DEFAULTS.stopGrace.text)
    .addOption(jsonOption("print what was stopped as JSON")).addOption(outputOption())
    .addOption(daemonOption())
    .action(async (target: string | undefined, opts: { all?: boolean; cluster?: string; grace: string; json?: boolean; daemon?: string }) => {
      if (target === undefined && !opts.all) throw new UserError("say what to stop", "launcher down NAME, or launcher down --all");
      const grace = parseGraceSeconds(opts.grace, "--grace");
      // A boot the daemon runs is cancelled there: its own rollback removes what it started.
      const daemon = findDaemon(opts.daemon);
      if (daemon !== undefined) {
        try {
          if (await cancelInDaemon(daemon, target, opts.all === true, opts.json === true, io)) return;
        } catch (e) {
          // No daemon to ask (gone, refused): what runs on the nodes is still stopped from here.
          if (!(e instanceof UserError)) throw e;
          io.warn(`${e.message}; stopping what runs on the nodes from here`);
        }
      }
      const session = await openSession(loadCluster(opts.cluster));
      const request = { target, all: opts.all === true, graceSeconds: grace, now: () => new Date(), warn: (line: string) => io.warn(line) };
      // One store for the whole command (a store that cannot be opened warns once).
      const result = await down(session, request, (fn) => withStore(fn));
      if (opts.json) io.json(downJson(result));
      else for (const line of downText(result, target)) io.out(line);
      if (result.unreachable.length > 0) {
        io.err(unfinishedLine(result));
        process.exitCode = EXIT_USER;
      }
    });
}
