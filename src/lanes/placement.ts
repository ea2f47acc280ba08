export type SwapPlacement =
  | { readonly ok: true; readonly nodes: readonly string[]; readonly mode: "disjoint" | "overlap" }
  | { readonly ok: false; readonly message: string };

/**
 * Where a lane's new deployment goes. Free nodes first, so the old one keeps serving while the
 * new one boots; only when too few are free does it take the old one's nodes (stop first, then
 * boot). Nodes held by other deployments are never taken. Rank order follows the cluster file.
 */
export function placeSwap(clusterNodes: readonly string[], needed: number, heldBy: ReadonlyMap<string, string>, laneDeployments: ReadonlySet<string>): SwapPlacement {
  const free = clusterNodes.filter((n) => !heldBy.has(n));
  if (free.length >= needed) return { ok: true, nodes: free.slice(0, needed), mode: "disjoint" };
  const usable = clusterNodes.filter((n) => !heldBy.has(n) || laneDeployments.has(heldBy.get(n) as string));
  if (usable.length >= needed) return { ok: true, nodes: usable.slice(0, needed), mode: "overlap" };
  const others = [...new Set([...heldBy].filter(([, d]) => !laneDeployments.has(d)).map(([, d]) => d))];
  return {
    ok: false,
    message: `the recipe needs ${needed} nodes; ${usable.length} are free or held by this lane (the others are held by ${others.join(", ")})`,
  };
}
