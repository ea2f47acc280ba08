import { hostname } from "node:os";
import { RemoteError, UserError } from "../config/errors.js";
import type { Plan } from "../plan/plan.js";
import { decodeSavedPlan } from "../plan/saved.js";
import type { BootInProgress, StateStore, SwapRecord } from "../store/store.js";
import { Detached } from "../config/abort.js";
import { DEFAULTS, seconds } from "../contract/defaults.js";
import { createdBy } from "../boot/boot.js";
import { claimPlanNodes, DEFAULT_LEASE_MS } from "../claims/claims.js";
import type { BootEntry, BootRegistry } from "../supervise/boots.js";
import { formatRemoval, removeContainers } from "../nodes/down.js";
import { listNodes, type NodeListing } from "../nodes/labels.js";
import { recordedWatch } from "../boot/launch.js";
import { stopReplacedIn } from "../lanes/lane.js";
import { afterFailedAdoptedBoot, servedOf, serving } from "../lanes/lane-state.js";
import { clusterStatus } from "../nodes/status.js";
import { deploymentKey, holdOrBusy, isAlive, laneKey } from "../claims/locks.js";
import type { ClusterSession } from "../nodes/session.js";
import { decodeError, progressEvents, type UpEvent } from "../boot/up-events.js";
import { FAILURE_KINDS, type Failure } from "../supervise/supervise.js";
import type { AdoptedEnd } from "../supervise/supervisor.js";
import type { UpOutcome } from "../boot/up-events.js";

/*
 * Adoption: a daemon started after another died (even `kill -9`) takes over the boots that one was
 * running. What it starts from is what the dead daemon wrote just before each boot's first container
 * started (the store's boots in progress, src/boot/launch.ts: the plan as it runs, stamped with
 * its launcher.boot id, and its deadline) and what the nodes show (the containers carrying that id).
 * Nothing is started again: each container's log is read again from its first line through the
 * watcher `up` uses (src/boot/up.ts watchAdoptedBoot), and the boot either becomes ready (recorded as `up`
 * records it) or is rolled back (every container of that boot on every node). A boot whose
 * containers did not all start before its daemon died can never become ready: it is rolled back at
 * once.
 */

/** The process this is: a boot kept by it is its own, not an orphan. */
export interface Owner {
  readonly pid: number;
  readonly host: string;
}

/** Which kept boots this daemon adopts, and which it leaves (and why). */
export interface Orphans {
  readonly adopt: readonly BootInProgress[];
  readonly left: readonly { readonly kept: BootInProgress; readonly why: string }[];
}

/**
 * The kept boots whose daemon no longer runs. A pid can be checked only on its own machine: a boot
 * kept by a daemon of another host name (a store moved, a host renamed) is left, said so. So is a
 * boot of a cluster this daemon does not watch (it could not reach its nodes).
 */
export function orphansOf(kept: readonly BootInProgress[], here: Owner, runs: (pid: number) => boolean, clusters: ReadonlySet<string>): Orphans {
  const adopt: BootInProgress[] = [];
  const left: { kept: BootInProgress; why: string }[] = [];
  for (const k of kept) {
    if (k.host === here.host && k.pid === here.pid) continue;
    if (k.host !== here.host) left.push({ kept: k, why: `it was started by a launcher serve on ${k.host}, whose process cannot be checked from here` });
    else if (runs(k.pid)) continue;
    else if (!clusters.has(k.cluster)) left.push({ kept: k, why: `its cluster ${k.cluster} is not one this daemon watches (--cluster)` });
    else adopt.push(k);
  }
  return { adopt, left };
}

/** What the nodes show of a kept boot: all its ranks, none (gone), or some (its start was cut short). */
export type Found = { readonly kind: "complete" } | { readonly kind: "gone" } | { readonly kind: "partial"; readonly missing: readonly string[] };

/**
 * Looks for each rank's container of this boot (its name and launcher.boot id) on its node. A node
 * that cannot be read may hold its rank: only nodes that answered can say one is missing (the
 * watch then finds out, and rolls back what it can reach).
 */
export function foundOf(plan: Plan, bootId: string, listing: readonly NodeListing[]): Found {
  const missing: string[] = [];
  for (const spec of plan.nodes) {
    const l = listing.find((x) => x.node === spec.node);
    if (l === undefined || !l.reachable) continue;
    if (!l.containers.some((c) => c.c.name === spec.container && createdBy(bootId)(c))) missing.push(`rank ${spec.rank} on ${spec.node}`);
  }
  if (missing.length === 0) return { kind: "complete" };
  return missing.length === plan.nodes.length ? { kind: "gone" } : { kind: "partial", missing };
}

