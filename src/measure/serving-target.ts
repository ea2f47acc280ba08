import { UserError } from "../config/errors.js";
import type { BootFigures, RunSubject } from "../contract/evidence.js";
import type { BootRecord } from "../store/store.js";
import type { DeploymentLabels } from "../contract/deployment.js";
import { listNodes, resolveTarget } from "../nodes/labels.js";
import type { ClusterSession } from "../nodes/session.js";

/**
 * What a command that sends requests (eval, bench) talks to: a base URL whose /v1/chat/completions
 * answers for `model`, with the key it demands, and what launcher knows of what serves it.
 */
export interface ServingTarget {
  readonly url: string;
  readonly model: string;
  readonly apiKey?: string;
  readonly subject: RunSubject;
  /** The head's labels (engine, lane, endpoint), when the target was found on the cluster. */
  readonly head?: DeploymentLabels;
}

/**
 * The figures a boot's head recorded (history keeps them as text, by the engine's figure names):
 * the head's, as the engine's KV cache and concurrency lines are the head's alone.
 */
export function bootFigures(boot: BootRecord): BootFigures {
  const head = boot.phases.filter((p) => p.node === boot.nodes[0]);
  const figure = (name: keyof BootFigures): number | undefined => {
    for (const p of head) {
      // Thousands separators as the log printed them ("1,250,000 tokens").
      const v = p.figures[name]?.replaceAll(",", "");
      if (v !== undefined && v !== "" && Number.isFinite(Number(v))) return Number(v);
    }
    return undefined;
  };
  const out: { -readonly [K in keyof BootFigures]?: number } = {};
  for (const k of ["load_seconds", "kv_tokens", "max_concurrency"] as const) {
    const v = figure(k);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * The subject of a run on a deployment: its labels say what it is, its last ready boot in history
 * (if this machine booted it) the engine version and the boot's figures.
 */
export function subjectOf(target: string, head: DeploymentLabels, boots: readonly BootRecord[]): RunSubject {
  const boot = boots.find((b) => b.deployment === head.deployment && b.recipe_hash === head.recipe_hash && b.cluster === head.cluster && b.outcome === "ready");
  const figures = boot === undefined ? undefined : bootFigures(boot);
  return {
    target,
    deployment: head.deployment,
    ...(head.lane === undefined ? {} : { lane: head.lane }),
    recipe: head.recipe,
    recipe_hash: head.recipe_hash,
    ...(boot?.engine_version === undefined ? {} : { engine_version: boot.engine_version }),
    ...(figures === undefined || Object.keys(figures).length === 0 ? {} : { boot: figures }),
  };
}

/**
 * The head of the one deployment `target` names: a deployment, lane or recipe name as `down`
 * takes them (deployment/NAME, lane/NAME, recipe/NAME), else a served model name. None or several
 * is a UserError saying which.
 */
export function pickHead(target: string, heads: readonly DeploymentLabels[], command: string): DeploymentLabels {
  const byName = resolveTarget(target, heads.map((labels) => ({ labels })), command);
  if (!byName.ok) throw new UserError(byName.message, byName.hint);
  const names = byName.deployments.length > 0 ? byName.deployments : heads.filter((h) => h.served_model === target).map((h) => h.deployment);
  const chosen = heads.filter((h) => names.includes(h.deployment));
  const [one, ...more] = chosen;
  if (one === undefined) {
    const known = heads.map((h) => `${h.deployment}${h.lane === undefined ? "" : ` (lane ${h.lane})`}`);
    throw new UserError(`nothing serves ${target} on the cluster`, known.length === 0 ? "launcher up RECIPE starts one" : `running: ${known.join(", ")}`);
  }
  if (more.length > 0) {
    throw new UserError(`${target} names ${chosen.length} deployments: ${chosen.map((h) => h.deployment).join(", ")}`, `name one: launcher ${command} deployment/${one.deployment}`);
  }
  return one;
}

/** What the store tells about a deployment: its engine's key and the boots it recorded. */
export interface TargetFacts {
  engineKey(cluster: string, deployment: string): string | undefined;
  history(recipe: string | undefined, limit: number): BootRecord[];
}

/** How many recent boots of a recipe are searched for the deployment's last ready one. */
const HISTORY_DEPTH = 50;

/** `target` on the cluster, reached at its head's endpoint directly (not through a gateway). */
export async function servingTarget(session: ClusterSession, facts: TargetFacts, target: string, command: string): Promise<ServingTarget> {
  const listing = await listNodes(session);
  const heads = listing.flatMap((l) => (l.reachable ? l.containers.filter((c) => c.labels.role === "head" && c.c.running).map((c) => c.labels) : []));
  const lost = listing.flatMap((l) => (l.reachable ? [] : [`${l.node} (${l.reason})`]));
  let head: DeploymentLabels;
  try {
    head = pickHead(target, heads, command);
  } catch (e) {
    // What runs on a node that could not be read is unknown: say so rather than "nothing serves".
    if (e instanceof UserError && lost.length > 0) throw new UserError(`${e.message}; could not read ${lost.join(", ")}`, e.hint);
    throw e;
  }
  const apiKey = facts.engineKey(head.cluster, head.deployment);
  return {
    url: head.endpoint,
    model: head.served_model,
    ...(apiKey === undefined ? {} : { apiKey }),
    subject: subjectOf(target, head, facts.history(head.recipe, HISTORY_DEPTH)),
    head,
  };
}
