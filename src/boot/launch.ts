import { hostname } from "node:os";
import { RemoteError, StoreFault } from "../config/errors.js";
import type { Plan } from "../plan/plan.js";
import { encodeSavedPlan } from "../plan/saved.js";
import type { BootInProgress, StateStore } from "../store/store.js";
import { Detached } from "../config/abort.js";
import type { Progress } from "../nodes/progress.js";
import type { ClusterSession } from "../nodes/session.js";
import { up, watchAdoptedBoot, type UpOptions, type UpResult } from "./up.js";

/** How a boot is written to the store: its progress (phases, figures), then its end. */
interface Recorder {
  readonly progress: Progress;
  /** It serves: the boot ends ready, the deployment is recorded ready and its plan kept. */
  ready(): void;
  /** It failed or was interrupted (and was rolled back): the boot ends so, with its error. */
  failed(e: unknown, interrupted: boolean): void;
}

/**
 * The recording of one boot of `plan`. `history.id`: the boot's row when one was written already
 * (a boot adopted from a daemon that died); otherwise it is written at the first line a container
 * logs (a preflight refusal is no boot), and `history.begun` hears of it.
 */
function recorder(plan: Plan, options: UpOptions, store: StateStore, now: () => Date, history: { id?: number; startedAt: string; begun?: (id: number) => void }): Recorder {
  const at = (): string => now().toISOString();
  const boot = {
    deployment: plan.deployment,
    recipe: plan.recipe.id,
    recipe_hash: plan.recipe_hash,
    ...(plan.lane === undefined ? {} : { lane: plan.lane }),
    cluster: plan.cluster,
    served_model: plan.served_model,
    endpoint: plan.endpoint,
    nodes: plan.nodes.map((n) => n.node),
  };
  let bootId = history.id;
  const seen = new Map<string, string>();
  // Each node's phase now and the least available memory written for it, so that only a new
  // least reaches the store (the guard samples several times a second).
  const phaseOf = new Map<string, string>();
  const least = new Map<string, number>();
  let engineVersion: string | undefined;
  const begin = (): number => {
    const id = store.beginBoot({ ...boot, started_at: history.startedAt, ...(engineVersion === undefined ? {} : { engine_version: engineVersion }) });
    history.begun?.(id);
    return id;
  };
  return {
    progress: {
      engine(version) {
        engineVersion = version;
      },
      node(node, state) {
        options.progress.node(node, state);
        // The first line seen means containers run: only then is this a boot worth remembering.
        bootId ??= begin();
        const key = `${state.phase} ${JSON.stringify(state.figures)}`;
        if (seen.get(node) === key) return;
        seen.set(node, key);
        phaseOf.set(node, state.phase);
        store.bootPhase(bootId, node, state.phase, at(), state.figures);
      },
      memory(node, sample) {
        options.progress.memory?.(node, sample);
        const phase = phaseOf.get(node);
        if (bootId === undefined || phase === undefined) return;
        const key = `${node} ${phase}`;
        if (sample.availableKiB >= (least.get(key) ?? Infinity)) return;
        least.set(key, sample.availableKiB);
        store.memoryPeak(bootId, node, phase, sample.availableKiB, sample.totalKiB);
      },
      note: (text) => options.progress.note(text),
      done: () => options.progress.done(),
    },
    ready() {
      bootId ??= begin();
      store.endBoot(bootId, "ready", at());
      store.deploymentReady({ ...boot, boot_id: bootId, ready_at: at() }, plan.api_key);
      // What the daemon's supervisor boots again when the group fails (src/supervise/supervisor.ts).
      store.savePlan(plan.cluster, plan.deployment, encodeSavedPlan(plan), at());
    },
    failed(e, interrupted) {
      // An interrupt is history even before any container ran (during the push or the preflight):
      // the user asked for this boot and stopped it. A refusal is not.
      if (interrupted) bootId ??= begin();
      if (bootId === undefined) return;
      const failure = e instanceof RemoteError ? { node: e.node, error: e.message } : { node: "launcher", error: (e as Error).message };
      store.endBoot(bootId, interrupted ? "interrupted" : "failed", at(), failure);
    },
  };
}

