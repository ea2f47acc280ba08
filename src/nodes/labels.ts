import { RemoteError, UserError } from "../config/errors.js";
import type { ContainerInfo, Docker } from "../remote/docker.js";
import { UnreachableError } from "../remote/transport.js";
import { decodeLabels, DEPLOYMENT_LABEL, type DeploymentLabels } from "../contract/deployment.js";
import type { ClusterSession } from "./session.js";

/** A launcher container as read on a node, with its decoded labels. */
export interface Labelled {
  readonly node: string;
  readonly c: ContainerInfo;
  readonly labels: DeploymentLabels;
}

/** What one node said when asked for launcher's containers. */
export type NodeListing =
  | {
      readonly node: string;
      readonly docker: Docker;
      readonly reachable: true;
      readonly containers: readonly Labelled[];
      /** Containers with a launcher.deployment label whose other labels do not decode. */
      readonly strays: readonly ContainerInfo[];
      readonly undecodable: readonly string[];
    }
  | { readonly node: string; readonly reachable: false; readonly reason: string };

/**
 * The one place that decides a node could not be read: ssh could not reach it (UnreachableError)
 * or its Docker did not answer. Either way what runs there is unknown, never "nothing".
 */
export async function listNodes(session: ClusterSession, only?: ReadonlySet<string>, stopFirst?: ReadonlyMap<string, readonly string[]>): Promise<NodeListing[]> {
  return Promise.all(
    [...session.docker]
      .filter(([node]) => only === undefined || only.has(node))
      .map(async ([node, docker]): Promise<NodeListing> => {
        try {
          const containers: Labelled[] = [];
          const undecodable: string[] = [];
          const strays: ContainerInfo[] = [];
          // `stopFirst`: these containers of the node are stopped (no grace) in the same round trip, just before it is listed.
          const stop = stopFirst?.get(node) ?? [];
          for (const c of await (stop.length > 0 ? docker.stopThenList(DEPLOYMENT_LABEL, stop) : docker.containers(DEPLOYMENT_LABEL))) {
            const d = decodeLabels(c.labels);
            if (d.ok) containers.push({ node, c, labels: d.labels });
            else {
              strays.push(c);
              undecodable.push(`${node}: container ${c.name} carries launcher labels that do not decode (${d.problem}); only \`launcher down --all\` removes it`);
            }
          }
          return { node, docker, reachable: true, containers, strays, undecodable };
        } catch (e) {
          return { node, reachable: false, reason: reasonOf(e) };
        }
      }),
  );
}

/** Why a node could not be used, in a few words, from what its transport said. */
export function reasonOf(e: unknown): string {
  if (e instanceof UnreachableError) return `SSH unreachable: ${e.detail ?? ""}`.trim();
  if (e instanceof RemoteError) return `Docker unreachable: ${e.message}${e.detail ? `: ${e.detail.split("\n").slice(-1)[0]}` : ""}`;
  throw e;
}

export const TARGET_KINDS = ["deployment", "lane", "recipe"] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

/** `lane/chat` names a lane; a bare `chat` may be a deployment, a lane or a recipe. */
export function parseTarget(text: string): { kind?: TargetKind; name: string } {
  const slash = text.indexOf("/");
  const kind = TARGET_KINDS.find((k) => k === text.slice(0, slash));
  if (slash < 0 || kind === undefined) return { name: text };
  return { kind, name: text.slice(slash + 1) };
}

export type TargetResolution =
  | { readonly ok: true; readonly deployments: readonly string[] }
  | { readonly ok: false; readonly message: string; readonly hint: string; readonly candidates: readonly string[] };

const field: Record<TargetKind, (l: DeploymentLabels) => string | undefined> = { deployment: (l) => l.deployment, lane: (l) => l.lane, recipe: (l) => l.recipe };

/**
 * Which deployments a command-line target names, from the labels alone. A qualified target
 * (`deployment/`, `lane/`, `recipe/`) names everything of that kind under that name; a bare name
 * that fits more than one deployment is refused with the candidates, so that one word never stops
 * more than was meant. `undefined` is `--all`.
 */
export function resolveTarget(target: string | undefined, containers: readonly { readonly labels: DeploymentLabels }[], command: string): TargetResolution {
  const byName = new Map(containers.map((c) => [c.labels.deployment, c.labels]));
  if (target === undefined) return { ok: true, deployments: [...byName.keys()].sort() };
  const { kind, name } = parseTarget(target);
  const kinds = kind === undefined ? TARGET_KINDS : [kind];
  const matched = [...byName.values()].filter((l) => kinds.some((k) => field[k](l) === name)).sort((a, b) => a.deployment.localeCompare(b.deployment));
  if (kind !== undefined || matched.length <= 1) return { ok: true, deployments: matched.map((l) => l.deployment) };
  const candidates = matched.map((l) => `deployment/${l.deployment} (recipe ${l.recipe}${l.lane === undefined ? "" : `, lane ${l.lane}`})`);
  const ways = TARGET_KINDS.filter((k) => matched.some((l) => field[k](l) === name)).map((k) => `launcher ${command} ${k}/${name}`);
  return {
    ok: false,
    message: `${name} names ${matched.length} deployments: ${candidates.join(", ")}`,
    hint: `name exactly one (launcher ${command} deployment/${matched[0]?.deployment ?? name}), or say which kind of name you meant: ${ways.join(", ")}`,
    candidates,
  };
}

/** resolveTarget, or the UserError that says why not. */
export function targetDeployments(target: string | undefined, containers: readonly { readonly labels: DeploymentLabels }[], command: string): ReadonlySet<string> {
  const r = resolveTarget(target, containers, command);
  if (!r.ok) throw new UserError(r.message, r.hint);
  return new Set(r.deployments);
}
