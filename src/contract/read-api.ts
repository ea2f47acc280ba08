import * as z from "zod";
import { CONTROL_PREFIX } from "./control-api.js";
import { deploymentSchema } from "./deployment.js";
import { OUTAGE_KINDS } from "./outage.js";
import type { BenchRun, EvalRun } from "./evidence.js";

/**
 * The daemon's read API, under CONTROL_PREFIX beside the control API: what the cluster looks like
 * (clusters, deployments, lanes, boots, history, stored runs, engine metrics, gateway activity,
 * logs) and one Server-Sent Events stream of each change. The one typed home of its routes and
 * answers: the server (src/daemon/read-api.ts) encodes with these schemas and the client
 * (src/daemon/read-client.ts) decodes with them. Reads take an admin key or an inference key; every
 * action stays the control API's, admin key only. Keys are snake_case, as every --json answer's.
 */

const R = CONTROL_PREFIX;

/** The routes without a parameter: where a client asks and what the server routes are the same. */
const PLAIN_ROUTES = {
  clusters: `${R}clusters`,
  deployments: `${R}deployments`,
  lanes: `${R}lanes`,
  boots: `${R}boots`,
  history: `${R}history`,
  runs: `${R}runs`,
  metrics: `${R}metrics`,
  activity: `${R}activity`,
  events: `${R}events`,
  recipes: `${R}recipes`,
} as const;

/** Where a client asks (path builders, segments %-encoded). */
export const READ_PATHS = {
  ...PLAIN_ROUTES,
  logs: (deployment: string): string => `${R}deployments/${encodeURIComponent(deployment)}/logs`,
} as const;

/** The patterns the server routes (GET only), `{name}` a deployment's name. */
export const READ_ROUTES = { ...PLAIN_ROUTES, logs: `${R}deployments/{name}/logs` } as const;
export type ReadRoute = keyof typeof READ_ROUTES;

/** The most a `history` or `activity` answer holds, whatever `limit` asks. */
export const MAX_READ_LIMIT = 500;
/** The most lines `logs` reads back per node (`tail`), whatever is asked. */
export const MAX_LOG_TAIL = 2000;

const opt = z.exactOptional;

/** Where a boot the daemon holds stands: running, or over (ready, or failed and rolled back). */
export const DAEMON_BOOT_STATES = ["booting", "ready", "failed"] as const;
export type DaemonBootState = (typeof DAEMON_BOOT_STATES)[number];

/** One boot as `GET boots` lists it: the server encodes it (`summarizeBoot`), the client decodes it (`BootListSchema`). */
export const BootSummarySchema = z.object({
  deployment: z.string(),
  cluster: z.string(),
  lane: z.string().optional(),
  /** Kept beside `state` for the clients that read only this (down --all). */
  running: z.boolean(),
  state: z.enum(DAEMON_BOOT_STATES),
  /** When the daemon accepted it (ISO 8601). */
  started_at: z.string(),
  /** Each node's latest boot phase, as the node's log showed it. */
  nodes: z.record(z.string(), z.string()),
  /** Why it failed, for a failed boot. */
  error: z.string().optional(),
});
export type BootSummary = z.infer<typeof BootSummarySchema>;

/**
 * A boot's event as the control API streams it (src/boot/up-events.ts encodes and decodes it: its
 * figures and samples keep that encoding). Checked here for its outline only; a client decodes it
 * with decodeEvent.
 */
export const UpEventJsonSchema = z.looseObject({ type: z.string(), t: z.number() });

/** A boot with every event it said (what `attach` replays): `GET boots`. */
export const BootViewSchema = BootSummarySchema.extend({ events: z.array(UpEventJsonSchema) });

/** A node's memory: the guard's last sample when it watches one, else what doctor read. */
export const NodeMemorySchema = z.object({
  total_kib: z.number(),
  available_kib: z.number(),
  /** The memory guard's floor on this node (memory_floor). */
  floor_gib: z.number(),
  /** Page cache (Cached + Buffers without Shmem) as doctor last read it. */
  page_cache_kib: opt(z.number()),
  /** guard: the daemon's guard sampled it for `deployment`; doctor: `launcher doctor` read it. */
  source: z.enum(["guard", "doctor"]),
  deployment: opt(z.string()),
  read_at: z.string(),
});

/** A node's fabric as detection found it (src/cluster/detect.ts FabricFacts). */
export const FabricFactsSchema = z.object({
  fabric_iface: opt(z.string()),
  fabric_ip: opt(z.string()),
  mtu: opt(z.number()),
  hca: z.array(z.string()),
  gid_index: opt(z.number()),
  ports_up: z.number(),
});

/** A node that stopped answering while launcher's ranks ran there (src/nodes/outage.ts): since the daemon's first poll that could not read it. */
export const NodeOutageViewSchema = z.object({ kind: z.enum(OUTAGE_KINDS), since: z.string() });

