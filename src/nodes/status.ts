import type { EngineAdapter } from "../engine/adapter.js";
import { advanceBoot, INITIAL_BOOT, splitTimestamp } from "../engine/boot-log.js";
import { adapterOf } from "../engine/registry.js";
import { CONTAINER_STATES, containerName, encodeRestartPolicy, type DeploymentState, type DeploymentStatus, type RankStatus, type StatusLine, type StatusPhase } from "../contract/deployment.js";
import { listNodes, type Labelled } from "./labels.js";
import type { ClusterSession } from "./session.js";
import type { StoredWedge } from "../store/store.js";
import { connect } from "node:net";
import type { PortAnswer } from "../contract/deployment.js";

export type { DeploymentStatus, RankStatus } from "../contract/deployment.js";

const STARTING_WINDOW_MS = 60_000;

/** One deployment's ranks as the labels show them, before anyone asks its head. */
export interface RankView {
  readonly ranks: readonly RankStatus[];
  readonly missing: readonly string[];
  /** Nodes of the deployment that could not be read. */
  readonly unreachable: readonly string[];
  /** Ranks not created yet beside fresh running ones: `up` is still starting them. */
  readonly starting: boolean;
}

/** What the head says: /health answers 200, else the boot phase its log shows (if it can be read). */
export interface HeadProbe {
  readonly healthy: boolean;
  readonly phase?: StatusPhase;
  /** The head's log has a line that ends the engine (its adapter's fatalPatterns): its cause, as the log says it. */
  readonly fault?: string;
}

/**
 * Every rank of one deployment from its containers' labels and from which nodes could be read. A
 * rank whose node could not be read is "unreachable", never "no container": only a node that
 * answered can say a container is not there.
 */
export function rankView(members: readonly Labelled[], unreachableNodes: ReadonlySet<string>, now: Date): RankView {
  const first = members[0]?.labels;
  const nnodes = first?.nnodes ?? members.length;
  const nodes = members.find((m) => m.labels.nodes !== undefined)?.labels.nodes;
  const ranks: RankStatus[] = members.map(({ node, c, labels }) => ({
    rank: labels.rank,
    node,
    container: c.name,
    // Docker's API knows only these states; anything else does not run either.
    state: CONTAINER_STATES.find((s) => s === c.state) ?? "dead",
    ...(c.running ? {} : { exit_code: c.exitCode, finished_at: c.finishedAt }),
    started_at: c.startedAt,
  }));
  const missing: string[] = [];
  const lost = new Set<string>();
  let notCreated = 0;
  for (let r = 0; r < nnodes; r++) {
    const rank = ranks.find((x) => x.rank === r);
    // Containers started before the nodes label: any unreadable node may hold a missing rank.
    const where = nodes?.[r];
    const onLostNode = where === undefined ? unreachableNodes.size > 0 : unreachableNodes.has(where);
    if (rank === undefined && onLostNode) {
      const node = where ?? [...unreachableNodes].sort().join("|");
      for (const n of where === undefined ? unreachableNodes : [where]) lost.add(n);
      ranks.push({ rank: r, node, container: first === undefined ? "?" : containerName(first.deployment, r), state: "unreachable" });
    } else if (rank === undefined) {
      missing.push(`rank ${r} (no container)`);
      notCreated++;
    } else if (rank.state !== "running") missing.push(`rank ${r} on ${rank.node} (${rank.state}${rank.exit_code === undefined ? "" : `, exit ${rank.exit_code}`})`);
  }
  ranks.sort((a, b) => a.rank - b.rank);
  const running = ranks.filter((r) => r.state === "running");
  // `up` may create the containers in steps (the plan's start order): ranks not created yet
  // beside fresh running ones are a start in progress, not a loss.
  const starting =
    notCreated > 0 && notCreated === missing.length && running.length > 0 && running.every((r) => now.getTime() - Date.parse(r.started_at ?? "") < STARTING_WINDOW_MS);
  return { ranks, missing, unreachable: [...lost].sort(), starting };
}

/** Does judging this deployment need its head asked? Only when no rank is known to be gone. */
export const needsHeadProbe = (v: RankView): boolean => !v.starting && v.missing.length === 0;

