import type { DeploymentState, DeploymentStatus } from "../contract/deployment.js";
import { outageWords, type OutageNote } from "../contract/outage.js";
import type { LaneRecord } from "../store/store.js";
import { WEDGED_CODE, type WedgedDeployment } from "../contract/generation.js";

/** A deployment the gateway knows, from one cluster's labels. */
export interface KnownDeployment extends DeploymentStatus {
  readonly cluster: string;
  /** Its nodes that stopped answering while it ran there (the daemon's discovery, src/nodes/outage.ts). */
  readonly outages?: readonly OutageNote[];
}

export interface Target {
  readonly deployment: string;
  readonly cluster: string;
  readonly endpoint: string;
  /** What the engine calls its model: requests to a lane alias are rewritten to it. */
  readonly served_model: string;
  readonly lane?: string;
  readonly recipe: string;
  /** The engine it runs (absent: containers from before the label, the default engine). */
  readonly engine?: string;
}

export type Resolution =
  | { readonly kind: "route"; readonly target: Target }
  | { readonly kind: "unknown"; readonly known: readonly string[] }
  | { readonly kind: "unavailable"; readonly message: string; readonly code: string; readonly retryAfter: number };

/** One routable name in /v1/models, with launcher's extra fields. */
export interface ModelEntry {
  readonly id: string;
  readonly deployment?: string;
  readonly lane?: string;
  readonly recipe?: string;
  readonly status: string;
  readonly phase?: string;
  readonly nodes: readonly string[];
}

/**
 * A deployment the daemon's supervisor is recreating (src/supervise/supervisor.ts): its containers
 * may be gone or booting, but its names still route to a 503 that says when to come back.
 */
export interface RestartingDeployment {
  readonly cluster: string;
  readonly deployment: string;
  readonly served_model: string;
  readonly lane?: string;
  readonly attempt: number;
  /** The policy's N; absent: no limit. */
  readonly max?: number;
  /** Seconds: the backoff left plus a boot's length. */
  readonly retryAfter: number;
  /** Its restarts are spent and no poll has shown it since: it is degraded, whatever the last poll showed. */
  readonly gaveUp?: true;
  /** What failed: "rank 1 on n2 exited (exit 137)". */
  readonly reason: string;
}

/** Seconds a client is told to wait for a deployment that is not serving and that no one is booting. */
const DEGRADED_RETRY_S = 30;

/** A wedged deployment's 503: its own code, and since when it generated nothing. */
const wedgedResolution = (w: WedgedDeployment, name: string): Extract<Resolution, { kind: "unavailable" }> => ({
  kind: "unavailable",
  code: WEDGED_CODE,
  retryAfter: DEGRADED_RETRY_S,
  message: `model ${name}: ${w.message}`,
});

const restartingResolution = (r: RestartingDeployment, name: string): Extract<Resolution, { kind: "unavailable" }> =>
  r.gaveUp === true
    ? {
        kind: "unavailable",
        code: "deployment_degraded",
        retryAfter: DEGRADED_RETRY_S,
        message: `model ${name} (deployment ${r.deployment}) is not serving: given up after ${r.attempt} restart${r.attempt === 1 ? "" : "s"}; the last failure: ${r.reason}`,
      }
    : {
        kind: "unavailable",
        code: "deployment_restarting",
        retryAfter: r.retryAfter,
        message: `model ${name} (deployment ${r.deployment}) is restarting (restart ${r.attempt}${r.max === undefined ? "" : ` of at most ${r.max}`}) after ${r.reason}`,
      };

/** The status /v1/models shows for an unavailable name whose answer says more than its labels. */
const STATUS_OF_CODE: Readonly<Record<string, string>> = {
  lane_switching: "switching",
  lane_empty: "empty",
  deployment_restarting: "restarting",
  deployment_degraded: "degraded",
  [WEDGED_CODE]: "wedged",
};

export interface RouteTable {
  resolve(model: string | undefined): Resolution;
  models(): readonly ModelEntry[];
}

const startedAt = (d: DeploymentStatus): number => (d.uptime_seconds === undefined ? 0 : -d.uptime_seconds);

const targetOf = (d: KnownDeployment): Target => ({
  deployment: d.deployment,
  cluster: d.cluster,
  endpoint: d.endpoint,
  served_model: d.served_model,
  ...(d.lane === undefined ? {} : { lane: d.lane }),
  recipe: d.recipe,
  ...(d.engine === undefined ? {} : { engine: d.engine }),
});

