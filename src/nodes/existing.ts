import type { Plan } from "../plan/plan.js";
import type { DeploymentStatus } from "./status.js";
import { encodeRestartPolicy } from "../contract/deployment.js";

export type ExistingVerdict = { readonly same: true } | { readonly same: false; readonly message: string; readonly hint: string };

const ranksOf = (nodes: readonly { rank: number; node: string }[]): string =>
  [...nodes]
    .sort((a, b) => a.rank - b.rank)
    .map((n) => n.node)
    .join(",");

/**
 * What `up` makes of a deployment of the same name found anywhere on the cluster. A name is
 * unique across the cluster, so it is "already running" only when it serves (its head's /health
 * answers 200, as `status` reads it) the same recipe with the same options; anything else is
 * refused, saying what differs or in what state it is, and how to go on.
 */
export function judgeExisting(plan: Plan, found: DeploymentStatus): ExistingVerdict {
  const name = plan.deployment;
  const where = [...new Set([...found.ranks].sort((a, b) => a.rank - b.rank).map((r) => r.node))].join(", ") || "no node";
  const differences: string[] = [];
  if (found.recipe_hash !== plan.recipe_hash) differences.push(`recipe ${found.recipe} (hash ${found.recipe_hash.slice(0, 12)}), asked ${plan.recipe.id} (hash ${plan.recipe_hash.slice(0, 12)})`);
  if (found.endpoint !== plan.endpoint) differences.push(`endpoint ${found.endpoint}, asked ${plan.endpoint}`);
  const foundNodes = ranksOf(found.ranks);
  const askedNodes = ranksOf(plan.nodes);
  if (foundNodes !== askedNodes) differences.push(`nodes ${foundNodes}, asked ${askedNodes}`);
  if ((found.lane ?? "") !== (plan.lane ?? "")) differences.push(`lane ${found.lane ?? "(none)"}, asked ${plan.lane ?? "(none)"}`);
  // Kept in the labels: an `up --restart` of a deployment running without it must not pass as "already running".
  const asked = plan.restart === undefined ? undefined : encodeRestartPolicy(plan.restart);
  if (found.restart !== asked) differences.push(`restart ${found.restart ?? "(none)"}, asked ${asked ?? "(none)"}`);
  if (differences.length > 0) {
    return {
      same: false,
      message: `deployment ${name} already exists on ${where} (${found.status}) with other options: ${differences.join("; ")}. A deployment name is unique across the cluster; nothing was started`,
      hint: `pick another name (--name OTHER), or stop it first (launcher down ${name})`,
    };
  }
  if (found.status !== "serving") {
    const missing = found.missing.length === 0 ? "" : `; ${found.missing.join(", ")}`;
    return {
      same: false,
      message: `deployment ${name} exists on ${where} but does not serve (status ${found.status}, phase ${found.phase}${missing}); nothing was started`,
      hint: `if no launcher up is still booting it, stop it (launcher down ${name}) and run up again`,
    };
  }
  return { same: true };
}
