import * as z from "zod";

/**
 * The deployment contract: what launcher writes on the nodes (container labels) and what it
 * says about them (rank states, deployment statuses, phases, the `status --json` line that the
 * gateway's discovery reads). Every reader and writer goes through this file, so a new value is
 * added once, here, and every consumer's type checker hears of it.
 */

export const LABEL_PREFIX = "launcher.";

/** Every label launcher puts on a container, by field, in the order `docker run` gets them. */
export const LABELS = {
  deployment: `${LABEL_PREFIX}deployment`,
  recipe: `${LABEL_PREFIX}recipe`,
  recipe_hash: `${LABEL_PREFIX}recipe-hash`,
  // The engine that runs in the container (the recipe's `engine`): status reads its log and
  // drain its metrics through that engine's adapter, whatever the other deployments run.
  engine: `${LABEL_PREFIX}engine`,
  served_model: `${LABEL_PREFIX}served-model`,
  rank: `${LABEL_PREFIX}rank`,
  role: `${LABEL_PREFIX}role`,
  node: `${LABEL_PREFIX}node`,
  nnodes: `${LABEL_PREFIX}nnodes`,
  // Every rank's node, in rank order: a container read on one node tells where the others live,
  // so a rank on a node that cannot be read is "unreachable", not "no container".
  nodes: `${LABEL_PREFIX}nodes`,
  cluster: `${LABEL_PREFIX}cluster`,
  endpoint: `${LABEL_PREFIX}endpoint`,
  lane: `${LABEL_PREFIX}lane`,
  // `up --restart on-failure[:N]`: the daemon's supervisor recreates the whole group when it fails
  // after it was ready (src/supervise/supervise.ts). On the labels, so a restarted daemon adopts it.
  restart: `${LABEL_PREFIX}restart`,
  // How many times the supervisor recreated the group (stamped at each restart, never by the plan):
  // a daemon started again counts on from there, so `:N` holds across daemons.
  restarts: `${LABEL_PREFIX}restarts`,
  // Which `up` created the container (a random id per boot, added at launch by boot/boot.ts,
  // never by the plan): a rollback removes only its own.
  boot: `${LABEL_PREFIX}boot`,
} as const;
export const LABEL_NAMES: readonly string[] = Object.values(LABELS);
/** The label every launcher container carries: `docker ps --filter label=...` finds them all. */
export const DEPLOYMENT_LABEL = LABELS.deployment;

export const ROLES = ["head", "worker"] as const;
export type Role = (typeof ROLES)[number];

/** What one container says about itself. */
export interface DeploymentLabels {
  readonly deployment: string;
  readonly recipe: string;
  readonly recipe_hash: string;
  /** Absent on containers started before the label existed (they run the default engine). */
  readonly engine?: string;
  readonly served_model: string;
  readonly rank: number;
  readonly role: Role;
  readonly node: string;
  readonly nnodes: number;
  /** Absent on containers started before the label existed. */
  readonly nodes?: readonly string[];
  readonly cluster: string;
  readonly endpoint: string;
  readonly lane?: string;
  /** Absent: nobody restarts it (today's behaviour: degraded, 503). */
  readonly restart?: RestartPolicy;
  /** Restarts so far (absent: none). */
  readonly restarts?: number;
  /** The launch that made it (launcher.boot, stamped at launch, never by the plan); absent: none stamped. */
  readonly boot?: string;
}

/**
 * `on-failure` restarts the whole group each time it fails after it was ready; `:N` at most N
 * times over the deployment's life (Docker's `--restart on-failure[:max-retries]` reads alike,
 * docker/cli opts/parse.go ParseRestartPolicy; without N, Docker and launcher do not stop trying).
 */
export interface RestartPolicy {
  readonly mode: "on-failure";
  readonly max?: number;
}
export const RESTART_MODES = ["on-failure"] as const;

export const encodeRestartPolicy = (p: RestartPolicy): string => (p.max === undefined ? p.mode : `${p.mode}:${p.max}`);

/** `on-failure` or `on-failure:N` (N from 1); anything else is what is wrong with it. */
export function decodeRestartPolicy(text: string): { ok: true; policy: RestartPolicy } | { ok: false; problem: string } {
  const m = /^([a-z-]+)(?::(\d+))?$/.exec(text);
  const mode = RESTART_MODES.find((x) => x === m?.[1]);
  if (m === null || mode === undefined) return { ok: false, problem: `${JSON.stringify(text)} is not a restart policy (${RESTART_MODES.map((x) => `${x}[:N]`).join(", ")})` };
  if (m[2] === undefined) return { ok: true, policy: { mode } };
  const max = Number(m[2]);
  if (!Number.isSafeInteger(max) || max < 1) return { ok: false, problem: `${JSON.stringify(text)}: the number of restarts must be at least 1` };
  return { ok: true, policy: { mode, max } };
}

/** Containers are named after their deployment and rank, so that one name runs once per node. */
export const containerName = (deployment: string, rank: number): string => `launcher-${deployment}-r${rank}`;