export const ClusterNodeViewSchema = z.object({
  name: z.string(),
  rank: z.number().int(),
  /** From discovery's last poll; absent before its first. */
  reachable: opt(z.boolean()),
  /** Present while the node is out (unreachable) after running launcher's ranks. */
  outage: opt(NodeOutageViewSchema),
  memory: opt(NodeMemorySchema),
  /** Docker's server version, when known. */
  docker_version: opt(z.string()),
  fabric: opt(FabricFactsSchema),
});
export const ClusterViewSchema = z.object({
  name: z.string(),
  nodes: z.array(ClusterNodeViewSchema),
  facts_detected_at: opt(z.string()),
});
export type ClusterView = z.infer<typeof ClusterViewSchema>;
export type ClusterNodeView = z.infer<typeof ClusterNodeViewSchema>;

/** A deployment as discovery last saw it (status --json's shape), with its cluster and its supervision. */
export const DeploymentViewSchema = deploymentSchema.extend({
  cluster: z.string(),
  /** The supervisor's state of it (watching, restarting, ...); absent: not supervised. */
  supervision: opt(z.string()),
  /** A node's own guard killed this launch of it: what the daemon read and did (src/contract/node-guard-trip.ts nodeGuardTripWords). */
  node_guard: opt(z.string()),
});
export type DeploymentView = z.infer<typeof DeploymentViewSchema>;

export const StrangerSchema = z.object({ cluster: z.string(), deployment: z.string(), boot: opt(z.string()), reason: z.string() });

export const SwapViewSchema = z.object({
  id: z.number(),
  lane: z.string(),
  mode: z.string(),
  from_deployment: opt(z.string()),
  from_recipe: opt(z.string()),
  to_deployment: z.string(),
  to_recipe: z.string(),
  started_at: z.string(),
  ended_at: opt(z.string()),
  outcome: z.string(),
  error: opt(z.string()),
});
export const LaneViewSchema = z.object({
  name: z.string(),
  cluster: z.string(),
  deployment: opt(z.string()),
  recipe: opt(z.string()),
  served_model: opt(z.string()),
  state: z.enum(["serving", "switching", "empty"]),
  switching_to: opt(z.string()),
  since: z.string(),
  /** Its latest swaps, newest first. */
  swaps: z.array(SwapViewSchema),
});
export type LaneView = z.infer<typeof LaneViewSchema>;

export const PhaseViewSchema = z.object({
  node: z.string(),
  phase: z.string(),
  started_at: z.string(),
  ended_at: opt(z.string()),
  /** How long the phase took (ended_at - started_at); absent while it runs. */
  seconds: opt(z.number()),
  /** The engine's figures of the phase (keys are the engine adapter's). */
  figures: z.record(z.string(), z.string()),
  min_available_kib: opt(z.number()),
  total_kib: opt(z.number()),
});
export const HistoryBootSchema = z.object({
  id: z.number(),
  deployment: z.string(),
  recipe: z.string(),
  recipe_hash: z.string(),
  lane: opt(z.string()),
  cluster: z.string(),
  served_model: z.string(),
  endpoint: z.string(),
  nodes: z.array(z.string()),
  started_at: z.string(),
  engine_version: opt(z.string()),
  ended_at: opt(z.string()),
  /** started_at to ended_at; absent while it runs. */
  seconds: opt(z.number()),
  outcome: z.enum(["booting", "ready", "failed", "interrupted"]),
  failed_node: opt(z.string()),
  error: opt(z.string()),
  phases: z.array(PhaseViewSchema),
});
export type HistoryBoot = z.infer<typeof HistoryBootSchema>;

export const RUN_KINDS = ["bench", "eval", "compare"] as const;
export type RunKind = (typeof RUN_KINDS)[number];
// Stored runs are the store's own records (src/contract/evidence.ts), checked for their outline.
const BenchRunOutline = z.looseObject({ id: z.string(), series: z.string(), run: z.number(), started_at: z.string(), subject: z.looseObject({ target: z.string() }) });
const EvalRunOutline = z.looseObject({ id: z.string(), started_at: z.string(), subject: z.looseObject({ target: z.string() }), correct: z.number(), total: z.number() });

/** One engine metrics sample of a deployment (src: its head's /metrics); a value the engine did not report is absent. */
export const MetricsPointSchema = z.object({
  /** ms since the epoch, the daemon's clock. */
  t: z.number(),
  /** KV cache in use, 0..1. */
  kv_cache_usage: opt(z.number()),
  requests_running: opt(z.number()),
  requests_waiting: opt(z.number()),
  /** Prompt (prefill) and generation tokens per second over the last scrape interval. */
  prompt_tps: opt(z.number()),
  generation_tps: opt(z.number()),
  /** Preemptions over the last scrape interval. */
  preemptions: opt(z.number()),
  /** Accepted draft tokens / drafted tokens, 0..1; absent without speculative decoding. */
  spec_acceptance: opt(z.number()),
});
export type MetricsPoint = z.infer<typeof MetricsPointSchema>;
export const MetricsWindowSchema = z.object({ cluster: z.string(), deployment: z.string(), points: z.array(MetricsPointSchema) });
export type MetricsWindow = z.infer<typeof MetricsWindowSchema>;

