import { createInterface } from "node:readline";
import { Option, type Command } from "commander";
import { colourFor, plain, RANK_STYLE, STATUS_STYLE, type Paint } from "../app/colour.js";
import { EXIT_USER, UserError } from "../config/errors.js";
import { encodeStatusLine, type DeploymentStatus } from "../contract/deployment.js";
import { clusterStatus, currentWedges } from "../nodes/status.js";
import { openSession } from "../nodes/session.js";
import { parseDuration } from "../config/duration.js";
import { loadCluster } from "../app/this-process.js";
import { withStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";
import { daemonOption, findDaemon } from "./daemon-target.js";
import { listBoots, type DaemonTarget } from "../daemon/client.js";
import type { BootSummary } from "../daemon/protocol.js";
import { describeSample } from "../memory/memory-watch.js";
import { WATCHED_FRESH_MS } from "../supervise/ready-guard.js";
import type { NodeOutageRecord, StoredWedge, WatchedMemory } from "../store/store.js";
import { outageCauseWords, outageWords } from "../contract/outage.js";
import { currentNodeGuardTrips, GUARD_TRIPS_OF_CLUSTER, nodeGuardTripWords, type NodeGuardTripRecord } from "../contract/node-guard-trip.js";
import { ranText } from "../nodes/outage.js";


const uptime = (s: number | undefined): string =>
  s === undefined ? "-" : s >= 3600 ? `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;

/** Written by a guard that still watches: it writes every WATCHED_WRITE_MS. */
const fresh = (w: WatchedMemory, now: Date): boolean => now.getTime() - Date.parse(w.at) <= WATCHED_FRESH_MS;

/**
 * A node's memory as the daemon's guard last wrote it for this deployment (src/supervise/ready-guard.ts),
 * or "" when it is not watched there now (no daemon, another deployment's watch, a stale sample).
 */
export function watchedText(watched: ReadonlyMap<string, WatchedMemory>, deployment: string, node: string, now: Date): string {
  const w = watched.get(node);
  if (w === undefined || w.deployment !== deployment || !fresh(w, now)) return "";
  return `  ${describeSample(w.sample)}`;
}

/**
 * The text of `status`: a line per deployment, then its ranks, painted by `paint`. A running rank
 * shows its node's memory where the daemon's guard watches it (`watched`, read from the store).
 */
export function statusLines(deployments: readonly DeploymentStatus[], paint: Paint = plain, watched: ReadonlyMap<string, WatchedMemory> = new Map(), now = new Date(), wedges: ReadonlyMap<string, StoredWedge> = new Map(), guardTrips: readonly NodeGuardTripRecord[] = []): string[] {
  if (deployments.length === 0) return ["no deployments"];
  const wedged = currentWedges(deployments, wedges);
  const tripped = currentNodeGuardTrips(deployments, guardTrips);
  return deployments.flatMap((d) => [
    `${paint("bold", d.deployment)}  ${paint(STATUS_STYLE[d.status], d.status)}${d.status === "booting" ? ` (${d.phase})` : ""}${d.lane === undefined ? "" : `  lane ${d.lane}`}  recipe ${d.recipe} (${d.recipe_hash})  model ${d.served_model}  ${d.endpoint}/v1  up ${uptime(d.uptime_seconds)}`,
    ...d.ranks.map((r) => `  rank ${r.rank}  ${r.node.padEnd(10)} ${paint(RANK_STYLE[r.state], r.state)}${r.exit_code === undefined ? "" : ` (exit ${r.exit_code})`}  ${r.container}${r.state === "running" ? watchedText(watched, d.deployment, r.node, now) : ""}`),
    ...d.missing.map((m) => `  missing: ${m}`),
    ...(d.fault === undefined ? [] : [`  fault: ${d.fault} (its head's log; the engine no longer answers /health)`]),
    ...(d.unreachable.length > 0 ? [`  unreachable: ${d.unreachable.join(", ")} (${d.status === "serving" ? "its head answers /health" : "it cannot be judged"})`] : []),
    // The daemon's generation watch found it wedged (src/supervise/generation-watch.ts), in this launch.
    ...wedgeLines(wedged.get(d.deployment), paint),
    // A node's own guard killed this launch (the daemon read its report): why its ranks ended.
    ...guardTripLines(tripped.get(d.deployment), paint),
  ]);
}

