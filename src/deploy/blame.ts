import type { EngineAdapter } from "../engine/adapter.js";
import type { BootState } from "../engine/boot-log.js";

export interface RankBoot {
  readonly node: string;
  readonly rank: number;
  readonly state: BootState;
}

/**
 * Which of several failed ranks to blame: one rule for `up`'s rollback, the daemon's restart and
 * `launcher explain`, so that the three never name different nodes for the same boot.
 *
 * A lost peer makes the other ranks fail too, moments later: the head logs "Worker proc ... died
 * unexpectedly", a headless worker torch's "Connection was likely closed. Did the remote server
 * shutdown or crash?" (the adapter's peerLossPatterns). So a rank whose cause only says a peer died
 * comes after any rank with a cause of its own (or none: a rank killed without a word, such as by
 * the kernel's OOM killer, is what its peers lost), whatever the order of their ends, because two
 * nodes' ends reach launcher in no certain order and their clocks differ; then the earliest, by
 * time when both have one, else by `order` (the order the failures were seen, or the rank).
 */
export interface Suspect {
  /** Its cause only says a peer process died. */
  readonly peerLoss: boolean;
  /** When it failed (ms since the epoch), where known. */
  readonly atMs?: number;
  readonly order: number;
}

export function blameOrder(a: Suspect, b: Suspect): number {
  const lost = Number(a.peerLoss) - Number(b.peerLoss);
  if (lost !== 0) return lost;
  if (a.atMs !== undefined && b.atMs !== undefined && a.atMs !== b.atMs) return a.atMs - b.atMs;
  return a.order < b.order ? -1 : a.order > b.order ? 1 : 0;
}

/** The one to blame of `all` (undefined when there is none), each seen through `view`. */
export function culprit<T>(all: readonly T[], view: (t: T) => Suspect): T | undefined {
  return [...all].sort((a, b) => blameOrder(view(a), view(b)))[0];
}

/** How far a rank got: its phase's place in the engine's boot, then whether it reached the rendezvous. */
function progress(adapter: EngineAdapter, s: BootState): [number, number] {
  const phases = [...new Set(adapter.bootPhases.map((p) => p.phase))];
  return [phases.indexOf(s.phase), s.atRendezvous === true ? 1 : 0];
}

/**
 * The rank that holds a boot up when it times out: the one that got least far. A rank waiting at
 * the rendezvous waits for the others, so a worker that never got there is behind a head that
 * did, although both are "loading". Among equals the lowest rank (the head first), whose log says
 * the most about the whole boot.
 */
export function rankBehind(adapter: EngineAdapter, ranks: readonly RankBoot[]): RankBoot | undefined {
  let worst: RankBoot | undefined;
  let worstAt: [number, number] = [Infinity, Infinity];
  for (const r of [...ranks].sort((a, b) => a.rank - b.rank)) {
    const at = progress(adapter, r.state);
    if (at[0] < worstAt[0] || (at[0] === worstAt[0] && at[1] < worstAt[1])) {
      worst = r;
      worstAt = at;
    }
  }
  return worst;
}