/** One request through the gateway: never its key (key_id is the key's id), never its body. */
export const ActivityRecordSchema = z.object({
  t: z.number(),
  lane: opt(z.string()),
  deployment: opt(z.string()),
  model: z.string(),
  key_id: opt(z.string()),
  /** The HTTP status answered. */
  status: z.number().int(),
  ttft_ms: opt(z.number()),
  tokens_in: opt(z.number()),
  tokens_out: opt(z.number()),
  tokens_per_second: opt(z.number()),
  /** Why it failed, for a failed request. */
  error: opt(z.string()),
  /**
   * With `launcher serve --capture-bodies N`: the first N bytes of the request's and the answer's
   * body, keys removed (src/gateway/capture.ts). Only an admin reads them (the `activity` route);
   * the event stream never carries them, for they hold what other clients asked.
   */
  request_body: opt(z.string()),
  response_body: opt(z.string()),
});
export type ActivityRecord = z.infer<typeof ActivityRecordSchema>;

/** A record without its captured bodies: what a reader who is not an admin, and the event stream, get. */
export function withoutBodies(r: ActivityRecord): ActivityRecord {
  const { request_body: _request, response_body: _response, ...rest } = r;
  return rest;
}

/** One log line of a deployment: its node and rank, and docker's timestamp (RFC 3339, UTC) when it has one. */
export const LogLineSchema = z.object({ t: opt(z.string()), node: z.string(), rank: z.number().int(), text: z.string() });
export type LogLine = z.infer<typeof LogLineSchema>;

/** The most recipes `recipes` lists, and the longest description it gives (longer ones are cut). */
export const MAX_RECIPES = 300;
export const MAX_RECIPE_DESCRIPTION = 200;

/**
 * A recipe of the daemon's own folders, by the bare name a submission may give (src/recipe/
 * uploaded-source.ts catalogueSource): `description` is the recipe's `name` key; `engine` and
 * `model` are absent when the recipe does not resolve (its errors are `launcher validate`'s to say).
 */
export const RecipeEntrySchema = z.object({ name: z.string(), description: opt(z.string()), engine: opt(z.string()), model: opt(z.string()) });
export type RecipeEntry = z.infer<typeof RecipeEntrySchema>;

/** Every answer of a GET route, by route: encodeRead and decodeRead go through this table. */
export const READ_ANSWERS = {
  clusters: z.object({ clusters: z.array(ClusterViewSchema) }),
  deployments: z.object({ deployments: z.array(DeploymentViewSchema), strangers: z.array(StrangerSchema), unreachable: z.array(z.string()), discovered_at: opt(z.string()) }),
  lanes: z.object({ lanes: z.array(LaneViewSchema) }),
  boots: z.object({ boots: z.array(BootViewSchema) }),
  history: z.object({ boots: z.array(HistoryBootSchema) }),
  runs: z.object({ kind: z.enum(RUN_KINDS), bench: z.array(BenchRunOutline), evals: z.array(EvalRunOutline) }),
  metrics: z.object({ windows: z.array(MetricsWindowSchema) }),
  activity: z.object({ requests: z.array(ActivityRecordSchema) }),
  /** Each line merged across nodes in time order; `lost`: nodes that could not be read, with why. */
  logs: z.object({ lines: z.array(LogLineSchema), lost: z.array(z.string()) }),
  /** By name; at most MAX_RECIPES (`truncated` says some were left out). */
  recipes: z.object({ recipes: z.array(RecipeEntrySchema), truncated: opt(z.boolean()) }),
} as const;
export type ReadAnswerKind = keyof typeof READ_ANSWERS;
type AnswerOf<K extends ReadAnswerKind> = z.infer<(typeof READ_ANSWERS)[K]>;
/** A `runs` answer with its records typed as the store keeps them. */
export type RunsAnswer = { readonly kind: RunKind; readonly bench: readonly BenchRun[]; readonly evals: readonly EvalRun[] };
export type ReadAnswer<K extends ReadAnswerKind> = K extends "runs" ? RunsAnswer : AnswerOf<K>;

/** An answer's JSON: only the contract's fields (what a caller carries beside them stays out). */
export function encodeRead<K extends ReadAnswerKind>(kind: K, answer: ReadAnswer<K>): string {
  return JSON.stringify(READ_ANSWERS[kind].parse(answer));
}