/**
 * The deployment's status, from its ranks and (when asked) its head. A multi-node engine cannot
 * serve with a rank gone, however many others still run; one whose head answers /health serves,
 * even when a node of it cannot be read over SSH; one that neither can be read nor answers
 * cannot be judged.
 */
export function judge(v: RankView, head: HeadProbe | undefined): { status: DeploymentState; phase: StatusPhase; fault?: string } {
  if (v.starting) return { status: "booting", phase: "starting" };
  if (v.missing.length > 0) return { status: "degraded", phase: "-" };
  if (head?.healthy === true) return { status: "serving", phase: "serving" };
  if (v.unreachable.length > 0) return { status: "unreachable", phase: "unknown" };
  // Every rank runs, but the head's own log says the engine ended (its lines come before its process
  // tree exits, and a process may stay up past such a line): it will never serve, so it is no boot
  // in progress.
  if (head?.fault !== undefined) return { status: "degraded", phase: "-", fault: head.fault };
  // Its log says it served, yet /health does not answer: an engine that stopped answering (SGLang's
  // HTTP over a hung scheduler answers /health 503 after its wait), not a boot in progress.
  if (head?.phase === "serving") return { status: "degraded", phase: "-" };
  return { status: "booting", phase: head?.phase ?? "unknown" };
}

/** A fault as status carries it: container output, held to one short line. */
const MAX_FAULT = 300;
const faultText = (text: string): string => {
  const line = text.replace(/[\x00-\x1f\x7f]+/g, " ").trim();
  return line.length > MAX_FAULT ? `${line.slice(0, MAX_FAULT)}...` : line;
};

async function probeHead(session: ClusterSession, v: RankView, endpoint: string, engine: EngineAdapter | undefined): Promise<HeadProbe> {
  // An engine this launcher has no adapter for (a newer launcher's container) cannot be judged.
  if (engine === undefined) return { healthy: false };
  const answers = (): Promise<boolean> =>
    fetch(`${endpoint}${engine.healthPath}`, { signal: AbortSignal.timeout(2000) }).then(
      (res) => res.status === 200,
      () => false,
    );
  // Not answering yet: read the boot phase from the log.
  if (await answers()) return { healthy: true };
  const head = v.ranks.find((r) => r.rank === 0);
  const docker = head === undefined || head.state === "unreachable" ? undefined : session.docker.get(head.node);
  if (head === undefined || docker === undefined) return { healthy: false };
  let state = INITIAL_BOOT;
  try {
    for await (const line of docker.logs(head.container, { tail: 400 })) state = advanceBoot(engine, state, splitTimestamp(line).text);
  } catch {
    return { healthy: false };
  }
  const fault = state.fatal === undefined ? undefined : faultText(state.cause ?? state.fatal);
  // A log that says it serves, read after /health failed, may be a boot that became ready between
  // the two reads (its API listens once its ready line is written): ask /health once more, so that
  // only an engine that still does not answer is judged degraded (see judge).
  if (fault === undefined && state.phase === "serving" && (await answers())) return { healthy: true };
  return { healthy: false, phase: state.phase, ...(fault === undefined ? {} : { fault }) };
}

