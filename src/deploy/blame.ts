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
 * shutdown or crash?" (the adapter's peerLossPatterns). So a rank whose log names a cause of its own
 * (an exception, a fatal line that is not a lost peer) comes before every other, whatever the order
 * of their ends: two nodes' ends reach launcher in no certain order, and their clocks differ. The
 * rest (a rank that only lost a peer, one that died without a word, such as to the kernel's OOM
 * killer, one whose log was not read, one launcher stopped itself) go by time, the earliest first,
 * when both have one, else by `order` (the order the failures were seen, or the rank): a silent
 * death comes before the peers that lost it, and a rank launcher stopped after the others ended.
 */
export interface Suspect {
  /** Its log names a cause that is not only a lost peer. */
  readonly ownCause: boolean;
  /** When it failed (ms since the epoch), where known. */
  readonly atMs?: number;
  readonly order: number;
}

export function blameOrder(a: Suspect, b: Suspect): number {
  const own = Number(b.ownCause) - Number(a.ownCause);
  if (own !== 0) return own;
  if (a.atMs !== undefined && b.atMs !== undefined && a.atMs !== b.atMs) return a.atMs - b.atMs;
  return a.order < b.order ? -1 : a.order > b.order ? 1 : 0;
}

/** The one to blame of `all` (undefined when there is none), each seen through `view`. */
export function culprit<T>(all: readonly T[], view: (t: T) => Suspect): T | undefined {
  return [...all].sort((a, b) => blameOrder(view(a), view(b)))[0];
}

/** A rank's log names a cause of its own: one that is not only a lost peer. */
export const ownCause = (s: BootState | undefined): boolean => s?.cause !== undefined && s.causeIsPeerLoss !== true;

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

const whereOf = (r: RankBoot): string => `${r.node} ${r.state.phase}${r.state.atRendezvous === true ? " at the rendezvous" : ""}`;
const cmp = (a: [number, number], b: [number, number]): number => a[0] - b[0] || a[1] - b[1];

/**
 * The rank a boot that timed out is blamed on, and what to say: one rule with the failures above.
 *
 * A rank that never reached the rendezvous while another waits there never joined, whatever the
 * phase of either: the waiting ranks cannot go on without it (a Ray worker that never registered
 * with the head's GCS, an mp worker that never connected to its master). Of several such, the one
 * that got least far. Without one, the rank that got least far (rankBehind), and only the ranks
 * that really got further are said to.
 */
export function timeoutBlame(adapter: EngineAdapter, ranks: readonly RankBoot[], seconds: number): { readonly blamed: RankBoot; readonly message: string } | undefined {
  const waiting = ranks.filter((r) => r.state.atRendezvous === true);
  const absent = ranks.filter((r) => r.state.atRendezvous !== true);
  if (waiting.length > 0 && absent.length > 0) {
    const blamed = rankBehind(adapter, absent) as RankBoot;
    const also = absent.filter((r) => r !== blamed).map((r) => r.node);
    const message = `never joined the other ranks: timed out after ${seconds} s (phase ${blamed.state.phase}) while ${waiting.map((r) => r.node).join(", ")} waited at the rendezvous${also.length === 0 ? "" : `; ${also.join(", ")} never joined either`}`;
    return { blamed, message };
  }
  const blamed = rankBehind(adapter, ranks);
  if (blamed === undefined) return undefined;
  const at = progress(adapter, blamed.state);
  const others = ranks.filter((r) => r !== blamed);
  const further = others.filter((r) => cmp(progress(adapter, r.state), at) > 0).map(whereOf);
  const level = others.filter((r) => cmp(progress(adapter, r.state), at) <= 0).map(whereOf);
  const message = [
    `timed out after ${seconds} s (phase ${blamed.state.phase})`,
    ...(further.length === 0 ? [] : [`the other ranks got further (${further.join(", ")})`]),
    ...(level.length === 0 ? [] : [`${further.length === 0 ? "the other ranks" : "the rest"} got no further (${level.join(", ")})`]),
  ].join("; ");
  return { blamed, message };
}
