import { decodeDockerEvent, type Docker, type DockerEvent } from "../remote/docker.js";
import { DEPLOYMENT_LABEL, LABELS } from "../contract/deployment.js";
import type { ClusterSession } from "../nodes/session.js";
import { rankExited, type Failure } from "./supervise.js";

/**
 * A rank's death as its node's Docker says it the moment it happens, so that the supervisor need
 * not wait for the next status poll (2 s apart by default) to learn of it. The polls stay the
 * ground truth: a death seen here is a first sighting that a poll begun after it confirms
 * (src/supervise/supervise.ts), and a death this stream missed (its node's stream was down) is seen
 * by the polls as before.
 */

/** The container events that mean a rank stopped running: `die` follows every way a container ends (kill, oom, its process exiting). */
export const DEATH_ACTIONS = ["die"] as const;

export interface RankDeath {
  readonly deployment: string;
  readonly node: string;
  /** The launch id the dead container carried (launcher.boot); absent: none. */
  readonly boot?: string;
  readonly failure: Failure;
}

/** The rank death a docker event is, or undefined (another action, or a container without launcher's labels). */
export function rankDeathOf(e: DockerEvent, node: string): RankDeath | undefined {
  if (e.type !== "container" || !(DEATH_ACTIONS as readonly string[]).includes(e.action)) return undefined;
  const deployment = e.attributes[LABELS.deployment];
  const rank = Number(e.attributes[LABELS.rank]);
  if (deployment === undefined || deployment === "" || !Number.isInteger(rank) || rank < 0) return undefined;
  const exit = e.attributes.exitCode === undefined ? undefined : Number(e.attributes.exitCode);
  const container = e.attributes.name ?? e.id;
  const boot = e.attributes[LABELS.boot];
  return { deployment, node, ...(boot === undefined ? {} : { boot }), failure: rankExited(rank, node, container, "exited", exit !== undefined && Number.isInteger(exit) ? exit : undefined) };
}

/** A stream that lasted this long was healthy: the next one after it ends starts without waiting long. */
const HEALTHY_MS = 30_000;
const MAX_WAIT_MS = 30_000;

const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** Follows one node's events until `signal` aborts; a stream that ends is started again, after 1 s, 2 s, ... 30 s while it keeps failing. */
async function followNode(node: string, docker: Docker, onDeath: (d: RankDeath) => void, log: (line: string) => void, signal: AbortSignal): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    const started = Date.now();
    let said = "";
    try {
      for await (const line of docker.events(DEPLOYMENT_LABEL, DEATH_ACTIONS, signal)) {
        const e = decodeDockerEvent(line);
        if (e === undefined) {
          // ssh's or docker's own words (a refused connection): kept for the line below.
          said = line;
          continue;
        }
        const death = rankDeathOf(e, node);
        if (death !== undefined) onDeath(death);
      }
    } catch (e) {
      said = (e as Error).message;
    }
    if (signal.aborted) return;
    failures = Date.now() - started >= HEALTHY_MS ? 0 : failures + 1;
    const wait = Math.min(MAX_WAIT_MS, 1000 * 2 ** Math.min(failures - 1, 5));
    log(`container events of ${node} ended${said === "" ? "" : ` (${said.slice(0, 200)})`}; following them again in ${wait / 1000} s (the polls see deaths meanwhile)`);
    await pause(wait, signal);
  }
}

/** Follows every node's container events for deaths of launcher's ranks, until `signal` aborts. */
export function watchDeaths(session: ClusterSession, onDeath: (d: RankDeath) => void, log: (line: string) => void, signal: AbortSignal): Promise<void> {
  return Promise.all([...session.docker].map(([node, docker]) => followNode(node, docker, onDeath, log, signal))).then(() => undefined);
}
