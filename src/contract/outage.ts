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