const guardTripLines = (t: NodeGuardTripRecord | undefined, paint: Paint): string[] => (t === undefined ? [] : [`  ${paint("red", "killed")}: ${nodeGuardTripWords(t)} (read by the daemon at ${t.read_at})`]);

/** The nodes' own guards' trips the daemon recorded on a cluster (none without a daemon). */
const storedGuardTrips = (cluster: string, io: Output): Promise<NodeGuardTripRecord[]> => withStore((store) => store.nodeGuardTrips(cluster, undefined, GUARD_TRIPS_OF_CLUSTER), (l) => io.warn(l));

const wedgeLines = (w: StoredWedge | undefined, paint: Paint): string[] => (w === undefined ? [] : [`  ${paint("red", "wedged")}: ${w.message} (found by the daemon at ${w.at})`]);

/** Each deployment's wedge as the daemon last recorded it (none without a daemon watching). */
const storedWedges = (cluster: string, io: Output): Promise<Map<string, StoredWedge>> => withStore((store) => store.wedges(cluster), (l) => io.warn(l));

/** How long after a node's outage ended status still says it answers again. */
export const BACK_SHOWN_MS = 10 * 60_000;

/**
 * The node outages the daemon recorded (src/nodes/outage.ts) that speak of now: each node's newest
 * one, while it lasts and the node is still unreachable, or when it ended within BACK_SHOWN_MS and
 * the node answers. An open record of a node that answers now (its daemon stopped before it came
 * back) and older ones are history's.
 */
export function currentOutages(records: readonly NodeOutageRecord[], unreachable: readonly string[], now: Date): { readonly out: NodeOutageRecord[]; readonly back: NodeOutageRecord[] } {
  const newest = new Map<string, NodeOutageRecord>();
  for (const r of records) if (!newest.has(r.node) || (newest.get(r.node) as NodeOutageRecord).since < r.since) newest.set(r.node, r);
  const all = [...newest.values()].sort((a, b) => a.node.localeCompare(b.node));
  return {
    out: all.filter((r) => r.ended_at === undefined && unreachable.includes(r.node)),
    back: all.filter((r) => r.ended_at !== undefined && !unreachable.includes(r.node) && now.getTime() - Date.parse(r.ended_at) <= BACK_SHOWN_MS),
  };
}

/** The lines of `status` for node outages: the nodes out now, then the ones back. */
export function outageLines(records: readonly NodeOutageRecord[], unreachable: readonly string[], now: Date, paint: Paint = plain): string[] {
  const { out, back } = currentOutages(records, unreachable, now);
  return [
    ...out.map((o) => `node ${paint("red", o.kind)}: ${outageWords(o)}; it ran ${ranText(o.deployments)}`),
    ...back.map((o) => `node ${o.node} answers again since ${o.ended_at ?? "?"} (${o.kind} for ${Math.round((Date.parse(o.ended_at ?? "") - Date.parse(o.since)) / 1000)} s from ${o.since}); what runs there was read again${o.cause === undefined ? "" : `; ${outageCauseWords(o.cause, o.kind)}`}`),
  ];
}

/** `status --json`'s node_outages: the same records, keys snake_case. */
export const outagesJson = (records: readonly NodeOutageRecord[], unreachable: readonly string[], now: Date): object[] => {
  const { out, back } = currentOutages(records, unreachable, now);
  return [...out, ...back].map((o) => ({
    node: o.node,
    kind: o.kind,
    since: o.since,
    ...(o.ended_at === undefined ? {} : { ended_at: o.ended_at }),
    deployments: o.deployments,
    ...(o.memory === undefined ? {} : { memory: { available_kib: o.memory.availableKiB, total_kib: o.memory.totalKiB, at: o.memory.at } }),
    ...(o.cause === undefined ? {} : { cause: o.cause }),
  }));
};

