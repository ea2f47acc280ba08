import type { ClusterNode } from "../cluster/cluster.js";
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
 * of their ends: two nodes' ends reach launcher in no certain order, and their clocks differ. Next
 * a rank known to have died by itself without a word (`silent`), before the peers that lost it. The
 * rest (a rank that only lost a peer, one that died without a word, such as to the kernel's OOM
 * killer, one whose log was not read, one launcher stopped itself) go by time, the earliest first,
 * when both have one, else by `order` (the order the failures were seen, or the rank): a silent
 * death comes before the peers that lost it, and a rank launcher stopped after the others ended.
 */
export interface Suspect {
  /** Its log names a cause that is not only a lost peer. */
  readonly ownCause: boolean;
  /**
   * It is known to have ended by itself (the death that was heard first, before launcher stopped
   * anything) and its log, read, names no cause at all: killed without a word (the kernel's OOM
   * killer, a kill -9). A rank that only lost a peer comes after it whatever their ends' times say:
   * the two ends are moments apart, and each is stamped when its node's containerd reaped the
   * process, which a busy node does late.
   */
  readonly silent?: boolean;
  /** When it failed (ms since the epoch), where known. */
  readonly atMs?: number;
  readonly order: number;
}

export function blameOrder(a: Suspect, b: Suspect): number {
  const own = Number(b.ownCause) - Number(a.ownCause);
  if (own !== 0) return own;
  const silent = Number(b.silent === true) - Number(a.silent === true);
  if (silent !== 0) return silent;
  if (a.atMs !== undefined && b.atMs !== undefined && a.atMs !== b.atMs) return a.atMs - b.atMs;
  return a.order < b.order ? -1 : a.order > b.order ? 1 : 0;
}

/** The one to blame of `all` (undefined when there is none), each seen through `view`. */
export function culprit<T>(all: readonly T[], view: (t: T) => Suspect): T | undefined {
  return [...all].sort((a, b) => blameOrder(view(a), view(b)))[0];
}

/**
 * The node that a blamed rank's cause names as the peer that died (BootState.peerAddress: Ray's
 * ActorDiedError `ip:`, for one), when that is another node of the boot: the failure is that node's,
 * and the blamed rank only heard of it. Each node is known by its addresses (`addressesOf`); one
 * whose addresses do not include it, or the blamed rank itself, is never named.
 */
export function peerNamed<T>(all: readonly T[], blamed: T | undefined, state: BootState | undefined, addressesOf: (t: T) => readonly (string | undefined)[]): T | undefined {
  const address = state?.causeIsPeerLoss === true ? state.peerAddress : undefined;
  if (address === undefined) return undefined;
  return all.find((t) => t !== blamed && addressesOf(t).includes(address));
}

/** Every address an engine may name a cluster node by: its fabric IP (what Ray and NCCL use), then how launcher reaches it. */
export const nodeAddresses = (n: ClusterNode | undefined): readonly (string | undefined)[] => (n === undefined ? [] : [n.fabric_ip, n.address_ip, n.address, n.host]);

/** A rank's log names a cause of its own: one that is not only a lost peer. */
export const ownCause = (s: BootState | undefined): boolean => s?.cause !== undefined && s.causeIsPeerLoss !== true;

type Progress = readonly [number, number];

/** How far a rank's own log says it got: its phase's place in the engine's boot, then whether it reached the rendezvous. */
function progress(adapter: EngineAdapter, s: BootState): Progress {
  const phases = [...new Set(adapter.bootPhases.map((p) => p.phase))];
  return [phases.indexOf(s.phase), s.atRendezvous === true ? 1 : 0];
}

const cmp = (a: Progress, b: Progress): number => a[0] - b[0] || a[1] - b[1];
const least = (all: readonly Progress[]): Progress | undefined => [...all].sort(cmp)[0];

/**
 * How far each rank counts as having got. The ranks that reached the rendezvous go on together
 * from there (every later step of the boot waits for all of them), and a joined rank's own log may
 * say no more: on Ray, vLLM's worker-side lines are printed through the head (Ray actors log to the
 * driver), so a worker's container log stops at `ray start`. So each rank at the rendezvous counts
 * as far as the furthest of them; its own log is not read as being behind.
 */
