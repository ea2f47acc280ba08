import type { EngineAdapter } from "../engine/adapter.js";
import type { BootState } from "../engine/boot-log.js";

export interface RankBoot {
  readonly node: string;
  readonly rank: number;
  readonly state: BootState;
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
