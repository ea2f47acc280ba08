import { advanceBoot, INITIAL_BOOT, splitTimestamp } from "../engine/boot-log.js";
import { vllm } from "../engine/vllm.js";
import type { ContainerInfo } from "../remote/docker.js";
import { DEPLOYMENT_LABEL, label } from "./labels.js";
import type { ClusterSession } from "./session.js";

export interface RankStatus {
  readonly rank: number;
  readonly node: string;
  readonly container: string;
  readonly state: string;
  readonly exit_code?: number;
  readonly started_at: string;
}

export interface DeploymentStatus {
  readonly deployment: string;
  readonly recipe: string;
  readonly recipe_hash: string;
  readonly lane?: string;
  readonly served_model: string;
  readonly endpoint: string;
  /** serving, booting or degraded (a rank missing or exited). */
  readonly status: string;
  readonly phase: string;
  readonly uptime_seconds?: number;
  readonly missing: readonly string[];
  readonly ranks: readonly RankStatus[];
}

const STARTING_WINDOW_MS = 60_000;

async function headPhase(session: ClusterSession, head: RankStatus, endpoint: string): Promise<string> {
  try {
    const res = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(2000) });
    if (res.status === 200) return "serving";
  } catch {
    // not answering yet: read the boot phase from the log
  }
  const docker = session.docker.get(head.node);
  if (docker === undefined) return "unknown";
  let state = INITIAL_BOOT;
  for await (const line of docker.logs(head.container, { tail: 400 })) state = advanceBoot(vllm, state, splitTimestamp(line).text);
  return state.phase;
}

/** Every deployment found on the nodes; the containers' labels are the source of truth. */
export async function clusterStatus(session: ClusterSession, now: Date): Promise<{ deployments: DeploymentStatus[]; unreachable: string[] }> {
  const unreachable: string[] = [];
  const found: { node: string; c: ContainerInfo }[] = [];
  await Promise.all(
    [...session.docker].map(async ([node, docker]) => {
      try {
        for (const c of await docker.containers(DEPLOYMENT_LABEL)) found.push({ node, c });
      } catch {
        unreachable.push(node);
      }
    }),
  );
  const groups = new Map<string, { node: string; c: ContainerInfo }[]>();
  for (const f of found) {
    const name = label(f.c, "deployment") ?? "?";
    (groups.get(name) ?? groups.set(name, []).get(name))?.push(f);
  }
  const deployments: DeploymentStatus[] = [];
  for (const [deployment, members] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    const first = members[0]?.c as ContainerInfo;
    const nnodes = Number(label(first, "nnodes") ?? members.length);
    const ranks: RankStatus[] = members
      .map(({ node, c }) => ({
        rank: Number(label(c, "rank") ?? -1),
        node,
        container: c.name,
        state: c.state,
        ...(c.running ? {} : { exit_code: c.exitCode }),
        started_at: c.startedAt,
      }))
      .sort((a, b) => a.rank - b.rank);
    const missing: string[] = [];
    let notCreated = 0;
    for (let r = 0; r < nnodes; r++) {
      const rank = ranks.find((x) => x.rank === r);
      if (rank === undefined) {
        missing.push(`rank ${r} (no container)`);
        notCreated++;
      } else if (rank.state !== "running") missing.push(`rank ${r} on ${rank.node} (${rank.state}${rank.exit_code === undefined ? "" : `, exit ${rank.exit_code}`})`);
    }
    const running = ranks.filter((r) => r.state === "running");
    // `up` creates the containers one after another (workers, then the head): ranks not created
    // yet beside fresh running ones are a start in progress, not a loss.
    const starting = notCreated > 0 && notCreated === missing.length && running.length > 0 && running.every((r) => now.getTime() - Date.parse(r.started_at) < STARTING_WINDOW_MS);
    const endpoint = label(first, "endpoint") ?? "";
    const head = ranks.find((r) => r.rank === 0);
    let status: string;
    let phase = "-";
    // A multi-node engine cannot serve with a rank gone, however many others still run.
    if (starting) {
      status = "booting";
      phase = "starting";
    } else if (missing.length > 0) status = "degraded";
    else {
      phase = head === undefined ? "unknown" : await headPhase(session, head, endpoint);
      status = phase === "serving" ? "serving" : "booting";
    }
    const startedTimes = running.map((r) => Date.parse(r.started_at)).filter((t) => !Number.isNaN(t));
    const lane = label(first, "lane");
    deployments.push({
      deployment,
      recipe: label(first, "recipe") ?? "?",
      recipe_hash: label(first, "recipe-hash") ?? "?",
      ...(lane === undefined ? {} : { lane }),
      served_model: label(first, "served-model") ?? "?",
      endpoint,
      status,
      phase,
      ...(startedTimes.length === 0 ? {} : { uptime_seconds: Math.round((now.getTime() - Math.min(...startedTimes)) / 1000) }),
      missing,
      ranks,
    });
  }
  return { deployments, unreachable };
}
