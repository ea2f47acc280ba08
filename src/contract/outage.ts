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

const gib = (kib: number): string => (kib / 1024 / 1024).toFixed(1);

/** "n2 since T (vanished), last seen with X GiB available of Y GiB (at T0)". */
export function outageWords(o: OutageNote): string {
  const memory = o.memory === undefined ? "no memory sample known" : `last seen with ${gib(o.memory.availableKiB)} GiB available of ${gib(o.memory.totalKiB)} GiB (at ${o.memory.at})`;
  return `${o.node} since ${o.since} (${o.kind}), ${memory}`;
}

/**
 * What the node's own guard (src/memory/node-guard.ts) said of an outage, read once the node
 * answered again: "stalled", its guard did not run for gap_ms (the node itself froze); "ran", its
 * guard kept beating through it (the node ran; its link, or its sshd, was down).
 */
export type OutageCause = { readonly kind: "stalled"; readonly gap_ms: number; readonly at: string } | { readonly kind: "ran"; readonly beat_at: string };

/** The words of a cause, or of none known. */
export function outageCauseWords(c: OutageCause | undefined): string {
  if (c === undefined) return "its guard said nothing of it (none ran there, or it could not be read)";
  return c.kind === "stalled"
    ? `the node itself stalled: its guard did not run for ${Math.round(c.gap_ms / 1000)} s (until ${c.at})`
    : `its guard kept beating (last at ${c.beat_at}): the node ran, its link was down`;
}