/**
 * What must be in the store before a boot's first container starts, whoever runs it: its launch id
 * (from then on only containers carrying it count as the deployment's, src/claims/ownership.ts:
 * the daemon routes and supervises no other), and for a boot a daemon runs and may leave, the
 * boot itself (what the next daemon adopts, src/daemon/adopt.ts). A store that fails here (or
 * failed earlier in this command) starts nothing: a boot it could not record would run unrouted,
 * or unwatched once its daemon stops. It is the one store fault that stops a command; every other
 * write of a boot is history, and the boot goes on without it (src/store/guarded.ts says so). A
 * store out of use since it was opened (its NullStore, already said) is no fault: the boot goes
 * on as the README's state store section says.
 */
export function recordStart(store: StateStore, stamped: Plan, bootId: string, boot: { startedAt: string; deadline: number; kept: boolean }, now: () => Date): void {
  store.recordLaunch(stamped.cluster, stamped.deployment, bootId, now().toISOString(), stamped.api_key);
  if (boot.kept) {
    store.beginBootInProgress({
      boot: bootId,
      cluster: stamped.cluster,
      deployment: stamped.deployment,
      ...(stamped.lane === undefined ? {} : { lane: stamped.lane }),
      plan: encodeSavedPlan(stamped),
      started_at: boot.startedAt,
      deadline_at: new Date(boot.deadline).toISOString(),
      pid: process.pid,
      host: hostname(),
    });
  }
  const fault = store.fault();
  if (fault === undefined) return;
  const hint = fault.hint === undefined ? "" : `; ${fault.hint}`;
  throw new StoreFault(fault.kind, fault.file, fault.code, fault.reason, `${fault.message}: nothing of ${stamped.deployment} was started, as launcher could not record its launch`, `run the command again once the store is fixed${hint}`);
}

/**
 * `up`, with the boot written to the store: every phase of every node, the figures, the outcome.
 * A boot that a daemon runs (one it may leave: `options.detach`) is also kept in the store's boots
 * in progress from just before its first container starts until it ends, so that a daemon started
 * after this one died adopts it (src/daemon/adopt.ts); one it left stays there.
 */
export async function recordedUp(plan: Plan, session: ClusterSession, options: UpOptions, store: StateStore, now: () => Date): Promise<UpResult> {
  // The boot counts from here, but is written only once a container runs.
  const startedAt = now().toISOString();
  let kept: string | undefined;
  const rec = recorder(plan, options, store, now, { startedAt, begun: (id) => kept !== undefined && store.bootInProgressRecorded(kept, id) });
  const starting = (stamped: Plan, bootId: string, deadline: number): void => {
    if (options.detach !== undefined) kept = bootId;
    recordStart(store, stamped, bootId, { startedAt, deadline, kept: options.detach !== undefined }, now);
    options.starting?.(stamped, bootId, deadline);
  };
  try {
    const result = await up(plan, session, { ...options, progress: rec.progress, starting });
    if (result.status === "ready") rec.ready();
    if (kept !== undefined) store.endBootInProgress(kept);
    return result;
  } catch (e) {
    // Left to the next daemon: neither its end nor its row is written here.
    if (e instanceof Detached) throw e;
    rec.failed(e, options.signal.aborted);
    if (kept !== undefined) store.endBootInProgress(kept);
    throw e;
  }
}

/**
 * An adopted boot (`kept`, left by a daemon that died) watched to its end and recorded as `up`
 * records its own: its history row continued (or written), ready with its plan kept, or failed
 * and rolled back; its row of boots in progress removed either way, unless this daemon leaves it too.
 */
export async function recordedWatch(kept: BootInProgress, plan: Plan, session: ClusterSession, options: UpOptions, store: StateStore, now: () => Date): Promise<UpResult> {
  const rec = recorder(plan, options, store, now, {
    ...(kept.history_id === undefined ? {} : { id: kept.history_id }),
    startedAt: kept.started_at,
    begun: (id) => store.bootInProgressRecorded(kept.boot, id),
  });
  try {
    const result = await watchAdoptedBoot(plan, kept.boot, session, { ...options, progress: rec.progress }, Date.parse(kept.started_at));
    rec.ready();
    store.endBootInProgress(kept.boot);
    return result;
  } catch (e) {
    if (e instanceof Detached) throw e;
    rec.failed(e, options.signal.aborted);
    store.endBootInProgress(kept.boot);
    throw e;
  }
}