/** Enough of each cluster's newest outages for every node's newest one. */
const OUTAGES_READ = 200;
const storedOutages = (cluster: string, io: Output): Promise<NodeOutageRecord[]> => withStore((store) => store.outages(cluster, OUTAGES_READ), (l) => io.warn(l));

/** What status says of a daemon: the boots it holds, or why it could not be asked. */
export type DaemonView = { readonly url: string; readonly boots: readonly BootSummary[] } | { readonly url: string; readonly error: string };

/** How long status waits for a daemon's answer: one that does not answer is a warning, not a hang. */
const DAEMON_WAIT_MS = 5000;

/** Asks the daemon for its boots; never throws (a daemon that cannot be reached does not stop `status`). */
export async function askDaemon(target: DaemonTarget, waitMs = DAEMON_WAIT_MS): Promise<DaemonView> {
  try {
    return { url: target.url, boots: await listBoots(target, AbortSignal.timeout(waitMs)) };
  } catch (e) {
    const why = e instanceof UserError ? e.message : (e as Error).name === "TimeoutError" ? `the daemon at ${target.url} did not answer within ${waitMs / 1000} s` : `the daemon at ${target.url} could not be asked: ${(e as Error).message}`;
    return { url: target.url, error: why };
  }
}

/** The daemon's boots in progress, below the deployments the containers show (a boot shows there too, from its labels, once it started one). */
export function daemonBootLines(view: DaemonView, now: Date, paint: Paint = plain): string[] {
  if ("error" in view) return [];
  const running = view.boots.filter((b) => b.state === "booting");
  const finished = view.boots.length - running.length;
  return [
    running.length === 0 ? `no boot in progress in the daemon at ${view.url}` : `boots in progress in the daemon at ${view.url}:`,
    ...running.map((b) => {
      const nodes = Object.entries(b.nodes).map(([n, phase]) => `${n} ${phase}`);
      const since = Math.max(0, Math.round((now.getTime() - Date.parse(b.started_at)) / 1000));
      return `  ${paint("bold", b.deployment)}  ${paint(STATUS_STYLE.booting, b.state)}  cluster ${b.cluster}${b.lane === undefined ? "" : `  lane ${b.lane}`}  for ${uptime(since)}  ${nodes.length === 0 ? "no node started yet" : nodes.join(", ")}`;
    }),
    ...(finished === 0 ? [] : [`  and ${finished} finished boot${finished === 1 ? "" : "s"} (launcher attach NAME shows how one ended)`]),
  ];
}

/** The warning for a daemon that could not be asked: what the containers show is still the answer. */
const daemonWarning = (view: DaemonView | undefined): string[] => (view === undefined || !("error" in view) ? [] : [`${view.error}; its boots in progress are not shown (the containers' are)`]);

/** Warnings go to stderr in every mode (a watch says each one once, until it changes). */
function warnings(r: Awaited<ReturnType<typeof clusterStatus>>): string[] {
  return [...r.problems, ...[...r.reasons].map(([n, why]) => `${n} could not be read (${why}); what runs there is unknown (its ranks show as unreachable)`)];
}

/** Each node's memory as the daemon's guard last wrote it (none without a daemon watching). */
const watchedMemory = (cluster: string, io: Output): Promise<Map<string, WatchedMemory>> => withStore((store) => store.watchedMemory(cluster), (l) => io.warn(l));