/** An answer as a client reads it, or what is wrong with it. */
export function decodeRead<K extends ReadAnswerKind>(kind: K, value: unknown): { ok: true; answer: ReadAnswer<K> } | { ok: false; problem: string } {
  const r = READ_ANSWERS[kind].safeParse(value);
  if (!r.success) return { ok: false, problem: r.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(answer)"}: ${i.message}`).join("; ") };
  return { ok: true, answer: r.data as unknown as ReadAnswer<K> };
}

/**
 * The events of `GET events` (and of a followed `logs`), by SSE event name: each change the daemon
 * sees, as it sees it. A client reads the routes once, then applies these.
 */
export const READ_EVENTS = {
  /** A deployment appeared or changed (status, phase, ranks, supervision) in discovery's poll. */
  deployment: DeploymentViewSchema,
  /** A deployment left discovery's view. */
  deployment_removed: z.object({ cluster: z.string(), deployment: z.string() }),
  /** A node became reachable or unreachable. */
  node: z.object({ cluster: z.string(), node: z.string(), reachable: z.boolean(), /** While it is out after running launcher's ranks: frozen or vanished, since when. */ kind: opt(z.enum(OUTAGE_KINDS)), since: opt(z.string()) }),
  /** A lane changed (its deployment, state or swaps). */
  lane: LaneViewSchema,
  lane_removed: z.object({ name: z.string() }),
  /** One event of a boot the daemon runs, from its start to its end. */
  boot: z.object({ deployment: z.string(), cluster: z.string(), lane: opt(z.string()), event: UpEventJsonSchema }),
  /** A new metrics sample of a deployment's engine. */
  metrics: z.object({ cluster: z.string(), deployment: z.string(), point: MetricsPointSchema }),
  /** A request through the gateway, once answered. */
  activity: ActivityRecordSchema,
  /** A line of a followed deployment's log (only on `deployments/{name}/logs?follow=1`). */
  log: LogLineSchema,
  /** The stream ends on purpose (a followed log's time bound); the client may open it again. */
  end: z.object({ reason: z.string() }),
} as const;
export type ReadEventName = keyof typeof READ_EVENTS;

/** A node's view after its `node` event: reachable as it says, and out (frozen or vanished, since when) only while it says so. */
export function withNodeEvent(n: ClusterNodeView, d: z.infer<typeof READ_EVENTS.node>): ClusterNodeView {
  const { outage: _ended, ...rest } = n;
  return { ...rest, reachable: d.reachable, ...(d.kind === undefined || d.since === undefined ? {} : { outage: { kind: d.kind, since: d.since } }) };
}
export type ReadEvent = { [K in ReadEventName]: { readonly event: K; readonly data: z.infer<(typeof READ_EVENTS)[K]> } }[ReadEventName];

/** An SSE event's data as a client reads it; undefined for an event this launcher does not know or a malformed one. */
export function decodeReadEvent(event: string, data: string): ReadEvent | undefined {
  if (!Object.hasOwn(READ_EVENTS, event)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return undefined;
  }
  const r = READ_EVENTS[event as ReadEventName].safeParse(value);
  return r.success ? ({ event, data: r.data } as ReadEvent) : undefined;
}

/**
 * The page's sessions (src/daemon/web-session.ts): a key or a one-time code is exchanged for a
 * session cookie; a code is asked for with a key, as reads take it.
 */
export const SESSION_ROUTES = {
  signIn: `${R}sign-in`,
  signOut: `${R}sign-out`,
  session: `${R}session`,
  codes: `${R}sign-in-codes`,
} as const;

/** The header an action with a session cookie carries its session's CSRF token in (here, not in the daemon's files, so the page's bundle reads it without node code). */
export const CSRF_HEADER = "x-launcher-csrf";

/** What a session may do: `admin` reads and acts (with its CSRF token), `read` only reads. */
export const SESSION_ROLES = ["admin", "read"] as const;
export type SessionRole = (typeof SESSION_ROLES)[number];

/** `POST sign-in`'s body: a key, or a one-time code. Both bounded: neither is ever long. */
export const SignInSchema = z.union([z.strictObject({ key: z.string().min(1).max(4096) }), z.strictObject({ code: z.string().min(1).max(256) })]);

/** `GET session`'s answer. */
export const SessionAnswerSchema = z.strictObject({ role: z.enum(SESSION_ROLES), csrf_token: z.string(), expires_at: z.string() });
export type SessionAnswer = z.infer<typeof SessionAnswerSchema>;

/** `POST sign-in-codes`' answer: `url_path` is where the page takes the code (`/?code=CODE`). */
export const SignInCodeSchema = z.strictObject({ code: z.string(), expires_at: z.string(), url_path: z.string() });
export type SignInCode = z.infer<typeof SignInCodeSchema>;