export interface AdoptDeps {
  readonly store: StateStore;
  readonly registry: BootRegistry;
  /** The clusters this daemon watches, by name. */
  readonly clusters: readonly string[];
  readonly session: (cluster: string) => Promise<ClusterSession | undefined>;
  readonly log: (line: string) => void;
  readonly now: () => Date;
  /**
   * An adopted boot is a supervisor's restart (its restart row is open): the daemon's supervisor
   * takes it as a restart under way, and hears how it ended (src/supervise/supervisor.ts adoptedRestart).
   */
  readonly restartAdopted?: (plan: Plan, attempt: number, failure: Failure, ended: Promise<AdoptedEnd>) => void;
}

/** setTimeout's longest wait (a 32-bit signed count of ms): a longer one fires at once. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** What is left of a kept boot's --timeout (none: it times out at once, and is rolled back). */
export const timeLeft = (deadline: string, now: Date): number => Math.min(LONGEST_TIMER_MS, Math.max(0, Date.parse(deadline) - now.getTime()));

/**
 * Adopts every boot a dead daemon left: each becomes a boot of this daemon's registry (so `attach
 * NAME` follows it and `down NAME` cancels it with the usual rollback) that watches it to its end.
 * Returns the boots adopted.
 */
export function adoptBoots(deps: AdoptDeps): BootEntry[] {
  const here: Owner = { pid: process.pid, host: hostname() };
  const { adopt, left } = orphansOf(deps.store.bootsInProgress(), here, isAlive, new Set(deps.clusters));
  for (const { kept, why } of left) deps.log(`not adopting the boot of ${kept.deployment} (${kept.boot}): ${why}; launcher down ${kept.deployment} removes it`);
  return adopt.flatMap((kept) => {
    // Of two daemons started at once, one takes it.
    if (!deps.store.takeBootInProgress(kept.boot, kept, here)) return [];
    try {
      const entry = deps.registry.start({ deployment: kept.deployment, cluster: kept.cluster, ...(kept.lane === undefined ? {} : { lane: kept.lane }) }, (emit, signal, detach) => adopted(kept, deps, emit, signal, detach));
      deps.log(`adopted the boot of ${kept.deployment} (${kept.boot}) left by launcher serve pid ${kept.pid}: watching it again`);
      handOver(kept, entry, deps);
      return [entry];
    } catch (e) {
      deps.log(`not adopting the boot of ${kept.deployment} (${kept.boot}): ${(e as Error).message}`);
      return [];
    }
  });
}

/** An adopted boot that is a restart (its row still open) goes to the supervisor as one under way, with how it ends. */
function handOver(kept: BootInProgress, entry: BootEntry, deps: AdoptDeps): void {
  const row = deps.store.restarts(kept.deployment, 20).find((r) => r.cluster === kept.cluster && r.outcome === "restarting");
  const decoded = decodeSavedPlan(kept.plan);
  if (row === undefined || !decoded.ok || deps.restartAdopted === undefined) return;
  const failure: Failure = {
    kind: (FAILURE_KINDS as readonly string[]).includes(row.reason) ? (row.reason as Failure["kind"]) : "rank-exited",
    message: row.message,
    ...(row.rank === undefined ? {} : { rank: row.rank }),
    ...(row.node === undefined ? {} : { node: row.node }),
  };
  const ended = entry.ended.then((e): AdoptedEnd => ({
    ok: e.type === "result",
    cancelled: entry.signal.aborted,
    left: entry.detachSignal.aborted,
    ...(e.type === "error" ? { error: decodeError(e.error).message } : {}),
  }));
  deps.restartAdopted(decoded.plan, row.attempt, failure, ended);
}

