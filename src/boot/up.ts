import { setTimeout as delay } from "node:timers/promises";
import { RemoteError } from "../config/errors.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, timeMs, type BootState } from "../engine/boot-log.js";
import { failureHint, warningNote } from "./explain.js";
import { adapterOf } from "../engine/registry.js";
import type { EngineAdapter } from "../engine/adapter.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import { headOf, startSteps, type NodeSpec, type Plan } from "../plan/plan.js";
import { dropCaches, imageUnsettled, preflight, readPlanNodes, sameNameOnCluster, type NodeReading, type PendingReadings } from "./preflight.js";
import { abortable, checkInterrupted, Detached, interruption } from "../config/abort.js";
import { createdBy, newBootId, stampBoot } from "./boot.js";
import { culprit, nodeAddresses, ownCause, peerNamed, timeoutBlame } from "./blame.js";
import type { Progress } from "../nodes/progress.js";
import { redactText } from "../config/redact.js";
import { checkReady, ReadyRetry } from "./readiness.js";
import { dockerOf, type ClusterSession } from "../nodes/session.js";
import type { Docker } from "../remote/docker.js";
import { formatRemoval, removeContainers } from "../nodes/down.js";
import { DEPLOYMENT_LABEL, LABELS } from "../contract/deployment.js";
import { ensureImage } from "../transfer/images.js";
import { fitText, type FitReport } from "../memory/fit.js";
import { startGuard, type Guard } from "../memory/guard.js";
import { nodeGuardTrip, startNodeGuard } from "../memory/node-guard-shell.js";
import { nodeFloorGiB, type Trip } from "../memory/memory-watch.js";
import { clusterRoutes } from "../transfer/route.js";
import { traced, traceMark } from "../remote/trace.js";
import { awaitedPorts, awaitPorts, probePort, type PortAwaited } from "./port-wait.js";
import { UnreachableError } from "../remote/transport.js";
import type { ArgsJudge } from "../nodes/image-check.js";

export interface UpOptions {
  readonly timeoutMs: number;
  /** Aborts the boot (Ctrl-C, SIGTERM): everything started is removed. */
  readonly signal: AbortSignal;
  readonly progress: Progress;
  /** Send the image to nodes that lack it or hold another build (default); false: refuse instead. */
  readonly push?: boolean;
  /** Free the page cache on the plan's nodes before the preflight (root or passwordless sudo). */
  readonly dropCaches?: boolean;
  /** Said once preflight passed, with the memory fit of every node (the store keeps its weights for `plan`). */
  readonly fitted?: (plan: Plan, fit: FitReport) => void;
  /**
   * The daemon running the boot stops and leaves it to the next daemon (src/daemon/adopt.ts): once
   * containers run, the watch just ends in Detached, nothing rolled back; before, it is an
   * interruption like `signal`'s (nothing was started, so nothing is left).
   */
  readonly detach?: AbortSignal;
  /**
   * Said once, just before the first container starts: the plan as this boot runs it (stamped with
   * its id), the id, and when the boot times out (ms since the epoch). What a daemon keeps so that
   * the next one can watch the boot again.
   */
  readonly starting?: (plan: Plan, bootId: string, deadline: number) => void;
  /**
   * A supervisor's restart of a group that just ran this very plan (src/supervise/supervisor.ts): the
   * old group of the deployment, being removed meanwhile, ends when this settles (rejects when it
   * could not be). The image and preflight checks run alongside it, counting the old group as
   * gone, and the first container starts once both are done. The cluster-wide look for another
   * deployment of this name is skipped: the removal lists every node and removes all of this name.
   */
  readonly recreating?: Promise<void>;
  /**
   * The recipe's args judged again by the image's own parser, once preflight has read it (the
   * recipe's host makes it: it has the recipe's files, so errors keep their positions). Absent (a
   * supervisor's restart of a plan already judged): not judged again.
   */
  readonly judgeArgs?: ArgsJudge;
  /**
   * The plan's nodes read already, under the claims its caller holds (the use case reads them while
   * the fabric probe runs): what `up` would ask first. Not with `dropCaches`, whose reads follow the
   * drop. Their holder ends them (PendingReadings.end) before it gives the claims back; `up` ends
   * only the reads it asks itself.
   */
  readonly readings?: PendingReadings;
}

export type UpResult = {
  readonly status: "ready" | "already-running";
  readonly endpoint: string;
  readonly served_model: string;
  readonly seconds: number;
  /** The id this boot's containers carry (launcher.boot); absent when nothing was started. */
  readonly boot?: string;
};