export function encodeLabels(l: DeploymentLabels): Record<string, string> {
  return {
    [LABELS.deployment]: l.deployment,
    [LABELS.recipe]: l.recipe,
    [LABELS.recipe_hash]: l.recipe_hash,
    ...(l.engine === undefined ? {} : { [LABELS.engine]: l.engine }),
    [LABELS.served_model]: l.served_model,
    [LABELS.rank]: String(l.rank),
    [LABELS.role]: l.role,
    [LABELS.node]: l.node,
    [LABELS.nnodes]: String(l.nnodes),
    ...(l.nodes === undefined ? {} : { [LABELS.nodes]: l.nodes.join(",") }),
    [LABELS.cluster]: l.cluster,
    [LABELS.endpoint]: l.endpoint,
    ...(l.lane === undefined ? {} : { [LABELS.lane]: l.lane }),
    ...(l.restart === undefined ? {} : { [LABELS.restart]: encodeRestartPolicy(l.restart) }),
    ...(l.restarts === undefined ? {} : { [LABELS.restarts]: String(l.restarts) }),
  };
}

const count = z.string().regex(/^\d+$/).transform(Number);
// Launcher always writes every label; a container made by hand or by an older launcher may lack
// the descriptive ones, which then read as "?" (it is still listed, routed and stopped). What
// status, routing and down cannot do without (deployment, rank, nnodes, served model, endpoint)
// must be there.
const described = z.string().catch("?");
const labelsSchema = z.object({
  [LABELS.deployment]: z.string().min(1),
  [LABELS.recipe]: described,
  [LABELS.recipe_hash]: described,
  [LABELS.engine]: z.exactOptional(z.string()),
  [LABELS.served_model]: z.string(),
  [LABELS.rank]: count,
  [LABELS.role]: z.exactOptional(z.enum(ROLES)),
  [LABELS.node]: described,
  [LABELS.nnodes]: count,
  [LABELS.nodes]: z.exactOptional(z.string().transform((s) => s.split(","))),
  [LABELS.cluster]: described,
  [LABELS.endpoint]: z.string(),
  [LABELS.lane]: z.exactOptional(z.string()),
  // A policy this launcher cannot read (a newer one's) is no policy: nobody restarts the group.
  [LABELS.restart]: z.exactOptional(z.string().transform((s) => { const d = decodeRestartPolicy(s); return d.ok ? d.policy : undefined; })),
  [LABELS.restarts]: z.exactOptional(count.catch(0)),
  // Bounded: compared with what the store recorded, and shown; never a command or a path.
  [LABELS.boot]: z.exactOptional(z.string().max(64)),
});

/** A container's labels, or what is wrong with them (another tool's, or a damaged container). */
export function decodeLabels(labels: Readonly<Record<string, string>>): { ok: true; labels: DeploymentLabels } | { ok: false; problem: string } {
  const r = labelsSchema.safeParse(labels);
  if (!r.success) return { ok: false, problem: r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
  const v = r.data;
  const nodes = v[LABELS.nodes];
  const lane = v[LABELS.lane];
  const engine = v[LABELS.engine];
  const restart = v[LABELS.restart];
  const restarts = v[LABELS.restarts];
  const boot = v[LABELS.boot];
  return {
    ok: true,
    labels: {
      deployment: v[LABELS.deployment],
      recipe: v[LABELS.recipe],
      recipe_hash: v[LABELS.recipe_hash],
      ...(engine === undefined ? {} : { engine }),
      served_model: v[LABELS.served_model],
      rank: v[LABELS.rank],
      role: v[LABELS.role] ?? (v[LABELS.rank] === 0 ? "head" : "worker"),
      node: v[LABELS.node],
      nnodes: v[LABELS.nnodes],
      ...(nodes === undefined ? {} : { nodes }),
      cluster: v[LABELS.cluster],
      endpoint: v[LABELS.endpoint],
      ...(lane === undefined ? {} : { lane }),
      ...(restart === undefined ? {} : { restart }),
      ...(restarts === undefined ? {} : { restarts }),
      ...(boot === undefined ? {} : { boot }),
    },
  };
}

/** Docker's own container states (moby api/types/container/state.go: ContainerState). */
export const CONTAINER_STATES = ["created", "running", "paused", "restarting", "removing", "exited", "dead"] as const;
/** A rank's state: its container's, or "unreachable" when its node could not be read. */
export const RANK_STATES = [...CONTAINER_STATES, "unreachable"] as const;
export type RankState = (typeof RANK_STATES)[number];

/**
 * serving: the head answers /health (ranks on unreachable nodes are listed, but the engine serves);
 * booting: every rank runs, the head does not answer yet; degraded: a rank is missing or exited;
 * unreachable: a node of it could not be read and the head does not answer, so it cannot be judged.
 */
export const DEPLOYMENT_STATUSES = ["serving", "booting", "degraded", "unreachable"] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATUSES)[number];

