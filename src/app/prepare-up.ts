import type { Cluster } from "../cluster/cluster.js";
import { UserError } from "../config/errors.js";
import { parseDuration } from "../config/duration.js";
import { DEFAULT_LEASE_MS } from "../claims/claims.js";
import { progressEvents, type UpEvent } from "../boot/up-events.js";
import type { Plan } from "../plan/plan.js";
import type { BootIdentity } from "../supervise/boots.js";
import type { StateStore } from "../store/store.js";
import { decodeRestartPolicy } from "../contract/deployment.js";
import { DEFAULTS } from "../contract/defaults.js";
import { uploadedSource } from "../recipe/uploaded-source.js";
import type { Planner, UpHost, UpRequest } from "./up-use-case.js";
import type { UpSubmission } from "./up-submission.js";
import { submissionPathProblem, submittedCluster, submittedRecipes, type Caller, type DaemonScope } from "./admit.js";
import type { Environment } from "./environment.js";
import { planFromFlags, type PlanFlags } from "./plan-flags.js";
import { argsJudge, gpusPerNode } from "./lookup.js";
import type { ArgsJudge } from "../nodes/image-check.js";
import type { Output } from "./output.js";

// `up`'s request made ready to run: the CLI runs it in its own process (src/cli/up.ts), the
// daemon in its boot registry (src/daemon/boots-host.ts).

/** A command line's `up`, checked, planned and ready to run wherever it runs (this process or the daemon). */
export interface PreparedUp {
  readonly request: UpRequest;
  readonly cluster: Cluster;
  /** Planned before any node is touched, so that a recipe error comes first. */
  readonly first: Plan;
  readonly plan: Planner;
  readonly timeoutMs: number;
  readonly drainMs: number;
  readonly push: boolean;
  readonly dropCaches: boolean;
  readonly leaseMs: number;
  /** How its boot reaches the nodes: the environment's (src/app/environment.ts Environment.openSession). */
  readonly openSession: Environment["openSession"];
  /** The recipe's args judged by the image's own parser in preflight, from the files it was planned from. */
  readonly judgeArgs: ArgsJudge;
}

/** Where a submission is prepared: in a daemon (for whom), and on which environment. */
export interface PrepareWhere {
  /**
   * Run for a client, whose submission names nothing on this machine but the daemon's own
   * clusters and recipes (./admit.ts), unless `caller` is the daemon's own user. Undefined: this
   * user's command line, whose files are its own.
   */
  readonly daemon?: DaemonScope;
  readonly caller?: Caller;
  /**
   * Where this user's clusters and recipes are, $LAUNCHER_CLAIM_LEASE, and how the nodes are
   * reached: the CLI's process environment, or the daemon's (which a test makes over a folder).
   */
  readonly env: PrepareEnvironment;
}

/** What of the environment `up`'s preparation reads. */
export type PrepareEnvironment = Pick<Environment, "vars" | "loadCluster" | "clusterOf" | "localRecipes" | "openSession">;

/**
 * `up`'s flags as the daemon receives them and as this process reads them: the same checks and
 * the same messages either way.
 */
export function prepareUp(s: UpSubmission, io: Output, where: PrepareWhere): PreparedUp {
  const { daemon, caller = "client", env } = where;
  const lease = env.vars.LAUNCHER_CLAIM_LEASE;
  const timeoutMs = parseDuration(s.timeout ?? DEFAULTS.upTimeout.text, "--timeout");
  const drainMs = parseDuration(s.drain ?? DEFAULTS.drain.text, "--drain");
  // Short leases are for tests that kill an `up`; the default suits real boots (README, "Two machines").
  const leaseMs = lease ? parseDuration(lease, "$LAUNCHER_CLAIM_LEASE") : DEFAULT_LEASE_MS;
  // In a daemon: what the client sent, and the daemon's own clusters and recipes by name only.
  // Here: this user's own files, as the command line names them.
  const pathProblem = daemon === undefined ? undefined : submissionPathProblem(s, caller);
  if (pathProblem !== undefined) throw new UserError(pathProblem);
  const cluster = daemon !== undefined ? submittedCluster(s, daemon, caller) : s.cluster_file === undefined ? env.loadCluster(s.cluster) : env.clusterOf(s.cluster_file);
  const recipes = daemon !== undefined ? submittedRecipes(s, daemon) : s.recipes === undefined || s.recipes.length === 0 ? env.localRecipes() : uploadedSource(s.recipes, env.localRecipes());
  const restart = s.restart === undefined ? undefined : decodeRestartPolicy(s.restart);
  if (restart !== undefined && !restart.ok) {
    throw new UserError(`--restart ${restart.problem}`, "pass --restart on-failure (restart the whole group each time it fails after it served) or --restart on-failure:N (at most N times); launcher serve does the restarting");
  }
  const flags: PlanFlags = {
    ...(restart === undefined ? {} : { restartPolicy: restart.policy }),
    ...(s.port === undefined ? {} : { port: s.port }),
    ...(s.lane === undefined ? {} : { lane: s.lane }),
    ...(s.name === undefined ? {} : { name: s.name }),
    ...(s.nodes === undefined ? {} : { nodes: s.nodes }),
  };
  const plan: Planner = (nodes, c, gaps) => planFromFlags(s.ref, nodes === undefined ? flags : { ...flags, nodes: nodes.join(",") }, io, c, gaps, recipes);
  // Planning first: a recipe error is reported before any node or lock is touched.
  const first = plan(undefined, cluster, "ignore");
  const request: UpRequest = { ref: s.ref, ...flags };
  const judgeArgs = argsJudge(s.ref, recipes, gpusPerNode(cluster));
  return { request, cluster, first, plan, timeoutMs, drainMs, push: s.push !== false, dropCaches: s.drop_caches === true, leaseMs, openSession: (c) => env.openSession(c), judgeArgs };
}

/** The use case's host: its words go out as events through `emit`. */
export function upHost(p: PreparedUp, store: StateStore, emit: (e: UpEvent) => void, signal: AbortSignal, detach?: AbortSignal): UpHost {
  return {
    ...(detach === undefined ? {} : { detach }),
    plan: p.plan,
    store,
    say: (text) => emit({ type: "say", text, t: Date.now() }),
    progress: progressEvents(emit, Date.now),
    signal,
    now: () => new Date(),
    leaseMs: p.leaseMs,
    timeoutMs: p.timeoutMs,
    drainMs: p.drainMs,
    push: p.push,
    ...(p.dropCaches ? { dropCaches: true } : {}),
    openSession: p.openSession,
    judgeArgs: p.judgeArgs,
  };
}

/** What a prepared boot is known by from then on: its deployment, cluster and lane. */
export const identityOf = (p: PreparedUp): BootIdentity => ({
  deployment: p.first.deployment,
  cluster: p.first.cluster,
  ...(p.request.lane === undefined ? {} : { lane: p.request.lane }),
});

/** The accepted event of a boot that runs in this process (the daemon's registry says its own). */
export const acceptedEvent = (p: PreparedUp): UpEvent => ({ type: "accepted", ...identityOf(p), t: Date.now() });
