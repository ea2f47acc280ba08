import { gibText } from "./units.js";

/**
 * A node that stopped answering while launcher's ranks ran on it (src/nodes/outage.ts judges):
 * "frozen" when something of it still answers, "vanished" when nothing does.
 */
export const OUTAGE_KINDS = ["frozen", "vanished"] as const;
export type OutageKind = (typeof OUTAGE_KINDS)[number];

/** What the gateway, status and the daemon's log say of one: where, since when, and its last memory. */
export interface OutageNote {
  readonly node: string;
  readonly kind: OutageKind;
  /** ISO, from the daemon's clock: the first poll that could not read it. */
  readonly since: string;
  /** Its last memory sample before it, KiB, with when it was taken. */
  readonly memory?: { readonly availableKiB: number; readonly totalKiB: number; readonly at: string };
}


/** "n2 since T (vanished), last seen with X GiB available of Y GiB (at T0)". */
export function outageWords(o: OutageNote): string {
  const memory = o.memory === undefined ? "no memory sample known" : `last seen with ${gibText(o.memory.availableKiB)} GiB available of ${gibText(o.memory.totalKiB)} GiB (at ${o.memory.at})`;
  return `${o.node} since ${o.since} (${o.kind}), ${memory}`;
}

/**
 * What the node's own guard (src/memory/node-guard.ts) said of an outage, read once the node
 * answered again: "stalled", its guard did not run for gap_ms, about the whole outage (the node
 * itself froze); "paused", its guard did not run for gap_ms, only part of it; "ran", its guard kept
 * beating through it (the node ran).
 */
export type OutageCause =
  | { readonly kind: "stalled"; readonly gap_ms: number; readonly at: string }
  | { readonly kind: "paused"; readonly gap_ms: number; readonly at: string }
  | { readonly kind: "ran"; readonly beat_at: string };

/**
 * What a node that ran says of its outage's kind: frozen, its SSH port answered TCP (its link was
 * up) but SSH did not; vanished, nothing answered (its link, or its sshd and all, was down).
 */
const RAN_WORDS: Readonly<Record<OutageKind, string>> = {
  frozen: "the node ran; SSH did not answer",
  vanished: "the node ran, its link was down",
};

/** The words of a cause of an outage of `kind`, or of none known. */
export function outageCauseWords(c: OutageCause | undefined, kind: OutageKind): string {
  if (c === undefined) return "its guard said nothing of it (none ran there, or it could not be read)";
  const s = (ms: number): number => Math.round(ms / 1000);
  switch (c.kind) {
    case "stalled":
      return `the node itself stalled: its guard did not run for ${s(c.gap_ms)} s (until ${c.at})`;
    case "paused":
      return `its guard paused ${s(c.gap_ms)} s during it (until ${c.at}), less than the whole outage: the node did not stall throughout`;
    case "ran":
      return `its guard kept beating (last at ${c.beat_at}): ${RAN_WORDS[kind]}`;
  }
}