function standings(adapter: EngineAdapter, ranks: readonly RankBoot[]): Map<RankBoot, Progress> {
  const own = new Map(ranks.map((r) => [r, progress(adapter, r.state)] as const));
  const joined = ranks.filter((r) => r.state.atRendezvous === true).map((r) => own.get(r) as Progress);
  const furthest = [...joined].sort(cmp).at(-1);
  if (furthest === undefined) return own;
  return new Map(ranks.map((r) => [r, r.state.atRendezvous === true ? furthest : (own.get(r) as Progress)] as const));
}

/**
 * The rank that holds a boot up when it times out: the one that got least far (as standings
 * counts it). A rank waiting at the rendezvous waits for the others, so a worker that never got
 * there is behind a head that did, although both are "loading". Among equals the lowest rank
 * (the head first), whose log says the most about the whole boot.
 */
export function rankBehind(adapter: EngineAdapter, ranks: readonly RankBoot[]): RankBoot | undefined {
  const at = standings(adapter, ranks);
  const sorted = [...ranks].sort((a, b) => cmp(at.get(a) as Progress, at.get(b) as Progress) || a.rank - b.rank);
  return sorted[0];
}

/** Where a rank stands, as its log says, and when it counts further than that (standings), that it joined. */
function whereOf(adapter: EngineAdapter, r: RankBoot, standing: Progress): string {
  if (r.state.atRendezvous !== true) return `${r.node} ${r.state.phase}`;
  if (cmp(progress(adapter, r.state), standing) < 0) return `${r.node} joined at the rendezvous, its own log no further than ${r.state.phase}`;
  return `${r.node} ${r.state.phase} at the rendezvous`;
}

/**
 * The rank a boot that timed out is blamed on, and what to say: one rule with the failures above.
 *
 * A rank never joined the others only when one waits at the rendezvous and its own log is short of
 * the point where the least far of the waiting ranks got there: short of that phase, or in it
 * without a rendezvous line. One that got further without printing such a line (its engine prints
 * none there, or a build logs it below INFO) is not said to be missing. Of several missing, the one
 * that got least far. Without one, the rank that got least far (rankBehind), and only the ranks
 * that really got further are said to.
 */
export function timeoutBlame(adapter: EngineAdapter, ranks: readonly RankBoot[], seconds: number): { readonly blamed: RankBoot; readonly message: string } | undefined {
  const waiting = ranks.filter((r) => r.state.atRendezvous === true);
  const point = least(waiting.map((r) => progress(adapter, r.state)));
  const absent = point === undefined ? [] : ranks.filter((r) => cmp(progress(adapter, r.state), point) < 0);
  if (absent.length > 0) {
    const blamed = rankBehind(adapter, absent) as RankBoot;
    const also = absent.filter((r) => r !== blamed).map((r) => r.node);
    const message = `never joined the other ranks: timed out after ${seconds} s (phase ${blamed.state.phase}) while ${waiting.map((r) => r.node).join(", ")} waited at the rendezvous${also.length === 0 ? "" : `; ${also.join(", ")} never joined either`}`;
    return { blamed, message };
  }
  const blamed = rankBehind(adapter, ranks);
  if (blamed === undefined) return undefined;
  const standing = standings(adapter, ranks);
  const at = standing.get(blamed) as Progress;
  const others = ranks.filter((r) => r !== blamed);
  const where = (r: RankBoot): string => whereOf(adapter, r, standing.get(r) as Progress);
  const further = others.filter((r) => cmp(standing.get(r) as Progress, at) > 0).map(where);
  const level = others.filter((r) => cmp(standing.get(r) as Progress, at) <= 0).map(where);
  const message = [
    `timed out after ${seconds} s (phase ${blamed.state.phase})`,
    ...(further.length === 0 ? [] : [`the other ranks got further (${further.join(", ")})`]),
    ...(level.length === 0 ? [] : [`${further.length === 0 ? "the other ranks" : "the rest"} got no further (${level.join(", ")})`]),
  ].join("; ");
  return { blamed, message };
}