/** One adopted boot, watched to its end (or rolled back at once when it can never become ready). */
async function adopted(kept: BootInProgress, deps: AdoptDeps, emit: (e: UpEvent) => void, signal: AbortSignal, detach: AbortSignal): Promise<UpOutcome> {
  const { store, now } = deps;
  const at = (): string => now().toISOString();
  const say = (text: string): void => emit({ type: "say", text, t: Date.now() });
  say(`launcher: the daemon that started this boot of ${kept.deployment} (${kept.boot}, at ${kept.started_at}) stopped; this one watches it again from its containers' logs`);
  const release: (() => void | Promise<void>)[] = [];
  try {
    const session = await deps.session(kept.cluster);
    if (session === undefined) throw new UserError(`cluster ${kept.cluster} is not one this daemon watches`, `launcher down ${kept.deployment} removes the boot`);
    const decoded = decodeSavedPlan(kept.plan);
    if (!decoded.ok) return await abandon(kept, session, deps, `its kept plan cannot be read (${decoded.problem})`);
    const plan = decoded.plan;
    // The same locks as the `up` it came from: no `up` of this name or lane on this machine meanwhile.
    try {
      release.push(holdOrBusy(store, [deploymentKey(plan.cluster, plan.deployment), ...(plan.lane === undefined ? [] : [laneKey(plan.lane)])], `launcher serve (adopted boot of ${plan.deployment})`, now));
    } catch (e) {
      // Held by a live process: it is not this boot's (its daemon is dead); watching goes on regardless.
      say(`launcher: ${(e as Error).message}`);
    }
    const found = foundOf(plan, kept.boot, await listNodes(session, new Set(plan.nodes.map((n) => n.node))));
    if (found.kind === "gone") return await abandon(kept, session, deps, "none of its containers is left (its daemon stopped before they started, or they were removed)");
    if (found.kind === "partial") return await abandon(kept, session, deps, `its daemon stopped before it started ${found.missing.join(", ")}, so it can never serve`);
    const progress = progressEvents(emit, Date.now);
    // The nodes' claims, as the `up` it came from held them (src/claims/claims.ts): until it ends,
    // an `up` from any machine is told these nodes are busy. The dead daemon's own claim is taken
    // over at once (its pid no longer runs on this machine). A claim lost later stops the watch and
    // rolls back, as it stops `up`'s.
    const claimLost = new AbortController();
    try {
      const claims = await claimPlanNodes(session, plan, {
        command: `launcher serve (adopted boot of ${plan.deployment})`,
        leaseMs: DEFAULT_LEASE_MS,
        now,
        note: (text) => progress.note(text),
        onLost: (message) => {
          progress.note(message);
          claimLost.abort(new Error(message));
        },
      });
      release.push(() => claims.release());
    } catch (e) {
      // Busy (held by a live launcher) or a node that does not answer: the boot's containers run
      // there whatever the claim says, and the watch finds out what a node that is gone means.
      say(`launcher: ${(e as Error).message.split("\n")[0] ?? ""}; watching it without that claim`);
    }
    const result = await recordedWatch(kept, plan, session, { timeoutMs: timeLeft(kept.deadline_at, now()), signal: AbortSignal.any([signal, claimLost.signal]), detach, progress }, store, now);
    const lane = plan.lane;
    if (lane !== undefined) {
      // The rest of its lane swap (src/lanes/lane.ts upInLane): the lane serves it; a swap beside
      // the old deployment (disjoint nodes) drains and stops the old one now.
      store.setLane(serving(lane, plan.cluster, servedOf(plan), at()));
      const swap = runningSwap(store, lane, plan.deployment);
      const replaced = new Set(swap?.mode === "disjoint" ? (swap.from_deployment?.split(",") ?? []) : []);
      if (replaced.size > 0) {
        progress.note(`lane ${lane} now serves ${plan.deployment}`);
        const { deployments } = await clusterStatus(session, now());
        await stopReplacedIn(session, deployments.filter((d) => replaced.has(d.deployment) && d.lane === lane), { lane, store, now, drainMs: DEFAULTS.drain.ms, signal, progress, cluster: plan.cluster });
      }
      if (swap !== undefined) store.endSwap(swap.id, "ok", at());
    }
    store.endOpenRestarts(plan.cluster, plan.deployment, "ready", at());
    return { ...result, deployment: plan.deployment };
  } catch (e) {
    if (e instanceof Detached) throw e;
    const message = e instanceof Error ? e.message : String(e);
    store.endOpenRestarts(kept.cluster, kept.deployment, "failed", at(), message);
    if (kept.lane !== undefined) {
      const swap = runningSwap(store, kept.lane, kept.deployment);
      if (swap !== undefined) store.endSwap(swap.id, signal.aborted ? "interrupted" : "failed", at(), message);
      const next = afterFailedAdoptedBoot(store.lane(kept.lane), kept.deployment, at());
      if (next !== undefined) store.setLane(next);
    }
    throw e;
  } finally {
    for (const r of release.reverse()) await r();
  }
}

/** The lane swap, still running, that was booting `deployment` into `lane`. */
const runningSwap = (store: StateStore, lane: string, deployment: string): SwapRecord | undefined => store.swaps(lane, 20).find((s) => s.to_deployment === deployment && s.outcome === "running");

/**
 * A kept boot that cannot become ready: whatever of it runs is removed on every node, its history
 * row ends failed, its row of boots in progress goes; the error says why and what was removed.
 */
async function abandon(kept: BootInProgress, session: ClusterSession, deps: AdoptDeps, why: string): Promise<never> {
  const removed = await removeContainers(session, createdBy(kept.boot), seconds(DEFAULTS.rollbackGrace));
  const error = new RemoteError(
    "launcher",
    `boot of ${kept.deployment} failed: ${why}`,
    formatRemoval(removed, `launcher down deployment/${kept.deployment}`, "summary")
      .map((l, i) => (i === 0 ? `rolled back: ${l}` : l))
      .join("\n"),
  );
  const at = deps.now().toISOString();
  if (kept.history_id !== undefined) deps.store.endBoot(kept.history_id, "failed", at, { node: error.node, error: error.message });
  deps.store.endBootInProgress(kept.boot);
  throw error;
}
