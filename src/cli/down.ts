import type { Command } from "commander";
import { EXIT_USER, RemoteError, UserError } from "../config/errors.js";
import { cancelBoot, listBoots, stopDeployment, type DaemonTarget } from "../daemon/client.js";
import { decodeError, decodeEvent, type UpEvent } from "../boot/up-events.js";
import { MAX_STOP_GRACE_SECONDS, type StopAnswer, type StopRequest } from "../contract/control-api.js";
import { outcomeOf } from "../daemon/stop.js";
import { daemonOption, findDaemon } from "./daemon-target.js";
import { formatRemoval, removedOf, unreachableOf, type Removed } from "../nodes/down.js";
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

/** A boot of `name` the daemon cancelled (its rollback ran), said as `down` says it; `more`: the rest of a stop's answer, for --json. */
function sayCancelled(name: string, daemon: DaemonTarget, final: UpEvent, json: boolean, io: Output, more: object = {}): void {
  const ended = final.type === "error" ? decodeError(final.error) : undefined;
  const detail = ended instanceof RemoteError ? (ended.detail ?? "") : "";
  if (json) io.json({ cancelled: name, daemon: daemon.url, outcome: final.type === "error" ? final.error : { ready: true }, ...more });
  else {
    io.out(`cancelled the boot of ${name} in the daemon at ${daemon.url}: ${ended?.message ?? "it had become ready"}`);
    for (const line of detail.split("\n").filter((l) => l.startsWith("rolled back:") || l.startsWith("NOT stopped"))) io.out(line);
  }
}

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
  sayCancelled(parsed.name, daemon, final, json, io);
  return true;
}

/** What a stop that cancelled a boot says after the cancel: the containers its down removed and the nodes it did not reach; none when there was nothing more. */
export function afterCancelLines(result: DownResult): string[] {
  const removedMore = result.outcomes.some((o) => o.kind === "removed" && o.removed.length > 0);
  return removedMore || result.unreachable.length > 0 ? formatRemoval(result.outcomes, result.again, "per-container") : [];
}

/** down's result as the daemon's stop answered it: printed as a stop run here prints it. */
export function resultOfStop(answer: StopAnswer, target: string): DownResult {
  const outcomes = answer.nodes.map(outcomeOf);
  return { chosen: new Set(answer.deployments), outcomes, stopped: answer.stopped ? [answer.deployment] : [], unreachable: unreachableOf(outcomes), again: answer.again ?? `launcher down ${target}` };
}

/** What a stop asks the daemon: the target, when it names a deployment (bare or deployment/NAME); undefined: not a daemon's stop. */
export function stopRequestOf(target: string, graceSeconds: number, cluster: string | undefined): { name: string; request: StopRequest } | undefined {
  const parsed = parseTarget(target);
  if (parsed.kind !== undefined && parsed.kind !== "deployment") return undefined;
  return { name: parsed.name, request: { grace_seconds: graceSeconds, ...(parsed.kind === undefined ? { bare: true } : {}), ...(cluster === undefined ? {} : { cluster }) } };
}

/**
 * `down TARGET` through the daemon's stop (the page's too), when the daemon sees that deployment:
 * a boot of it there is cancelled, else it is stopped on its nodes. Whether the command is done;
 * down's own refusal there (a name that fits several deployments) is thrown as here.
 */
async function stopInDaemon(daemon: DaemonTarget, target: string, graceSeconds: number, cluster: string | undefined, json: boolean, io: Output): Promise<boolean> {
  const asked = stopRequestOf(target, graceSeconds, cluster);
  // A lane or recipe: the boot cancel by name, then the nodes from here, as before.
  if (asked === undefined) return cancelInDaemon(daemon, target, false, json, io);
  const stopped = await stopDeployment(daemon, asked.name, asked.request);
  // Not seen there (or a daemon without the stop route): a boot of it cancelled there, else the nodes from here.
  if (stopped.kind === "unseen") return cancelInDaemon(daemon, target, false, json, io);
  if (stopped.kind === "refused") throw new DaemonRefusal(stopped.error);
  const { answer } = stopped;
  const final = answer.cancelled === undefined ? undefined : decodeEvent(JSON.stringify(answer.cancelled.event));
  const result = resultOfStop(answer, target);
  if (final === undefined) {
    render(result, target, json, io);
    return true;
  }
  // The boot was cancelled, then its nodes stopped: what that stop removed, and a node it did not
  // reach, are said too (a node not reached is never left for "cancelled" to cover).
  sayCancelled(asked.name, daemon, final, json, io, downJson(result));
  if (!json) for (const line of afterCancelLines(result)) io.out(line);
  if (result.unreachable.length > 0) {
    io.err(unfinishedLine(result));
    process.exitCode = EXIT_USER;
  }
  return true;
}

/** Down's own refusal in the daemon: said as here, never taken for a daemon out of reach. */
class DaemonRefusal extends Error {
  constructor(readonly error: UserError) {
    super(error.message);
  }
}

/** A stop's result on stdout (and, unfinished, stderr with exit status 1). */
function render(result: DownResult, target: string | undefined, json: boolean, io: Output): void {
  if (json) io.json(downJson(result));
  else for (const line of downText(result, target)) io.out(line);
  if (result.unreachable.length > 0) {
    io.err(unfinishedLine(result));
    process.exitCode = EXIT_USER;
  }
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
      if (grace > MAX_STOP_GRACE_SECONDS) throw new UserError(`--grace ${opts.grace} is longer than ${MAX_STOP_GRACE_SECONDS / 60} minutes`, "a container that has not stopped by then will not: give a shorter --grace");
      // A boot the daemon runs is cancelled there; a deployment it sees is stopped there (as the page stops it).
      const daemon = findDaemon(opts.daemon);
      if (daemon !== undefined) {
        const cluster = target === undefined || opts.all === true || opts.cluster === undefined ? undefined : loadCluster(opts.cluster).name;
        try {
          const done = opts.all === true || target === undefined ? await cancelInDaemon(daemon, target, true, opts.json === true, io) : await stopInDaemon(daemon, target, grace, cluster, opts.json === true, io);
          if (done) return;
        } catch (e) {
          if (e instanceof DaemonRefusal) throw e.error;
          // No daemon to ask (gone, refused): what runs on the nodes is still stopped from here.
          if (!(e instanceof UserError)) throw e;
          io.warn(`${e.message}; stopping what runs on the nodes from here`);
        }
      }
      const session = await openSession(loadCluster(opts.cluster));
      const request = { target, all: opts.all === true, graceSeconds: grace, now: () => new Date(), warn: (line: string) => io.warn(line) };
      // One store for the whole command (a store that cannot be opened warns once).
      render(await down(session, request, (fn) => withStore(fn)), target, opts.json === true, io);
    });
}