export function registerStatus(program: Command, io: Output): void {
  program
    .command("status")
    .alias("ps")
    .description("every deployment found on the nodes, from the containers' labels; and the boots in progress in a daemon, when one is found as up finds it")
    .addOption(clusterOption())
    .option("--watch <interval>", "poll again every interval, e.g. 5s (on a terminal: redrawn in place; else appended; with --json: one JSON line per poll; a line on stdin polls at once)")
    // The gateway's watchers: a parent that dies closes their stdin, and that must end them.
    .addOption(new Option("--exit-with-stdin", "end the watch when stdin closes").hideHelp())
    .addOption(daemonOption())
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (opts: { cluster?: string; json?: boolean; watch?: string; exitWithStdin?: boolean; daemon?: string }) => {
      const session = await openSession(loadCluster(opts.cluster));
      if (opts.watch === undefined) {
        // The daemon found as `up` finds it, asked while the nodes are read. Not in a watch: the
        // daemon's own discovery is one, and asking itself would be a loop.
        const daemon = findDaemon(opts.daemon);
        const asked = daemon === undefined ? undefined : askDaemon(daemon);
        const r = await clusterStatus(session, new Date());
        const view = await asked;
        for (const w of [...warnings(r), ...daemonWarning(view)]) io.warn(w);
        if (opts.json) {
          const now = new Date();
          const watched = [...(await watchedMemory(session.cluster.name, io))].filter(([, w]) => fresh(w, now));
          const wedged = currentWedges(r.deployments, await storedWedges(session.cluster.name, io));
          const outages = outagesJson(await storedOutages(session.cluster.name, io), r.unreachable, now);
          const tripped = currentNodeGuardTrips(r.deployments, await storedGuardTrips(session.cluster.name, io));
          io.json({ ...(JSON.parse(encodeStatusLine(r)) as object), node_outages: outages, node_guard: Object.fromEntries(tripped), daemon: view ?? null, memory: Object.fromEntries(watched.map(([node, w]) => [node, { deployment: w.deployment, available_kib: w.sample.availableKiB, total_kib: w.sample.totalKiB, at: w.at }])), wedged: Object.fromEntries([...wedged].map(([name, w]) => [name, { since: w.since, message: w.message, at: w.at }])) });
        }
        else {
          const watched = await watchedMemory(session.cluster.name, io);
          const outages = outageLines(await storedOutages(session.cluster.name, io), r.unreachable, new Date(), colourFor(process.stdout));
          for (const line of [...statusLines(r.deployments, colourFor(process.stdout), watched, new Date(), await storedWedges(session.cluster.name, io), await storedGuardTrips(session.cluster.name, io)), ...outages, ...(view === undefined ? [] : daemonBootLines(view, new Date(), colourFor(process.stdout)))]) io.out(line);
        }
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
      // The daemon's watchers share its process group, so a closed terminal's SIGHUP reaches them
      // too (bash sends it to the whole job); the daemon goes on, and so do they: their end is stdin's.
      const hangUp = (): void => undefined;
      if (opts.exitWithStdin) process.on("SIGHUP", hangUp);
      // On a terminal the picture is redrawn in place; a pipe or a file gets each poll appended (so
      // does a terminal that reports no size: log-update cuts a frame to the terminal's rows).
      const live = !opts.json && process.stdout.isTTY === true && (process.stdout.rows ?? 0) > 0 ? (await import("log-update")).createLogUpdate(process.stdout) : undefined;
      const paint = colourFor(process.stdout);
      let said = new Set<string>();
      try {
        while (!stopped) {
          // A node that cannot be read is reported in the line and the watch goes on.
          const r = await clusterStatus(session, new Date());
          const now = warnings(r);
          if (opts.json) process.stdout.write(`${encodeStatusLine(r)}\n`);
          else if (live !== undefined) live([`${paint("dim", `every ${opts.watch}, at ${r.at} (Ctrl-C ends)`)}`, ...statusLines(r.deployments, paint, await watchedMemory(session.cluster.name, io)), ...now.map((w) => `${paint("yellow", "warning:")} ${w}`)].join("\n"));
          else for (const line of [`--- ${r.at}`, ...statusLines(r.deployments, plain, await watchedMemory(session.cluster.name, io))]) io.out(line);
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
        process.off("SIGHUP", hangUp);
      }
    });
}
