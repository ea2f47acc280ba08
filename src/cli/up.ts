import path from "node:path";
import type { Command } from "commander";
import { Interrupted } from "../config/abort.js";
import type { UpEvent } from "../boot/up-events.js";
import { upUseCase } from "../app/up-use-case.js";
import type { UpOutcome } from "../boot/up-events.js";
import { formatTrace, runTraced, Trace, type TraceRecord } from "../remote/trace.js";
import { RemoteError, UserError } from "../config/errors.js";
import { RUN_A_DAEMON, submitBoot, type DaemonTarget } from "../daemon/client.js";
import type { UpSubmission } from "../app/up-submission.js";
import { acceptedEvent, prepareUp, upHost } from "../app/prepare-up.js";
import { BootView, watchBoot } from "./boot-view.js";
import { daemonOption, findDaemon } from "./daemon-target.js";
import { withInterrupts } from "./interrupts.js";
import { findCluster, localRecipeLookups, readClusterFile } from "../app/this-process.js";
import { processEnvironment } from "../app/environment.js";
import type { RecipeLookup } from "../recipe/uploaded-source.js";
import type { Output } from "../app/output.js";
import type { PlanFlags } from "../app/plan-flags.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";
import { DEFAULTS } from "../contract/defaults.js";

export interface UpFlags extends PlanFlags {
  timeout?: string;
  drain?: string;
  push?: boolean;
  dropCaches?: boolean;
  json?: boolean;
  detach?: boolean;
  daemon?: string;
  restart?: string;
  trace?: boolean;
}

const submissionOf = (ref: string, f: UpFlags): UpSubmission => ({
  ref,
  ...(f.cluster === undefined ? {} : { cluster: f.cluster }),
  ...(f.lane === undefined ? {} : { lane: f.lane }),
  ...(f.name === undefined ? {} : { name: f.name }),
  ...(f.nodes === undefined ? {} : { nodes: f.nodes }),
  ...(f.port === undefined ? {} : { port: f.port }),
  ...(f.timeout === undefined ? {} : { timeout: f.timeout }),
  ...(f.drain === undefined ? {} : { drain: f.drain }),
  ...(f.push === false ? { push: false } : {}),
  ...(f.dropCaches === true ? { drop_caches: true } : {}),
  ...(f.restart === undefined ? {} : { restart: f.restart }),
});

/** The files of this machine a submission may carry: a recipe's chain, a named cluster file (undefined: none here). */
export interface LocalFiles {
  recipes(ref: string): RecipeLookup[];
  cluster(option: string): { file: string; text: string } | undefined;
  /** The absolute path of the cluster file `--cluster option` reads here (undefined: none here). */
  clusterPath(option: string): string | undefined;
}

const thisMachine: LocalFiles = {
  recipes: localRecipeLookups,
  cluster: (option) => (findCluster(option).found ? readClusterFile(option) : undefined),
  clusterPath: (option) => {
    const choice = findCluster(option);
    return choice.found ? path.resolve(choice.file) : undefined;
  },
};

/**
 * What the daemon is sent: the flags, and the files this machine reads for them. The daemon may run
 * on another machine (a Spark, a home server) that cannot read this one's recipe folder, so the
 * recipe and its `extends` parents go with the submission (and the cluster file, when --cluster
 * names one here); a name this machine does not know goes as it is, for the daemon's own folders.
 * Through this user's own socket the daemon is this user on this machine: --cluster goes as the
 * path this command would read (absolute: the daemon runs in another folder), or as given.
 */
export function forTheDaemon(s: UpSubmission, target: Pick<DaemonTarget, "socket">, here: LocalFiles = thisMachine): UpSubmission {
  const recipes = here.recipes(s.ref);
  const withRecipes = { ...s, ...(recipes.length === 0 ? {} : { recipes }) };
  if (target.socket !== undefined) return s.cluster === undefined ? withRecipes : { ...withRecipes, cluster: here.clusterPath(s.cluster) ?? s.cluster };
  const cluster = s.cluster === undefined ? undefined : here.cluster(s.cluster);
  if (cluster === undefined) return withRecipes;
  // The file goes in place of its name: a name sent is one of the daemon's own clusters.
  const { cluster: _named, ...rest } = withRecipes;
  return { ...rest, cluster_file: cluster };
}

