import type { NodeFacts, NodeOutage } from "../nodes/outage.js";
import type { StateStore } from "../store/store.js";
import type { ClusterSession } from "../nodes/session.js";
import { outageCauseWords, type OutageCause } from "../contract/outage.js";
import { lookNodeGuards } from "../memory/node-guard-shell.js";
import { endedBefore, judgeOutage, OUTAGE_CLOCK_SLACK_MS, type NodeGuardHeartbeat } from "../memory/node-guard.js";
import type { GuardBeats } from "../supervise/node-guard-reader.js";
import { setTimeout as delay } from "node:timers/promises";
import type { OutageHooks } from "./discovery.js";

/**
 * A node's last memory sample before it stopped answering: the daemon's guard's (newest while it
 * watches a deployment there), else doctor's reading; undefined when neither was ever taken.
 */
export function lastMemory(store: Pick<StateStore, "watchedMemory" | "memory">, cluster: string, node: string): ReturnType<NodeFacts["memory"]> {
  const watched = store.watchedMemory(cluster).get(node);
  if (watched !== undefined) return { ...watched.sample, at: watched.at };
  const read = store.memory(cluster).get(node);
  return read === undefined ? undefined : { availableKiB: read.meminfo.availableKiB, totalKiB: read.meminfo.totalKiB, at: read.read_at };
}

/**
 * The node's last memory sample: its guard's newest heartbeat when that is newer than the
 * daemon's own sample (the heartbeat has no total: the daemon's sample's is kept); else the daemon's.
 */
export function newerMemory(last: ReturnType<NodeFacts["memory"]>, beat: NodeGuardHeartbeat | undefined): ReturnType<NodeFacts["memory"]> {
  if (last === undefined || beat === undefined || beat.atMs <= Date.parse(last.at)) return last;
  return { totalKiB: last.totalKiB, availableKiB: Math.min(beat.availableKiB, last.totalKiB), at: new Date(beat.atMs).toISOString() };
}

/** Where the daemon reads a node that came back: the cluster's session, and its log; `signal` (the daemon's stop) ends a read under way, and nothing of it is kept. */
export interface GuardLook {
  readonly session: (cluster: string) => Promise<ClusterSession> | undefined;
  readonly log: (line: string) => void;
  readonly signal?: AbortSignal;
}

/**
 * How far apart, and how many times in all, a node back is read while its guards have not run
 * since it came back, or it does not answer the read: a node that was stopped whole runs again
 * slowly, all its processes at once.
 */
const LOOK_AGAIN_MS = 1000;
export const OUTAGE_LOOKS = 8;

/**
 * What the node's own guards (of the deployments that ran there) say of its outage, read once it
 * answered again: one bounded command, read again (OUTAGE_LOOKS reads at most, LOOK_AGAIN_MS
 * apart) while it does not answer, or a guard there has not beaten since the node came back: a
 * guard that stalled with its node writes its stall at its first sample after it runs again, which
 * the poll that found the node back may precede. Undefined when none says anything or the node did
 * not answer.
 */
export async function outageCause(look: GuardLook, o: NodeOutage, endedAt: string, againMs = LOOK_AGAIN_MS): Promise<OutageCause | undefined> {
  const docker = (await look.session(o.cluster))?.docker.get(o.node);
  if (docker === undefined) return undefined;
  const since = Date.parse(o.since);
  const ended = Date.parse(endedAt);
  for (let n = 1; ; n++) {
    const looked = await lookNodeGuards(docker.transport, o.deployments.map((d) => d.deployment), look.signal);
    const guards = [...(looked?.values() ?? [])];
    const cause = judgeOutage(guards, since, ended);
    // Its guard started last, not an earlier one of the same name, is the one that may still beat.
    const behind = looked === undefined || guards.some((g) => g.heartbeat !== undefined && g.heartbeat.atMs < ended - OUTAGE_CLOCK_SLACK_MS && !endedBefore(g, Infinity));
    if (cause !== undefined || !behind || n >= OUTAGE_LOOKS) return cause;
    await delay(againMs, undefined, look.signal === undefined ? {} : { signal: look.signal });
  }
}

/**
 * The daemon's node outages kept in the store (migration 15): begun and ended as discovery finds
 * them; once a node answers again, its guard's word on it (stalled, or kept beating) is read,
 * said and kept with the outage (migration 16). `beats`: the guards' newest heartbeats the daemon
 * read (./supervision.ts), the node's last memory sample when newer than its own.
 */
export function outageHooksFor(store: StateStore, look?: GuardLook, beats?: Pick<GuardBeats, "of">): OutageHooks {
  const beat = (cluster: string, node: string): NodeGuardHeartbeat | undefined => beats?.of(cluster, node);
  return {
    facts: {
      memory: (cluster, node) => newerMemory(lastMemory(store, cluster, node), beat(cluster, node)),
      // The node's clock, set against the daemon's outage start: a beat counts as after it only past the clocks' slack.
      heartbeat: (cluster, node) => {
        const b = beat(cluster, node);
        return b === undefined ? undefined : new Date(b.atMs - OUTAGE_CLOCK_SLACK_MS);
      },
    },
    started: (o) => store.saveOutage(o),
    ended: (o, at) => {
      store.endOutage(o.cluster, o.node, o.kind, at);
      if (look === undefined) return;
      void outageCause(look, o, at)
        .catch(() => undefined)
        .then((cause) => {
          // The daemon stopped meanwhile: its store is closed, and a read cut short says nothing.
          if (look.signal?.aborted === true) return;
          if (cause !== undefined) store.saveOutageCause(o.cluster, o.node, o.since, cause);
          look.log(`+ node ${o.cluster}/${o.node} (${o.kind} since ${o.since}): ${outageCauseWords(cause, o.kind)}`);
        })
        .catch((e: unknown) => look.log(`+ node ${o.cluster}/${o.node}: its guard's word could not be kept (${(e as Error).message})`));
    },
  };
}