/** "; n1 since T (vanished), last seen with X GiB available ...": each outage of its nodes, when known. */
const outageTail = (outages: readonly OutageNote[] | undefined): string => (outages === undefined || outages.length === 0 ? "" : `; ${outages.map(outageWords).join("; ")}`);

/** Why a deployment that does not serve cannot take the request, by its status. */
const UNAVAILABLE: Record<Exclude<DeploymentState, "serving">, (d: KnownDeployment, name: string) => Extract<Resolution, { kind: "unavailable" }>> = {
  // Every rank runs but its head's log says the engine ended (status's fault), or ranks are gone.
  degraded: (d, name) => ({ kind: "unavailable", code: "deployment_degraded", retryAfter: DEGRADED_RETRY_S, message: `model ${name} (deployment ${d.deployment}) is not serving: ${d.missing.length > 0 ? `missing ${d.missing.join("; ")}` : d.fault !== undefined ? `its engine ended: ${d.fault}` : "its engine no longer answers /health"}` }),
  booting: (d, name) => ({ kind: "unavailable", code: "model_booting", retryAfter: 10, message: `model ${name} (deployment ${d.deployment}) is booting: phase ${d.phase}` }),
  // Its head does not answer and a node of it cannot be read: whether it lives is unknown.
  unreachable: (d, name) => ({
    kind: "unavailable",
    code: "deployment_unreachable",
    retryAfter: 10,
    message: `model ${name} (deployment ${d.deployment}) cannot be reached: ${d.unreachable.join(", ")} unreachable and its head does not answer /health${outageTail(d.outages)}`,
  }),
};

// A "serving" deployment that routes anyway (proven by `up` after the last poll) never gets here,
// unless it is wedged.
const unavailable = (d: KnownDeployment, name: string, wedged: WedgedDeployment | undefined): Resolution =>
  wedged !== undefined ? wedgedResolution(wedged, name) : UNAVAILABLE[d.status === "serving" ? "booting" : d.status](d, name);


/**
 * The gateway's routing, as a pure function of what the nodes run (labels) and what the store
 * says of lanes. A lane name routes to the lane's deployment, a served name to its deployment.
 * The store only breaks ties and marks a lane "switching"; it never routes to what the labels
 * do not show.
 */