/** The boot phases an engine adapter reports, in boot order. */
export const BOOT_PHASES = ["starting", "loading", "kv-cache", "graph-capture", "warmup", "serving"] as const;
export type BootPhase = (typeof BOOT_PHASES)[number];
/** A phase as status shows it: a boot phase, "unknown" (it cannot be read), or "-" (degraded: none). */
export const STATUS_PHASES = [...BOOT_PHASES, "unknown", "-"] as const;
export type StatusPhase = (typeof STATUS_PHASES)[number];

export interface RankStatus {
  readonly rank: number;
  readonly node: string;
  readonly container: string;
  readonly state: RankState;
  readonly exit_code?: number;
  /** Absent for a rank on an unreachable node. */
  readonly started_at?: string;
  /** When a rank that does not run exited: the first to exit is the one whose log says why. */
  readonly finished_at?: string;
}

export interface DeploymentStatus {
  readonly deployment: string;
  readonly recipe: string;
  readonly recipe_hash: string;
  /** The engine it runs (its containers' launcher.engine label); absent when they predate the label. */
  readonly engine?: string;
  readonly lane?: string;
  /** Its restart policy (the launcher.restart label, encoded); absent: not supervised. */
  readonly restart?: string;
  /** How many times the supervisor recreated it (the launcher.restarts label); absent: never. */
  readonly restarts?: number;
  /**
   * The launch its containers carry (launcher.boot): containers of one name but another launch are
   * a deployment of their own. The daemon routes and supervises only the launch the store recorded.
   */
  readonly boot?: string;
  readonly served_model: string;
  readonly endpoint: string;
  readonly status: DeploymentState;
  readonly phase: StatusPhase;
  /**
   * Why a deployment whose ranks all run is degraded: the line of its head's log that ended the
   * engine (its cause), read from the container's output and held to one short line.
   */
  readonly fault?: string;
  readonly uptime_seconds?: number;
  /** Ranks gone: "rank 1 (no container)" or "rank 1 on n2 (exited, exit 137)". */
  readonly missing: readonly string[];
  /** Nodes of this deployment that could not be read. */
  readonly unreachable: readonly string[];
  readonly ranks: readonly RankStatus[];
}

/**
 * What a node SSH could not read did at its SSH port, from the control machine: "answers" (its
 * kernel completed or refused a TCP connection) or "silent" (nothing within the bound).
 */
export const PORT_ANSWERS = ["answers", "silent"] as const;
export type PortAnswer = (typeof PORT_ANSWERS)[number];

/** One `launcher status --json` answer, or one line of `status --watch --json`. */
export interface StatusLine {
  readonly deployments: readonly DeploymentStatus[];
  /** Every node of the cluster that could not be read. */
  readonly unreachable: readonly string[];
  readonly at: string;
  /** Of the unreachable nodes, what each one's SSH port did. */
  readonly ssh_port?: Readonly<Record<string, PortAnswer>>;
}

const rankSchema = z.object({
  rank: z.number().int(),
  node: z.string(),
  container: z.string(),
  state: z.enum(RANK_STATES),
  exit_code: z.exactOptional(z.number().int()),
  started_at: z.exactOptional(z.string()),
  finished_at: z.exactOptional(z.string()),
});
/** One deployment of a status line: the read API (./read-api.ts) serves the same shape. */
export const deploymentSchema = z.object({
  deployment: z.string(),
  recipe: z.string(),
  recipe_hash: z.string(),
  engine: z.exactOptional(z.string()),
  lane: z.exactOptional(z.string()),
  restart: z.exactOptional(z.string()),
  restarts: z.exactOptional(z.number().int()),
  boot: z.exactOptional(z.string().max(64)),
  served_model: z.string(),
  endpoint: z.string(),
  status: z.enum(DEPLOYMENT_STATUSES),
  phase: z.enum(STATUS_PHASES),
  fault: z.exactOptional(z.string().max(400)),
  uptime_seconds: z.exactOptional(z.number()),
  missing: z.array(z.string()),
  unreachable: z.array(z.string()),
  ranks: z.array(rankSchema),
});
const statusLineSchema = z.object({ deployments: z.array(deploymentSchema), unreachable: z.array(z.string()), at: z.string(), ssh_port: z.exactOptional(z.record(z.string(), z.enum(PORT_ANSWERS))) });

/** Only the contract's fields: what a caller carries beside them stays here. */
export const encodeStatusLine = (line: StatusLine): string =>
  JSON.stringify({ deployments: line.deployments, unreachable: line.unreachable, at: line.at, ...(line.ssh_port === undefined ? {} : { ssh_port: line.ssh_port }) });

/** A status line as the gateway reads it; throws, saying what is wrong, on anything else. */
export function decodeStatusLine(text: string): StatusLine {
  const r = statusLineSchema.safeParse(JSON.parse(text));
  if (!r.success) throw new Error(r.error.issues.slice(0, 3).map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
  return r.data;
}