interface Failure {
  readonly node: string;
  readonly rank: number;
  readonly message: string;
  readonly cause?: string;
  /** Lines that did not stop the engine but likely explain the failure (a plugin that failed to load). */
  readonly warnings?: readonly string[];
  readonly lastLines: readonly string[];
  /** When it happened on the node (the log line's timestamp), to find the node that failed first. */
  readonly time?: string;
  /** What to do, when launcher knows better than the engine's log (the memory guard). */
  readonly hint?: string;
  /** Launcher's own figures, said before the log's last lines (the memory guard's). */
  readonly figures?: readonly string[];
  /** Whose log `lastLines` are, when not the failed node's own (another rank's log named it). */
  readonly logOf?: string;
}

// A lost peer makes the other ranks fail too, within moments: wait this long, then blame the first.
export const SETTLE_MS = 600;
// The longest the settle waits on top for ended logs' containers to be looked up.
const ENDINGS_WAIT_MS = 5_000;

/** The watch ended (a failure heard, an interrupt, a detach): what the wait for one rejects with. */
class WatchEnded extends Error {
  constructor() {
    super("the boot's watch ended");
    this.name = "WatchEnded";
  }
}

/** What a thrown value says, on one bounded line, whatever was thrown (a callback may throw anything). */
export function describeThrown(e: unknown): string {
  let text: string;
  try {
    text = e instanceof Error ? `${e.message}` : String(e);
  } catch {
    text = Object.prototype.toString.call(e);
  }
  const line = text.replace(/\s+/g, " ").trim() || (e instanceof Error ? e.name : "no message");
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

/** A note that cannot fail the rollback: the progress callback may be the very fault being handled. */
function sayNote(progress: Progress, text: string): void {
  try {
    progress.note(text);
  } catch {
    // The rollback goes on, and the original fault is what is thrown.
  }
}

/**
 * launcher's own fault (a bug, a callback that threw) with containers maybe started: nothing
 * half-started is left behind, and the fault itself is what the error funnel reports. A removal that
 * fails too (the SSH connection lost meanwhile) is said, never thrown in the fault's place: the
 * fault is the cause, and the removal's failure only what is left to clean up.
 */
async function rollBackOwnFault(e: unknown, deployment: string, bootId: string, session: ClusterSession, progress: Progress): Promise<never> {
  sayNote(progress, `launcher failed while booting ${deployment} (${describeThrown(e)}); removing every container this boot (${bootId}) created ...`);
  try {
    const removed = await removeContainers(session, createdBy(bootId), seconds(DEFAULTS.rollbackGrace));
    // A node that could not be reached keeps what it runs: said with the command that finishes there.
    for (const [i, line] of formatRemoval(removed, `launcher down deployment/${deployment}`, "summary").entries()) sayNote(progress, i === 0 ? `rolled back: ${line}` : line);
  } catch (removal) {
    sayNote(progress, `could not remove the containers of boot ${bootId} (${describeThrown(removal)}): run \`launcher down deployment/${deployment}\` once the nodes answer`);
  }
  throw e;
}
const LAST_LINES = 15;

/** What a node's log said about its failure. */
const seen = (state: BootState): Pick<Failure, "cause" | "warnings" | "lastLines"> => ({
  ...(state.cause === undefined ? {} : { cause: state.cause }),
  ...(state.warnings === undefined ? {} : { warnings: state.warnings }),
  lastLines: state.lastLines,
});

class BootFailed extends Error {
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
}

/**
 * Starts a plan on its nodes and waits until it serves. From its first instant an interrupt
 * (options.signal) stops it: before any container starts it just ends; after, it rolls back.
 * Any failure removes every container THIS boot created (they carry its `launcher.boot` id) on
 * every node before it is reported, and nothing else: nothing is left half-started, and no other
 * deployment is touched.
 */
export async function up(plan: Plan, session: ClusterSession, options: UpOptions): Promise<UpResult> {
  const started = Date.now();
  // Before any container runs, a daemon that stops leaves nothing behind: it is an interrupt then.
  const signal = options.detach === undefined ? options.signal : AbortSignal.any([options.signal, options.detach]);
  const note = (text: string): void => options.progress.note(text);
  const recreating = options.recreating;
  // The reads this boot asks, ended however it ends, before up's caller gives the nodes' claims back.
  const made: PendingReadings[] = [];
  const readNodes = (): PendingReadings => {
    const read = readPlanNodes(plan, session, signal);
    made.push(read);
    return read;
  };
  const push = (): Promise<unknown> => traced("image push", undefined, () => ensureImage(plan.recipe.docker_image, plan.nodes.map((n) => dockerOf(session, n.node)), note, signal, clusterRoutes(session.cluster.nodes)));
  // Read here, under the nodes' claims (up's caller holds them): no other launcher starts a
  // container on these nodes until they are released, so the look for the same deployment, the
  // memory fit and the mount paths see what the boot will meet. Read-only, so asked at once, while
  // the look for the same deployment runs; dropping the page cache changes what they say, so with
  // it they are asked after the drop.
  const early = options.dropCaches === true ? undefined : (options.readings ?? readNodes());
  const checks = async (): Promise<Awaited<ReturnType<typeof preflight>>> => {
    let readings: PendingReadings;
    if (options.dropCaches === true) {
      if (options.push !== false) await push();
      for (const line of await dropCaches(plan, session, signal)) note(line);
      readings = readNodes();
    } else {
      // Asked above already (early), unless the page cache was to be dropped first.
      readings = early ?? readNodes();
      // A node lacks the image or holds another build: whether the push sent it or found nothing
      // left to send (another launcher sent it meanwhile), what the nodes hold is asked again.
      if (options.push !== false && imageUnsettled(await abortable(readings.nodes, signal, "before the image push; no container was started"))) {
        await push();
        readings = readNodes();
      }
    }
    note(`preflight of ${plan.deployment} on ${plan.nodes.map((n) => n.node).join(", ")} ...`);
    return traced("preflight", undefined, () => preflight(plan, session, signal, recreating === undefined ? undefined : new Set([plan.deployment]), readings.all, options.judgeArgs));
  };
  try {
    if (recreating === undefined) {
      const looked = early === undefined ? session : sharingListings(session, early.nodes);
      const same = await traced("same-name check", undefined, () => sameNameOnCluster(plan, looked, signal, note));
      if (same !== undefined) return { status: "already-running", endpoint: same.endpoint, served_model: same.served_model, seconds: 0 };
    }
    const image = recreating === undefined ? await checks() : await alongside(checks(), recreating);
    if (image.version !== undefined) {
      note(`image ${plan.recipe.docker_image}: ${plan.recipe.engine} ${image.version}`);
      options.progress.engine?.(image.version);
    }
    if (image.unread !== undefined) note(`warning: image ${plan.recipe.docker_image}: ${image.unread}`);
    const by = image.judged?.flags.judge;
    if (by !== undefined) note(`image ${plan.recipe.docker_image}: args judged by its own parser (${by.engine} ${by.version})`);
    if (image.tableJudged !== undefined) note(`image ${plan.recipe.docker_image}: args judged by launcher's table only: ${image.tableJudged}`);
    if (image.fit !== undefined) {
      note(fitText(image.fit));
      options.fitted?.(plan, image.fit);
    }
    checkInterrupted(signal, `before any container of ${plan.deployment} started; nothing to roll back`);
    const bootId = newBootId();
    const stamped = stampBoot(plan, bootId);
    options.starting?.(stamped, bootId, Date.now() + options.timeoutMs);
    return await runBoot(stamped, bootId, session, options, started, "start", image.fit);
  } finally {
    try {
      options.progress.done();
    } finally {
      await Promise.all(made.map((r) => r.end()));
    }
  }
}

/**
 * The session as the look for the same deployment sees it: on the plan's nodes, the launcher
 * containers come from the preflight's read of them (one listing per node per `up`, not two); the
 * nodes outside the plan are listed on their own. A node whose read failed is listed again, so that
 * what is said of it is the listing's own reason.
 */
function sharingListings(session: ClusterSession, readings: Promise<ReadonlyMap<string, NodeReading>>): ClusterSession {
  const docker = new Map(
    [...session.docker].map(([node, real]) => {
      const shared = Object.create(real) as Docker;
      shared.containers = async (label: string) => {
        const reading = label === DEPLOYMENT_LABEL ? (await readings.catch(() => undefined))?.get(node) : undefined;
        return reading !== undefined && !("problem" in reading) ? [...reading.containers] : real.containers(label);
      };
      return [node, shared] as const;
    }),
  );
  return { ...session, docker };
}

/**
 * The checks of a new group and the removal of the old one, run together: both end before this
 * does (no removal still running when the boot fails), and the removal's failure (a node that does
 * not answer) is the one said when both fail, as it is the cause of the other.
 */
async function alongside<T>(checks: Promise<T>, removal: Promise<void>): Promise<T> {
  const [checked, removed] = await Promise.allSettled([checks, removal]);
  if (removed.status === "rejected") throw removed.reason;
  if (checked.status === "rejected") throw checked.reason;
  return checked.value;
}

/**
 * Watches a boot whose containers were started by another process (a daemon that died, see
 * src/daemon/adopt.ts) exactly as `up` watches its own: each container's log read again from its
 * first line through the same parser, then ready, or any failure (an exited rank, a fatal line,
 * the timeout, `options.signal`) rolls back every container of that boot. Starts nothing.
 * `docker logs --follow` "will first return all logs from the beginning and then continue
 * streaming" (moby/moby man/src/container/logs.md), so the boot's state is rebuilt whole, and the
 * log of a container that already exited ends, which the watcher takes for the exit it is.
 */
export async function watchAdoptedBoot(plan: Plan, bootId: string, session: ClusterSession, options: UpOptions, started: number): Promise<UpResult> {
  try {
    return await runBoot(plan, bootId, session, options, started, "watch");
  } finally {
    options.progress.done();
  }
}

/**
 * One boot's watch, shared by its steps: what each node's log said, the failures heard, and the
 * signal that ends the watch (a failure settled, an interrupt, a detach).
 */
class BootWatch {
  readonly states: Map<string, BootState>;
  readonly byNode: Map<string, NodeSpec>;
  private readonly failures: Failure[] = [];
  /** The failure to report, once the settle after the first one heard is over (at once for an interrupt, a timeout, a guard trip). */
  failure: Failure | undefined;
  // Nodes whose log said the engine failed: their watchers read on until the settle, because the
  // root cause may come after the fatal line (watchNode).
  readonly fatalNodes = new Set<string>();
  // Nodes whose log ended and whose container is being looked up: the settle waits for them
  // (bounded), because a rank that died first is often the one whose end is heard last (its
  // container's state is one more SSH round trip away, slow on a busy machine, while the head's
  // "died unexpectedly" line is already there).
  private readonly endings = new Set<Promise<void>>();
  private readonly ended = new AbortController();
  /** Rejects with WatchEnded once the watch ends: what every wait of the boot races against. */
  readonly failureWait: Promise<never>;
  readonly retry = new ReadyRetry();
  private readyResolve: (() => void) | undefined;
  /** Resolves once the head's log is past its init line (or ready): readiness is polled from then on. */
  readonly headReady: Promise<void>;
  /** A daemon that stops left the boot as it is, for the next one to adopt: the watch just ended. */
  detached = false;
  /** Nodes whose container runs (its log followed): a rank never started holds no boot up. */
  readonly started = new Set<string>();
  /** The worker whose port the head waits for now (./port-wait.ts): the one a timeout blames. */
  awaitingPort: PortAwaited | undefined;

  constructor(
    readonly plan: Plan,
    readonly engine: EngineAdapter,
    readonly session: ClusterSession,
    readonly options: UpOptions,
  ) {
    this.states = new Map(plan.nodes.map((n) => [n.node, INITIAL_BOOT]));
    this.byNode = new Map(plan.nodes.map((n) => [n.node, n]));
    this.headReady = new Promise<void>((resolve) => (this.readyResolve = resolve));
    this.failureWait = new Promise<never>((_, reject) => this.ended.signal.addEventListener("abort", () => reject(new WatchEnded()), { once: true }));
    this.failureWait.catch(() => undefined);
  }

  get signal(): AbortSignal {
    return this.ended.signal;
  }

  end(): void {
    this.ended.abort();
  }

  stateOf(node: string): BootState {
    return this.states.get(node) ?? INITIAL_BOOT;
  }

  /**
   * A failure heard. The first one ends the watch after the settle (a lost peer makes the other
   * ranks fail too, within moments) and the ended logs' container look-ups (bounded); `now` ends it
   * at once (an interrupt, the timeout, a guard trip). Then the one to blame is chosen (earliest).
   */
  fail(f: Failure, now = false): void {
    this.failures.push(f);
    if (now) return this.settle();
    if (this.failures.length > 1) return;
    setTimeout(() => {
      void Promise.race([Promise.allSettled([...this.endings]), delay(ENDINGS_WAIT_MS, undefined, { ref: false })]).then(() => this.settle());
    }, SETTLE_MS);
  }

  private settle(): void {
    this.failure ??= this.earliest();
    this.ended.abort();
  }

  // The one to blame (./blame.ts): a node whose log names a cause of its own first; then the
  // first to fail, by its log line's time (launcher's own failures, with no time, in the order seen).
  private earliest(): Failure | undefined {
    const first = culprit(this.failures, (f) => {
      const at = f.time === undefined ? undefined : timeMs(f.time);
      return { ownCause: ownCause(this.states.get(f.node)), ...(at === undefined ? {} : { atMs: at }), order: this.failures.indexOf(f) };
    });
    const state = first !== undefined && this.fatalNodes.has(first.node) ? this.states.get(first.node) : undefined;
    const chosen = first === undefined || state === undefined ? first : { ...first, ...seen(state) };
    return chosen === undefined ? undefined : (this.peerBlamed(chosen) ?? chosen);
  }

  /** The node of this boot that the failure's cause names as the peer that died (./blame.ts peerNamed): its failure, told by the rank that heard it. */
  private peerBlamed(f: Failure): Failure | undefined {
    const state = this.states.get(f.node);
    const cluster = new Map(this.session.cluster.nodes.map((n) => [n.name, n]));
    const peer = peerNamed(this.plan.nodes, this.byNode.get(f.node), state, (n) => nodeAddresses(cluster.get(n.node)));
    if (peer === undefined || state === undefined) return undefined;
    return { ...f, ...seen(state), node: peer.node, rank: peer.rank, message: `${f.node}'s log says this node (${state.peerAddress ?? ""}) died`, logOf: f.node };
  }

  /** A container's log ended and its container is being looked up: the settle waits for it. */
  async ending(lookup: Promise<void>): Promise<void> {
    this.endings.add(lookup);
    try {
      await lookup;
    } finally {
      this.endings.delete(lookup);
    }
  }

  /** The head's log: past its init line the engine's API comes up any moment, and /health is polled from then on. */
  headSaid(node: string, state: BootState): void {
    this.retry.headState(state.ready);
    if (!state.ready && state.pastInit !== true) return;
    if (this.readyResolve !== undefined) traceMark(state.ready ? "ready line" : "past init", node);
    this.readyResolve?.();
    this.readyResolve = undefined;
  }

  tripFailure(trip: Trip): Failure {
    return { node: trip.node, rank: this.byNode.get(trip.node)?.rank ?? -1, message: trip.message, hint: trip.hint, figures: trip.detail, lastLines: this.states.get(trip.node)?.lastLines ?? [] };
  }
}

/** One line of a node's log, read into its boot state. */
function heard(w: BootWatch, spec: NodeSpec, text: string, time: string | undefined): void {
  const state = advanceBoot(w.engine, w.stateOf(spec.node), text);
  w.states.set(spec.node, state);
  w.options.progress.node(spec.node, state);
  if (state.fatal !== undefined && !w.fatalNodes.has(spec.node)) {
    // A worker's record (stdout, another process) and the wrapper that kills `vllm serve`
    // (stderr) reach docker through two pipes, in either order on a busy machine: keep reading
    // until the settle, so a root cause printed "after" the wrapper is still the one named.
    w.fatalNodes.add(spec.node);
    w.fail({ node: spec.node, rank: spec.rank, message: "the engine failed", ...seen(state), ...(time ? { time } : {}) });
  }
  // uvicorn's "Application startup complete" alone is hidden by --uvicorn-log-level warning.
  if (spec.rank === 0) w.headSaid(spec.node, state);
}

/** Follows one container's log until the watch ends; a log that ends on its own is its container's exit. */
async function watchNode(w: BootWatch, spec: NodeSpec): Promise<void> {
  const docker = dockerOf(w.session, spec.node);
  let lastTime: string | undefined;
  let first = true;
  for await (const raw of docker.logs(spec.container, { follow: true, signal: w.signal })) {
    if (first) traceMark("first log line", spec.node);
    first = false;
    const { text, time } = splitTimestamp(raw);
    lastTime = time ?? lastTime;
    heard(w, spec, text, time);
  }
  if (w.signal.aborted || w.fatalNodes.has(spec.node)) return;
  // The log ended: the container exited (a serving engine never ends its log on its own).
  await w.ending(containerEnded(w, docker, spec, lastTime));
}

/** The failure of a container whose log ended: how it exited, as its node lists it. */
async function containerEnded(w: BootWatch, docker: ReturnType<typeof dockerOf>, spec: NodeSpec, lastTime: string | undefined): Promise<void> {
  const info = (await docker.containers(`${DEPLOYMENT_LABEL}=${w.plan.deployment}`)).find((c) => c.name === spec.container);
  const time = lastTime ?? info?.finishedAt;
  w.fail({
    node: spec.node,
    rank: spec.rank,
    message: info === undefined ? "container disappeared" : `container exited with status ${info.exitCode}`,
    ...seen(w.stateOf(spec.node)),
    ...(time === undefined ? {} : { time }),
  });
}

function follow(w: BootWatch, spec: NodeSpec): void {
  w.started.add(spec.node);
  w.options.progress.node(spec.node, INITIAL_BOOT);
  void watchNode(w, spec).catch((e: unknown) => w.fail({ node: spec.node, rank: spec.rank, message: `lost the log stream: ${(e as Error).message}`, lastLines: [] }));
}

async function startNode(w: BootWatch, guard: Guard, name: string): Promise<void> {
  const spec = w.byNode.get(name);
  // After a failure, an interrupt or a guard trip (its report comes once the kills are done),
  // start nothing more.
  if (spec === undefined || w.signal.aborted || guard.tripped() !== undefined) return;
  try {
    await traced("docker run", name, () => dockerOf(w.session, name).run(spec.argv, spec.env));
  } catch (e) {
    const detail = e instanceof RemoteError ? e.detail : String(e);
    throw new BootFailed({ node: name, rank: spec.rank, message: "docker run failed", ...(detail ? { cause: detail.split("\n").slice(-1)[0] ?? detail } : {}), lastLines: detail ? detail.split("\n") : [] });
  }
  follow(w, spec);
  await guardOnNode(w, name);
}

/**
 * The deployment's guard on the node itself (src/memory/node-guard.ts), started once its container
 * runs there, awaited so that a rollback after this finds it: it guards whatever happens to this
 * process. One that cannot start is said; this boot's own guard still watches the node meanwhile.
 */
async function guardOnNode(w: BootWatch, name: string): Promise<void> {
  try {
    // Its launch's id too: a guard left by an earlier launch of this name never kills this one's.
    const launch = w.byNode.get(name)?.labels[LABELS.boot];
    await traced("node guard", name, () => startNodeGuard(dockerOf(w.session, name).transport, w.plan.deployment, nodeFloorGiB(w.session.cluster, name), launch));
  } catch (e) {
    w.options.progress.note(`warning: the memory guard on ${name} itself did not start (${describeThrown(e)}); once this boot ends, only a running daemon guards that node's memory`);
  }
}

/**
 * Starts the containers in the plan's steps (startSteps: the engine's start order), each step's at
 * once. "watch": they ran already, their logs are followed. Every `docker run` of a
 * step is waited for, even when one fails: a run still creating its container while the rollback
 * lists them would leave that container behind.
 */
async function startContainers(w: BootWatch, guard: Guard, mode: "start" | "watch"): Promise<void> {
  const { plan } = w;
  if (mode === "watch") {
    for (const spec of plan.nodes) follow(w, spec);
    return;
  }
  const startAll = async (names: readonly string[]): Promise<void> => {
    const failed = (await Promise.allSettled(names.map((n) => startNode(w, guard, n)))).find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  };
  const head = headOf(plan);
  const others = plan.start_order.filter((n) => n !== head);
  for (const step of startSteps(plan)) {
    // A head that connects to its workers once, at its start: not before each one's port accepts.
    if (head !== undefined && step.includes(head) && plan.start === "workers first" && others.length > 0 && w.engine.headAwaitsWorkersPort === true) await traced("workers' ports", head, () => workersAccept(w, head, others));
    await startAll(step);
  }
}

/** Until each worker's port accepts a connection made from the head's node (./port-wait.ts). */
async function workersAccept(w: BootWatch, head: string, workers: readonly string[]): Promise<void> {
  const transport = dockerOf(w.session, head).transport;
  const ports = awaitedPorts(w.plan.master_port, w.session.cluster.nodes, workers, (n) => w.byNode.get(n)?.rank ?? -1);
  try {
    await awaitPorts(ports, (p) => probePort(transport, p.ip, p.port, w.signal), w.failureWait, (p) => (w.awaitingPort = p));
  } catch (e) {
    // A probe cut short by the watch's end is that end; the head's node unreachable is the head's failure.
    if (w.signal.aborted) throw new WatchEnded();
    if (e instanceof UnreachableError) throw new BootFailed({ node: head, rank: 0, message: `could not probe the workers' ports from the head's node: ${e.message}`, lastLines: e.detail === undefined ? [] : [e.detail] });
    throw e;
  }
}

/** Waits until the head answers a chat request, or the watch ends (then WatchEnded). */
async function awaitReady(w: BootWatch): Promise<void> {
  const { plan, engine } = w;
  for (let tries = 0; ; tries++) {
    await Promise.race([w.headReady, w.failureWait]);
    const check = await traced("readiness check", undefined, () => checkReady(plan.endpoint, plan.served_model, w.signal, engine.healthPath, plan.api_key));
    if (check.ok || w.signal.aborted) return;
    // /health can lag the init line by a moment: asked again soon, or as the head's log says its
    // API is up; any real failure arrives through the watchers (failureWait).
    await w.retry.wait(tries, w.failureWait);
  }
}

/**
 * From before the first container starts until the watch ends: a node whose available memory
 * falls below its floor gets the deployment killed on every node, before the machine wedges.
 */
function guardMemory(w: BootWatch, fit: FitReport | undefined, stop: AbortSignal): Guard {
  const { plan, session, options } = w;
  return startGuard({
    nodes: plan.nodes.map((n) => ({ node: n.node, docker: dockerOf(session, n.node), floorGiB: nodeFloorGiB(session.cluster, n.node), containers: [n.container] })),
    ...(fit === undefined ? {} : { fit: (node: string) => fit.nodes.find((f) => f.node === node)?.lines ?? [] }),
    phaseOf: (node) => w.stateOf(node).phase,
    signal: stop,
    onSample: (node, sample) => options.progress.memory?.(node, sample),
    onLost: (node, why) => options.progress.note(`warning: memory guard on ${node} stopped (${why}); that node's memory is not watched`),
    onTrip: (trip) => w.fail(w.tripFailure(trip), true),
  });
}

/**
 * After a failure: each node's own guard's report, read once (bounded, in parallel). A guard that
 * tripped gives its sample to this boot's guard, which then trips with its whole report (phase,
 * peaks, the fit check) and kills on every node, as if it had seen the crossing itself.
 */
async function heedNodeGuards(w: BootWatch, guard: Guard): Promise<void> {
  await Promise.all(
    w.plan.nodes.map(async ({ node }) => {
      const trip = await nodeGuardTrip(dockerOf(w.session, node).transport, w.plan.deployment).catch(() => undefined);
      const totalKiB = guard.states().find((s) => s.node === node)?.last?.totalKiB;
      if (trip !== undefined && totalKiB !== undefined) guard.heard(node, { totalKiB, availableKiB: Math.min(trip.availableKiB, totalKiB) });
    }),
  );
}

/** The ranks a timeout may blame: those started (a head never started, waiting for its workers, holds nothing up itself); all when none is. */
export function startedRanks<T extends { readonly node: string }>(nodes: readonly T[], started: ReadonlySet<string>): readonly T[] {
  const running = nodes.filter((n) => started.has(n.node));
  return running.length > 0 ? running : nodes;
}

/** The boot's --timeout: the rank that holds the others up is blamed, not the head that waits for it. */
function timeoutAfter(w: BootWatch): NodeJS.Timeout {
  const { plan, engine, options } = w;
  return setTimeout(() => {
    const after = Math.round(options.timeoutMs / 1000);
    const port = w.awaitingPort;
    if (port !== undefined) {
      const message = `timed out after ${after} s: its port ${port.ip}:${port.port} never accepted a connection from the head's node ${plan.nodes[0]?.node ?? "?"}, and the head starts only once it does`;
      return w.fail({ node: port.node, rank: port.rank, message, lastLines: w.stateOf(port.node).lastLines }, true);
    }
    const ranks = startedRanks(plan.nodes, w.started).map((n) => ({ node: n.node, rank: n.rank, state: w.stateOf(n.node) }));
    const { blamed, message } = timeoutBlame(engine, ranks, after) ?? { blamed: { node: "?", rank: 0, state: INITIAL_BOOT }, message: `timed out after ${after} s` };
    w.fail({ node: blamed.node, rank: blamed.rank, message, lastLines: blamed.state.lastLines }, true);
  }, options.timeoutMs);
}

/**
 * The starts ("watch": they ran already), the watch and, on any failure, the rollback of this
 * boot's containers.
 */
async function runBoot(plan: Plan, bootId: string, session: ClusterSession, options: UpOptions, started: number, mode: "start" | "watch", fit?: FitReport): Promise<UpResult> {
  const engine = adapterOf(plan.recipe.engine);
  // The plan was made with this engine's adapter, so a missing one here is launcher's bug (exit 70).
  if (engine === undefined) throw new Error(`no adapter for engine ${plan.recipe.engine}`);
  const w = new BootWatch(plan, engine, session, options);
  const stopWatching = (): void => w.fail({ node: "launcher", rank: -1, message: interruption(options.signal).message, lastLines: [] }, true);
  // No await since the last check: an interrupt from here on is heard, and rolls back.
  options.signal.addEventListener("abort", stopWatching, { once: true });
  // A daemon that stops leaves the boot as it is, for the next one to adopt: the watch just ends.
  const leave = (): void => {
    w.detached = true;
    w.end();
  };
  options.detach?.addEventListener("abort", leave, { once: true });
  const guardStop = new AbortController();
  const guard = guardMemory(w, fit, guardStop.signal);
  const timeout = timeoutAfter(w);
  try {
    await startContainers(w, guard, mode);
    await awaitReady(w);
    if (w.detached) throw new Detached(plan.deployment);
    // Ready while the guard was killing it is no boot.
    const tripping = guard.tripped();
    if (tripping !== undefined) throw new BootFailed(w.tripFailure(await tripping));
    if (w.failure !== undefined) throw new BootFailed(w.failure);
    return { status: "ready", endpoint: plan.endpoint, served_model: plan.served_model, seconds: (Date.now() - started) / 1000, boot: bootId };
  } catch (e) {
    if (w.detached) throw new Detached(plan.deployment);
    if (!(e instanceof BootFailed) && !(e instanceof WatchEnded)) {
      w.end();
      return await rollBackOwnFault(e, plan.deployment, bootId, session, options.progress);
    }
    // A guard trip is the failure, whatever the ranks it killed logged on their way out; the
    // guard on a node may have killed them before this one's next sample.
    if (guard.tripped() === undefined && !options.signal.aborted) await heedNodeGuards(w, guard);
    const trip = await guard.tripped();
    const f = trip !== undefined ? w.tripFailure(trip) : e instanceof BootFailed ? e.failure : (w.failure ?? { node: "launcher", rank: -1, message: options.signal.aborted ? interruption(options.signal).message : "aborted", lastLines: [] });
    w.end();
    return await rollBack(w, f, bootId);
  } finally {
    clearTimeout(timeout);
    w.end();
    guardStop.abort();
    options.signal.removeEventListener("abort", stopWatching);
    options.detach?.removeEventListener("abort", leave);
  }
}

/** A boot that failed: every container it created is removed, and the failure is thrown with what was removed. */
async function rollBack(w: BootWatch, f: Failure, bootId: string): Promise<never> {
  const { plan, session, engine, options } = w;
  options.progress.note(`boot failed on ${f.node}: ${f.message}; removing every container this boot (${bootId}) of ${plan.deployment} created ...`);
  const removed = await removeContainers(session, createdBy(bootId), seconds(DEFAULTS.rollbackGrace));
  const where = f.rank >= 0 ? `${f.node} (rank ${f.rank})` : f.node;
  // The same hint `launcher explain` gives for this log (src/boot/explain.ts): one wording per cause.
  const hint = f.hint ?? (f.rank >= 0 ? failureHint(engine, f.cause, f.lastLines) : undefined);
  const detail = [
    ...(f.figures ?? []),
    ...(f.cause ? [`cause: ${f.cause}`] : []),
    ...(hint ? [`hint: ${hint}`] : []),
    ...(f.warnings ?? []).map((w) => `warning: ${warningNote(w)}`),
    ...(f.lastLines.length > 0 ? [`last lines of ${f.logOf ?? f.node}'s log:`, ...f.lastLines.slice(-LAST_LINES)] : []),
    ...formatRemoval(removed, `launcher down deployment/${plan.deployment}`, "summary").map((l, i) => (i === 0 ? `rolled back: ${l}` : l)),
  ].join("\n");
  // The engine's own lines may hold its API key (vLLM's "non-default args" before it redacted them).
  const secrets = plan.api_key === undefined ? [] : [plan.api_key];
  throw new RemoteError(where, redactText(`boot of ${plan.deployment} failed: ${f.message}`, secrets), redactText(detail, secrets), undefined, { node: f.node, ...(f.rank >= 0 ? { rank: f.rank } : {}) });
}