export function routeTable(
  deployments: readonly KnownDeployment[],
  lanes: readonly LaneRecord[],
  labelsReadAt?: number,
  unreachable: readonly string[] = [],
  restarting: readonly RestartingDeployment[] = [],
  /** Deployments whose /health answers but that generate nothing (src/supervise/generation.ts): never routed to. */
  wedged: readonly WedgedDeployment[] = [],
): RouteTable {
  const wedgedOf = (d: KnownDeployment): WedgedDeployment | undefined => (wedged.length === 0 ? undefined : wedged.find((w) => w.cluster === d.cluster && w.deployment === d.deployment));
  const laneRecords = new Map(lanes.map((l) => [l.name, l]));
  const laneNames = new Set([...lanes.map((l) => l.name), ...[...deployments, ...restarting].flatMap((d) => (d.lane === undefined ? [] : [d.lane]))]);
  /** The restart under way of what a name would route to, when nothing else serves it. */
  const restartOf = (name: string, chosen: KnownDeployment | undefined, named: (r: RestartingDeployment) => boolean): Resolution | undefined => {
    const r = restarting.find((x) => named(x) && (chosen === undefined || (x.deployment === chosen.deployment && x.cluster === chosen.cluster)));
    return r === undefined ? undefined : restartingResolution(r, name);
  };
  const current = new Set(lanes.flatMap((l) => (l.state === "serving" && l.deployment !== undefined ? [l.deployment] : [])));
  // `up` proved these ready after the labels were last read: route to them now rather than a
  // poll later. Their containers must all still be there.
  const provenLater = new Set(
    lanes.flatMap((l) => (l.state === "serving" && l.deployment !== undefined && labelsReadAt !== undefined && Date.parse(l.since) > labelsReadAt ? [l.deployment] : [])),
  );
  const serving = (d: KnownDeployment): boolean => (d.status === "serving" || (provenLater.has(d.deployment) && d.missing.length === 0)) && wedgedOf(d) === undefined;
  /** Serving first; among equals the preferred, then the newest, so a fresh deployment beats a leftover. */
  const best = (candidates: readonly KnownDeployment[], preferred?: string): KnownDeployment | undefined => {
    const rank = (d: KnownDeployment): number => (serving(d) ? 0 : d.status === "booting" ? 1 : 2);
    return [...candidates].sort((a, b) => rank(a) - rank(b) || Number(b.deployment === preferred) - Number(a.deployment === preferred) || startedAt(b) - startedAt(a))[0];
  };

  const resolveLane = (name: string): Resolution => {
    const rec = laneRecords.get(name);
    const inLane = deployments.filter((d) => d.lane === name);
    const chosen = best(inLane, rec?.deployment);
    if (rec?.state === "switching") {
      const next = inLane.find((d) => d.deployment === rec.switching_to);
      // The labels win: once the new deployment serves, route to it whatever the store says.
      if (next !== undefined && serving(next)) return { kind: "route", target: targetOf(next) };
      const where = next === undefined ? "" : ` (phase ${next.phase})`;
      return { kind: "unavailable", code: "lane_switching", retryAfter: 10, message: `lane ${name} is switching from ${rec.deployment ?? "nothing"} to ${rec.switching_to ?? "?"}${where}` };
    }
    if (chosen === undefined || !serving(chosen)) {
      const r = restartOf(name, chosen, (x) => x.lane === name);
      if (r !== undefined) return r;
    }
    if (chosen === undefined && unreachable.length > 0) {
      // Nothing that answered runs it, but a node that did not answer may: that is not "empty".
      return {
        kind: "unavailable",
        code: "deployment_unreachable",
        retryAfter: 10,
        message: `lane ${name}: no node that answered runs it${rec?.deployment === undefined ? "" : ` (it last served ${rec.deployment})`}, and ${unreachable.join(", ")} could not be read, so whether it runs there is unknown`,
      };
    }
    if (chosen === undefined) {
      const hint = rec?.deployment === undefined ? "" : ` (it last served ${rec.deployment}, which no node runs now)`;
      return { kind: "unavailable", code: "lane_empty", retryAfter: 30, message: `lane ${name} has no deployment running${hint}: launcher up RECIPE --lane ${name}` };
    }
    return serving(chosen) ? { kind: "route", target: targetOf(chosen) } : unavailable(chosen, name, wedgedOf(chosen));
  };

  const resolveServed = (name: string): Resolution | undefined => {
    const candidates = deployments.filter((d) => d.served_model === name);
    const preferred = candidates.find((d) => current.has(d.deployment))?.deployment;
    const chosen = best(candidates, preferred);
    if (chosen === undefined || !serving(chosen)) {
      const r = restartOf(name, chosen, (x) => x.served_model === name);
      if (r !== undefined) return r;
    }
    if (chosen === undefined) return undefined;
    return serving(chosen) ? { kind: "route", target: targetOf(chosen) } : unavailable(chosen, name, wedgedOf(chosen));
  };

  const names = (): string[] => [...new Set([...laneNames, ...[...deployments, ...restarting].map((d) => d.served_model)])].sort();

  return {
    resolve(model) {
      if (model === undefined) {
        // No model named: fine when there is exactly one thing to talk to.
        const up = deployments.filter(serving);
        if (up.length === 1 && up[0] !== undefined) return { kind: "route", target: targetOf(up[0]) };
        return { kind: "unknown", known: names() };
      }
      if (laneNames.has(model)) return resolveLane(model);
      return resolveServed(model) ?? { kind: "unknown", known: names() };
    },
    models() {
      return names().map((id): ModelEntry => {
        const r = laneNames.has(id) ? resolveLane(id) : resolveServed(id);
        const d =
          r?.kind === "route"
            ? deployments.find((x) => x.deployment === r.target.deployment && x.cluster === r.target.cluster)
            : best(deployments.filter((x) => (laneNames.has(id) ? x.lane === id : x.served_model === id)));
        const status = r?.kind === "route" ? "serving" : r?.kind === "unavailable" ? (STATUS_OF_CODE[r.code] ?? d?.status ?? "unknown") : "unknown";
        return {
          id,
          ...(d === undefined ? {} : { deployment: d.deployment, recipe: d.recipe, phase: status === "serving" ? "serving" : d.phase }),
          ...(laneNames.has(id) ? { lane: id } : d?.lane === undefined ? {} : { lane: d.lane }),
          status,
          nodes: d?.ranks.map((x) => x.node) ?? [],
        };
      });
    },
  };
}
