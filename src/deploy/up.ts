import { RemoteError, UserError } from "../config/errors.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, type BootState } from "../engine/boot-log.js";
import { vllm } from "../engine/vllm.js";
import type { NodeSpec, Plan } from "../plan/plan.js";
import { preflight } from "./preflight.js";
import type { Progress } from "./progress.js";
import { checkReady } from "./readiness.js";
import { dockerOf, type ClusterSession } from "./session.js";
import { formatRemoval, removeContainers } from "./down.js";
import { DEPLOYMENT_LABEL, LABELS } from "./contract.js";
import { ensureImage } from "./images.js";

export interface UpOptions {
  readonly timeoutMs: number;
  /** Aborts the boot (Ctrl-C, SIGTERM): everything started is removed. */
  readonly signal: AbortSignal;
  readonly progress: Progress;
  /** Send the image to nodes that lack it or hold another build (default); false: refuse instead. */
  readonly push?: boolean;
}

export type UpResult = { readonly status: "ready" | "already-running"; readonly endpoint: string; readonly served_model: string; readonly seconds: number };

interface Failure {
  readonly node: string;
  readonly rank: number;
  readonly message: string;
  readonly cause?: string;
  readonly lastLines: readonly string[];
  /** When it happened on the node (the log line's timestamp), to find the node that failed first. */
  readonly time?: string;
}

// A lost peer makes the other ranks fail too, within moments: wait this long, then blame the first.
const SETTLE_MS = 600;
const ROLLBACK_GRACE_SECONDS = 3;
const LAST_LINES = 15;

class BootFailed extends Error {
  constructor(readonly failure: Failure) {
    super(failure.message);
  }
}

/**
 * Starts a plan on its nodes and waits until it serves. Any failure removes every container of
 * the deployment on every node before it is reported: nothing is left half-started.
 */