/** Every deployment found on the nodes; the containers' labels are the source of truth. */
export async function clusterStatus(session: ClusterSession, now: Date): Promise<StatusLine & { readonly reasons: ReadonlyMap<string, string>; readonly problems: readonly string[] }> {
  const listing = await listNodes(session);
  const reasons = new Map<string, string>();
  const problems: string[] = [];
  const groups = new Map<string, Labelled[]>();
  for (const l of listing) {
    if (!l.reachable) {
      reasons.set(l.node, l.reason);
      continue;
    }
    problems.push(...l.undecodable);
    // One group per name and launch: a container that copies a deployment's labels but not its
    // launch (launcher.boot) is shown beside it, never counted as one of its ranks.
    for (const c of l.containers) {
      const k = `${c.labels.deployment}\u0000${c.labels.boot ?? ""}`;
      (groups.get(k) ?? groups.set(k, []).get(k))?.push(c);
    }
  }
  const unreachableNodes = new Set(reasons.keys());
  const ports = portAnswers(session, unreachableNodes);
  const deployments = await Promise.all(
    [...groups].sort(([a], [b]) => a.localeCompare(b)).map(async ([, members]): Promise<DeploymentStatus> => {
      const first = (members[0] as Labelled).labels;
      const deployment = first.deployment;
      const view = rankView(members, unreachableNodes, now);
      const { status, phase, fault } = judge(view, needsHeadProbe(view) ? await probeHead(session, view, first.endpoint, adapterOf(first.engine)) : undefined);
      const startedTimes = view.ranks.filter((r) => r.state === "running").map((r) => Date.parse(r.started_at ?? "")).filter((t) => !Number.isNaN(t));
      return {
        deployment,
        recipe: first.recipe,
        recipe_hash: first.recipe_hash,
        ...(first.engine === undefined ? {} : { engine: first.engine }),
        ...(first.lane === undefined ? {} : { lane: first.lane }),
        ...(first.restart === undefined ? {} : { restart: encodeRestartPolicy(first.restart) }),
        ...(first.restarts === undefined ? {} : { restarts: first.restarts }),
        ...(first.boot === undefined ? {} : { boot: first.boot }),
        served_model: first.served_model,
        endpoint: first.endpoint,
        status,
        phase,
        ...(fault === undefined ? {} : { fault }),
        ...(startedTimes.length === 0 ? {} : { uptime_seconds: Math.round((now.getTime() - Math.min(...startedTimes)) / 1000) }),
        missing: view.missing,
        unreachable: view.unreachable,
        ranks: view.ranks,
      };
    }),
  );
  const sshPort = await ports;
  return { deployments, unreachable: [...unreachableNodes].sort(), at: now.toISOString(), ...(unreachableNodes.size === 0 ? {} : { ssh_port: sshPort }), reasons, problems };
}

/** How long a node SSH could not read gets to answer a TCP connection at its SSH port. */
const PORT_PROBE_MS = 2000;

/**
 * Whether the SSH port of each unreachable node answers a TCP connection, within a bound: a
 * connection made or refused (a RST: the kernel lives) answers; a timeout or no route is silence.
 * The address is the one HTTP uses (ssh -G's hostname, src/nodes/session.ts) and the cluster
 * file's port, else 22: a node reached through a ProxyJump or another port in ~/.ssh/config is
 * probed where it may not listen, and counts as silent.
 */
function portAnswers(session: ClusterSession, nodes: ReadonlySet<string>): Promise<Record<string, PortAnswer>> {
  const of = session.cluster.nodes.filter((n) => nodes.has(n.name));
  return Promise.all(of.map(async (n) => [n.name, await probePort(n.address ?? n.host, n.port ?? 22)] as const)).then((all) => Object.fromEntries(all));
}

/**
 * One TCP connect, bounded by `ms`: net.connect's `timeout` option sets the socket's idle timeout
 * before it connects (Node's net docs, socket.connect options), so it bounds the handshake too.
 */
export function probePort(host: string, port: number, ms = PORT_PROBE_MS): Promise<PortAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: ms });
    const done = (a: PortAnswer): void => {
      socket.destroy();
      resolve(a);
    };
    socket.once("connect", () => done("answers"));
    socket.once("timeout", () => done("silent"));
    // Node's net errors carry the errno name (ECONNREFUSED: the peer's kernel sent a RST).
    socket.once("error", (e: NodeJS.ErrnoException) => done(e.code === "ECONNREFUSED" ? "answers" : "silent"));
  });
}

/**
 * The wedges the daemon recorded (src/supervise/generation-watch.ts) that still hold for what the
 * nodes show: the deployment serves (its /health answers) in the launch that was found wedged. A
 * record of an older launch, or of one no longer serving, says nothing of what runs now.
 */
export function currentWedges(deployments: readonly Pick<DeploymentStatus, "deployment" | "status" | "boot">[], stored: ReadonlyMap<string, StoredWedge>): Map<string, StoredWedge> {
  return new Map(
    deployments.flatMap((d) => {
      const w = stored.get(d.deployment);
      return w !== undefined && d.status === "serving" && w.boot === (d.boot ?? "") ? [[d.deployment, w] as const] : [];
    }),
  );
}
