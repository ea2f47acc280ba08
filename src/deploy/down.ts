import type { ContainerInfo } from "../remote/docker.js";
import { DEPLOYMENT_LABEL } from "./labels.js";
import type { ClusterSession } from "./session.js";

export interface Removed {
  readonly node: string;
  readonly container: string;
  readonly deployment: string;
  readonly wasRunning: boolean;
}

/**
 * Stops (SIGTERM, a grace period, then kill) and removes matching launcher containers on every
 * node in parallel. Labels decide what matches, so it works without any local state.
 */
export async function removeContainers(session: ClusterSession, match: (c: ContainerInfo) => boolean, graceSeconds: number): Promise<Removed[]> {
  const perNode = await Promise.all(
    [...session.docker].map(async ([node, docker]) => {
      try {
        const mine = (await docker.containers(DEPLOYMENT_LABEL)).filter(match);
        await docker.stopAndRemove(mine.map((c) => c.name), graceSeconds);
        return mine.map((c) => ({ node, container: c.name, deployment: c.labels[DEPLOYMENT_LABEL] ?? "?", wasRunning: c.running }));
      } catch {
        // An unreachable node cannot be cleaned now; status shows what is left once it is back.
        return [{ node, container: "(node unreachable)", deployment: "?", wasRunning: false }];
      }
    }),
  );
  return perNode.flat();
}