export async function up(plan: Plan, session: ClusterSession, options: UpOptions): Promise<UpResult> {
  const started = Date.now();
  if (options.push !== false) await ensureImage(plan.recipe.docker_image, plan.nodes.map((n) => dockerOf(session, n.node)), (t) => options.progress.note(t));
  const { existing } = await preflight(plan, session);
  if (existing.length > 0) {
    const running = existing.filter((c) => c.running);
    const sameRecipe = existing.every((c) => c.labels[LABELS.recipe_hash] === plan.recipe_hash);
    if (running.length === plan.nodes.length && sameRecipe) {
      return { status: "already-running", endpoint: plan.endpoint, served_model: plan.served_model, seconds: 0 };
    }
    throw new UserError(
      `deployment ${plan.deployment} already exists (${running.length} of ${plan.nodes.length} ranks running${sameRecipe ? "" : ", another version of the recipe"})`,
      `stop it first: launcher down ${plan.deployment}`,
    );
  }

  const watch = new AbortController();
  const stopWatching = (): void => fail({ node: "launcher", rank: -1, message: "interrupted (Ctrl-C or SIGTERM)", lastLines: [] }, true);
  options.signal.addEventListener("abort", stopWatching, { once: true });
  const states = new Map<string, BootState>(plan.nodes.map((n) => [n.node, INITIAL_BOOT]));
  const byNode = new Map(plan.nodes.map((n) => [n.node, n]));
  const failures: Failure[] = [];
  let failure: Failure | undefined;
  let readyResolve: (() => void) | undefined;
  const headReady = new Promise<void>((resolve) => (readyResolve = resolve));
  const earliest = (): Failure | undefined =>
    [...failures].sort((a, b) => (a.time ?? "\uffff").localeCompare(b.time ?? "\uffff"))[0];
  const fail = (f: Failure, now = false): void => {
    failures.push(f);
    if (failures.length === 1 && !now) {
      setTimeout(() => {
        failure = earliest();
        watch.abort();
      }, SETTLE_MS);
    } else if (now) {
      failure ??= earliest();
      watch.abort();
    }
  };
  const failureWait = new Promise<never>((_, reject) => watch.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }));
  failureWait.catch(() => undefined);

  const watchNode = async (spec: NodeSpec): Promise<void> => {
    const docker = dockerOf(session, spec.node);
    let lastTime: string | undefined;
    for await (const raw of docker.logs(spec.container, { follow: true, signal: watch.signal })) {
      const { text, time } = splitTimestamp(raw);
      lastTime = time ?? lastTime;
      const state = advanceBoot(vllm, states.get(spec.node) ?? INITIAL_BOOT, text);
      states.set(spec.node, state);
      options.progress.node(spec.node, state);
      if (state.fatal !== undefined) {
        fail({ node: spec.node, rank: spec.rank, message: "the engine failed", ...(state.cause ? { cause: state.cause } : {}), lastLines: state.lastLines, ...(time ? { time } : {}) });
        return;
      }
      if (spec.rank === 0 && state.ready) readyResolve?.();
    }
    if (watch.signal.aborted) return;
    // The log ended: the container exited (a serving engine never ends its log on its own).
    const info = (await docker.containers(`${DEPLOYMENT_LABEL}=${plan.deployment}`)).find((c) => c.name === spec.container);
    const state = states.get(spec.node) ?? INITIAL_BOOT;
    fail({
      node: spec.node,
      rank: spec.rank,
      message: info === undefined ? "container disappeared" : `container exited with status ${info.exitCode}`,
      ...(state.cause ? { cause: state.cause } : {}),
      lastLines: state.lastLines,
      ...((lastTime ?? info?.finishedAt) === undefined ? {} : { time: (lastTime ?? info?.finishedAt) as string }),
    });
  };

  const startNode = async (name: string): Promise<void> => {
    const spec = byNode.get(name);
    if (spec === undefined) return;
    try {
      await dockerOf(session, name).run(spec.argv);
    } catch (e) {
      const detail = e instanceof RemoteError ? e.detail : String(e);
      throw new BootFailed({ node: name, rank: spec.rank, message: "docker run failed", ...(detail ? { cause: detail.split("\n").slice(-1)[0] ?? detail } : {}), lastLines: detail ? detail.split("\n") : [] });
    }
    options.progress.node(name, INITIAL_BOOT);
    void watchNode(spec).catch((e: unknown) => fail({ node: name, rank: spec.rank, message: `lost the log stream: ${(e as Error).message}`, lastLines: [] }));
  };

  const timeout = setTimeout(() => {
    const head = plan.nodes[0];
    fail({ node: head?.node ?? "?", rank: 0, message: `timed out after ${Math.round(options.timeoutMs / 1000)} s (phase ${states.get(head?.node ?? "")?.phase ?? "?"})`, lastLines: states.get(head?.node ?? "")?.lastLines ?? [] }, true);
  }, options.timeoutMs);

  try {
    // The plan's order: the head last for mp (workers wait for it), first for Ray; the rest at once.
    const headName = plan.nodes[0]?.node;
    const others = plan.start_order.filter((n) => n !== headName);
    if (plan.start_order[0] === headName) {
      await startNode(headName as string);
      await Promise.all(others.map(startNode));
    } else {
      await Promise.all(others.map(startNode));
      if (headName !== undefined) await startNode(headName);
    }
    for (;;) {
      await Promise.race([headReady, failureWait]);
      const check = await checkReady(plan.endpoint, plan.served_model, watch.signal);
      if (check.ok) break;
      if (watch.signal.aborted) break;
      // /health can lag the ready line by a moment; any real failure arrives through the watchers.
      await new Promise((r) => setTimeout(r, 200));
    }
    if (failure !== undefined) throw new BootFailed(failure);
    return { status: "ready", endpoint: plan.endpoint, served_model: plan.served_model, seconds: (Date.now() - started) / 1000 };
  } catch (e) {
    if (!(e instanceof BootFailed) && !(e instanceof Error && e.message === "aborted")) throw e;
    const f = e instanceof BootFailed ? e.failure : (failure ?? { node: "launcher", rank: -1, message: options.signal.aborted ? "interrupted" : "aborted", lastLines: [] });
    watch.abort();
    options.progress.note(`boot failed on ${f.node}: ${f.message}; removing every container of ${plan.deployment} ...`);
    const removed = await removeContainers(session, (c) => c.labels.deployment === plan.deployment, ROLLBACK_GRACE_SECONDS);
    const where = f.rank >= 0 ? `${f.node} (rank ${f.rank})` : f.node;
    const detail = [
      ...(f.cause ? [`cause: ${f.cause}`] : []),
      ...(f.lastLines.length > 0 ? [`last lines of ${f.node}'s log:`, ...f.lastLines.slice(-LAST_LINES)] : []),
      ...formatRemoval(removed, `launcher down deployment/${plan.deployment}`, "summary").map((l, i) => (i === 0 ? `rolled back: ${l}` : l)),
    ].join("\n");
    throw new RemoteError(where, `boot of ${plan.deployment} failed: ${f.message}`, detail);
  } finally {
    clearTimeout(timeout);
    watch.abort();
    options.signal.removeEventListener("abort", stopWatching);
    options.progress.done();
  }
}