export async function runUp(ref: string, flags: UpFlags, io: Output): Promise<void> {
  const submission = submissionOf(ref, flags);
  const daemon = findDaemon(flags.daemon);
  if (daemon !== undefined) {
    // Through the daemon: a signal, a closed terminal or a lost connection only detaches.
    if (flags.trace === true) throw new UserError("up --trace traces a boot run by this process, and this one would run in the daemon", "pass --daemon none to run it here with its trace");
    const sent = forTheDaemon(submission, daemon);
    await watchBoot(daemon, io, flags.json === true, flags.detach === true, (onEvent, signal) => submitBoot(daemon, sent, onEvent, signal));
    return;
  }
  if (flags.detach) throw new UserError("up --detach needs a daemon to run the boot: none is configured or running here", RUN_A_DAEMON);
  // From the first instant: a signal at any step (detection, locks, push, preflight, starts,
  // watch, swap) is heard, ends the command with 130/143/129 and rolls back what it started.
  const trace = flags.trace === true ? new Trace(() => performance.now()) : undefined;
  await withInterrupts((signal) => upHere(submission, flags.json === true, io, signal, trace));
}

/**
 * Said once a boot run here is ready: its memory guard ends with this process, and only the
 * daemon's guard (src/supervise/ready-guard.ts) watches a serving deployment until `down`.
 */
export const GUARD_STOPS_AT_READY = (deployment: string): string =>
  `launcher: the memory guard stopped watching ${deployment} at ready (this up runs without a daemon); \`launcher serve\` watching this cluster keeps guarding its memory until down`;

/** The boot in this process: it lives and dies with it (a signal rolls it back). */
async function upHere(submission: UpSubmission, json: boolean, io: Output, signal: AbortSignal, trace?: Trace): Promise<void> {
  // Where this user's clusters, recipes and store are: one environment for all of it.
  const env = processEnvironment();
  const prepared = prepareUp(submission, io, { env });
  const view = new BootView(io, process.stderr);
  const emit = (e: UpEvent): void => view.show(e);
  emit(acceptedEvent(prepared));
  const store = env.openStore(env.console.err);
  try {
    const run = (): Promise<UpOutcome> => upUseCase(prepared.request, prepared.cluster, prepared.first, upHost(prepared, store, emit, signal));
    const outcome = trace === undefined ? await run() : await runTraced(trace, run);
    if (outcome.status === "ready") emit({ type: "say", text: GUARD_STOPS_AT_READY(outcome.deployment), t: Date.now() });
    emit({ type: "result", outcome, t: Date.now() });
  } catch (e) {
    // Said where it matters: this boot died with its terminal, and a daemon would have kept it.
    const hint = `a boot run by a daemon outlives the terminal: ${RUN_A_DAEMON}`;
    if (e instanceof Interrupted) throw new Interrupted(e.signalName, e.what, hint);
    // Interrupted mid-boot, the rollback's report (a RemoteError) says what was removed.
    if (e instanceof RemoteError && signal.aborted) throw new RemoteError(e.node, e.message, e.detail, hint);
    throw e;
  } finally {
    view.close();
    store.close();
    if (trace !== undefined) showTrace(ownTrace(trace), json);
  }
  view.finish(json);
}

/** The trace with this process's own share: its age when the trace began (the trace's clock is performance.now(), ms since the process started) and its CPU time. */
function ownTrace(trace: Trace): TraceRecord {
  const cpu = process.cpuUsage();
  return { ...trace.record(), process_ms: Math.round(trace.origin), cpu_ms: Math.round((cpu.user + cpu.system) / 1000) };
}

/** The trace on stderr, after the boot's own lines: a table, or with --json one JSON line ({"trace": ...}). */
function showTrace(record: TraceRecord, json: boolean): void {
  process.stderr.write(json ? `${JSON.stringify({ trace: record })}\n` : `${formatTrace(record).join("\n")}\n`);
}

export function registerUp(program: Command, io: Output): void {
  program
    .command("up")
    .description("launch a recipe on the cluster; wait until it serves; roll everything back on any failure")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--lane <name>", "serving lane: a stable model name; swaps out what the lane served before")
    .option("--name <deployment>", "deployment name (default: the recipe name)")
    .option("--nodes <names>", "comma-separated nodes to use, head first (default: the first ones; in a lane, the first free ones)")
    .option("--port <port>", "API port on the head")
    .option("--timeout <duration>", "give up (and roll back) after this long", DEFAULTS.upTimeout.text)
    .option("--drain <duration>", "in a lane swap, how long the old deployment may finish running requests", DEFAULTS.drain.text)
    .option("--restart <policy>", "on-failure[:N]: launcher serve recreates the whole group when it fails after it was ready (at most N times)")
    .option("--no-push", "fail instead of sending the image to nodes that lack it or hold another build")
    .option("--drop-caches", "free the page cache on the nodes before the memory fit check (as root or with sudo without a password)")
    .option("--detach", "through a daemon: return once the boot is accepted, printing the deployment's name")
    .option("--trace", "print a timed trace of this up on stderr (each phase, check and SSH round trip; one JSON line with --json)")
    .addOption(daemonOption())
    .addOption(jsonOption("print the result as JSON")).addOption(outputOption())
    .action((ref: string, opts: UpFlags) => runUp(ref, opts, io));
}
