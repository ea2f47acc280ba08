import type { PortAnswer, StatusLine } from "../contract/deployment.js";
import type { OutageKind, OutageNote } from "../contract/outage.js";
import type { MemorySample } from "../memory/memory-watch.js";

/** The ranks of one deployment a node ran at the last poll that read it. */
export interface RanBefore {
  readonly deployment: string;
  readonly ranks: readonly number[];
}

/** A node that stopped answering while launcher's ranks ran on it: where, since when, its last memory, what ran there. */
export interface NodeOutage extends OutageNote {
  readonly cluster: string;
  /** What the last poll that read it saw run there. */
  readonly deployments: readonly RanBefore[];
}

/** What the daemon carries from poll to poll: the outages open now, and what each node last ran. */
export interface OutageTrack {
  readonly open: ReadonlyMap<string, NodeOutage>;
  readonly ran: ReadonlyMap<string, readonly RanBefore[]>;
}

export const NO_OUTAGES: OutageTrack = { open: new Map(), ran: new Map() };

/** What is known of a node beyond the poll: its last memory sample and its guard's last heartbeat. */
export interface NodeFacts {
  memory(cluster: string, node: string): (MemorySample & { readonly at: string }) | undefined;
  heartbeat(cluster: string, node: string): Date | undefined;
}

export const NO_FACTS: NodeFacts = { memory: () => undefined, heartbeat: () => undefined };

/**
 * What the control machine can tell apart of a node SSH gives up on (ssh_config(5): ConnectTimeout
 * bounds the TCP connect and the SSH handshake alike; ServerAliveInterval x ServerAliveCountMax
 * ends a session whose server went quiet): a node whose kernel still answers a TCP connection at
 * its SSH port, or whose own guard's heartbeat came after the outage began, lives but does not
 * serve SSH (userland stuck under memory pressure, sshd gone): frozen. One where nothing answers
 * (off, reset, its link or switch port dead, or a kernel hung whole) has vanished: a hard-frozen
 * kernel answers nothing either, and from here it cannot be told from a node that is gone.
 */
export function outageKind(port: PortAnswer | undefined, heartbeatAt: Date | undefined, since: Date): OutageKind {
  if (heartbeatAt !== undefined && heartbeatAt.getTime() >= since.getTime()) return "frozen";
  return port === "answers" ? "frozen" : "vanished";
}

/** What each node that answered runs, from its ranks in the poll. */
function ranOn(line: StatusLine): Map<string, RanBefore[]> {
  const by = new Map<string, Map<string, number[]>>();
  for (const d of line.deployments) {
    for (const r of d.ranks) {
      if (r.state !== "running") continue;
      const node = by.get(r.node) ?? by.set(r.node, new Map()).get(r.node);
      const ranks = node?.get(d.deployment) ?? [];
      node?.set(d.deployment, [...ranks, r.rank]);
    }
  }
  return new Map([...by].map(([node, ds]) => [node, [...ds].map(([deployment, ranks]) => ({ deployment, ranks: [...ranks].sort((a, b) => a - b) }))]));
}

export interface OutageStep {
  readonly track: OutageTrack;
  readonly started: readonly NodeOutage[];
  /** Outages whose node answered this poll, with when (the daemon's clock). */
  readonly ended: readonly { readonly outage: NodeOutage; readonly ended_at: string }[];
}

const keyOf = (cluster: string, node: string): string => `${cluster}/${node}`;

/**
 * One poll of a cluster, arrived at `now`: a node it could not read that ran ranks at the last poll
 * that read it begins an outage (one that ran nothing, or that no poll ever read, is only
 * unreachable); a node of an open outage that this poll read ends it. The poll that ends it read
 * the node's containers anew (src/nodes/status.ts clusterStatus lists every node on every poll),
 * so what it ran is this poll's picture, never the one from before the outage.
 */
export function stepOutages(track: OutageTrack, cluster: string, line: StatusLine, now: Date, facts: NodeFacts = NO_FACTS): OutageStep {
  const open = new Map(track.open);
  const ran = new Map(track.ran);
  const started: NodeOutage[] = [];
  const ended: { outage: NodeOutage; ended_at: string }[] = [];
  const unreachable = new Set(line.unreachable);
  for (const [k, o] of track.open) {
    if (o.cluster !== cluster || unreachable.has(o.node)) continue;
    open.delete(k);
    ended.push({ outage: o, ended_at: now.toISOString() });
  }
  const running = ranOn(line);
  for (const [k] of track.ran) if (k.startsWith(`${cluster}/`) && !unreachable.has(k.slice(cluster.length + 1))) ran.delete(k);
  for (const [node, ds] of running) if (!unreachable.has(node)) ran.set(keyOf(cluster, node), ds);
  for (const node of [...unreachable].sort()) {
    const k = keyOf(cluster, node);
    const was = open.get(k);
    if (was !== undefined) {
      // A frozen node may vanish while it lasts (stuck, then powered off or reset); a vanished
      // one is never called frozen after: one coming back answers TCP a poll before SSH does.
      const kind = outageKind(line.ssh_port?.[node], facts.heartbeat(cluster, node), new Date(was.since));
      if (kind === "vanished" && was.kind === "frozen") open.set(k, { ...was, kind });
      continue;
    }
    const before = ran.get(k) ?? [];
    if (before.length === 0) continue;
    const memory = facts.memory(cluster, node);
    const o: NodeOutage = { cluster, node, kind: outageKind(line.ssh_port?.[node], facts.heartbeat(cluster, node), now), since: now.toISOString(), deployments: before, ...(memory === undefined ? {} : { memory }) };
    open.set(k, o);
    started.push(o);
  }
  return { track: { open, ran }, started, ended };
}

/** "practice-2x rank 1, other rank 0": what ran on a node. */
export const ranText = (ds: readonly RanBefore[]): string => ds.map((d) => `${d.deployment} rank${d.ranks.length === 1 ? "" : "s"} ${d.ranks.join(", ")}`).join("; ");
