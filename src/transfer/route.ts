import type { ClusterNode } from "../cluster/cluster.js";
import { UserError } from "../config/errors.js";
import { diffIdsOf, layerSkip, storedChains, type LayerSkip } from "./layers.js";

/** How payload reached a node: straight from another node over one of its networks, or relayed by this machine. */
export type TransferPath = "fabric" | "management" | "relay";

/** Where a node's receiving end listens and where the node before it connects. */
export interface NodeRoute {
  readonly node: string;
  /** The address the receiving end binds: the fabric IP, else every address of the node. */
  readonly listen: string;
  /** The address the previous hop connects to. */
  readonly connect: string;
  readonly path: Exclude<TransferPath, "relay">;
}

/**
 * The fabric address when the cluster file (or detection) knows it: the 200 Gb/s link between
 * Sparks. Else the management address SSH reaches (`ssh -G`'s host name), listened on everywhere
 * because a host name may resolve to another address on the node itself (Debian's 127.0.1.1).
 */
export function nodeRoute(node: ClusterNode): NodeRoute | undefined {
  if (node.fabric_ip !== undefined) return { node: node.name, listen: node.fabric_ip, connect: node.fabric_ip, path: "fabric" };
  if (node.address !== undefined) return { node: node.name, listen: "0.0.0.0", connect: node.address, path: "management" };
  return undefined;
}

/** Each node's route, by name; a node with neither a fabric IP nor a known address has none. */
export function clusterRoutes(nodes: readonly ClusterNode[]): ReadonlyMap<string, NodeRoute> {
  return new Map(nodes.flatMap((n) => {
    const r = nodeRoute(n);
    return r === undefined ? [] : [[n.name, r] as const];
  }));
}

/** The reason the relay is used when the user asks for it. */
export const RELAY_ASKED = "--relay was given";

/** What one SSH round trip found on a node before any byte moves. */
export interface NodeProbe {
  readonly node: string;
  /** perl with IO::Socket::INET, bash and sha256sum (the hops' HMAC): what a hop needs. */
  readonly tools: boolean;
  /** The path whose filesystem was measured. */
  readonly path: string;
  /** Free bytes there; undefined when df could not say. */
  readonly free?: number;
  /** With "docker" and "layers": each image's RootFS.Layers (diff IDs), what src/transfer/layers.ts needs to know which layers the node stores. */
  readonly images?: readonly (readonly string[])[];
  /** With "docker": whose store keeps the images: Docker's own (graph drivers) or containerd's (its snapshotters). */
  readonly store?: "docker" | "containerd";
  /** With "docker": the UTC offset of local time at the epoch (`date -d @0 +%:z`), which a Docker before 25 writes into its archive (src/transfer/layers.ts). */
  readonly epochOffset?: string;
}

// $1: "docker" (Docker's root folder, where `docker load` unpacks and stores) or "path", $2 the
// path; $3 "layers": also every image's layers (docker). With docker, also its image store (a
// DriverStatus naming containerd's snapshotter, moby daemon/info.go) and local time's offset at
// the epoch. One `docker info` gives both the root and the store: it is the slowest thing asked.
export const PROBE_SCRIPT = `p=$2; [ "$1" = docker ] && info=$(docker info --format '{{.DockerRootDir}}{{"\\n"}}{{json .DriverStatus}}' 2>/dev/null) && p=$(printf '%s\\n' "$info" | sed -n 1p)
if command -v bash >/dev/null && command -v sha256sum >/dev/null && perl -MIO::Socket::INET -MIO::Select -e1 2>/dev/null; then echo "tools yes"; else echo "tools no"; fi
echo "path $p"
d=$p; while [ -n "$d" ] && [ ! -e "$d" ] && [ "$d" != / ]; do d=$(dirname "$d"); done
[ -n "$d" ] && df -Pk -- "$d" 2>/dev/null | awk 'NR==2 {printf "free %.0f\\n", $4 * 1024}'
if [ "$1" = docker ]; then
  case $info in *io.containerd.snapshotter*) echo "store containerd" ;; *) echo "store docker" ;; esac
  echo "epoch $(date -d @0 +%:z 2>/dev/null)"
fi
if [ "$1" = docker ] && [ "$3" = layers ]; then ids=$(docker image ls --all --quiet --no-trunc 2>/dev/null | sort -u); [ -z "$ids" ] || docker image inspect --format 'layers {{json .RootFS.Layers}}' $ids 2>/dev/null; fi
exit 0`;

export function parseProbe(node: string, out: string): NodeProbe {
  let tools = false;
  let path = "";
  let free: number | undefined;
  const images: string[][] = [];
  let store: NodeProbe["store"];
  let epochOffset: string | undefined;
  for (const line of out.split("\n")) {
    const [word, ...rest] = line.trim().split(" ");
    const value = rest.join(" ");
    if (word === "tools") tools = value === "yes";
    if (word === "path") path = value;
    if (word === "free" && /^\d+$/.test(value)) free = Number(value);
    if (word === "store" && (value === "docker" || value === "containerd")) store = value;
    if (word === "epoch" && /^[+-]\d\d:\d\d$/.test(value)) epochOffset = value;
    if (word === "layers") {
      const layers = diffIdsOf(value);
      if (layers !== undefined) images.push(layers);
    }
  }
  return { node, tools, path, ...(free === undefined ? {} : { free }), ...(images.length === 0 ? {} : { images }), ...(store === undefined ? {} : { store }), ...(epochOffset === undefined ? {} : { epochOffset }) };
}

const size = (b: number): string => (b >= 1 << 30 ? `${(b / 1073741824).toFixed(2)} GiB` : `${(b / 1048576).toFixed(1)} MiB`);

/**
 * Every destination with less free space than it needs, as one error naming each node and path;
 * `need` says why that much (the caller knows what is written where), `hint` what to do.
 */
export function checkSpace(probes: readonly NodeProbe[], need: ReadonlyMap<string, number>, what: string, hint = "free space there (docker image prune, old model snapshots) or leave the node out with --nodes; nothing was sent"): void {
  const short = probes.filter((p) => p.free !== undefined && (need.get(p.node) ?? 0) > p.free);
  if (short.length === 0) return;
  throw new UserError(
    `not enough free space for ${what}:\n${short.map((p) => `  - ${p.node}: ${p.path} has ${size(p.free ?? 0)} free, needs ${size(need.get(p.node) ?? 0)}`).join("\n")}`,
    hint,
  );
}

/** Why a destination cannot take the payload straight from another node, or undefined when it can. */
export function directBlocker(source: NodeProbe | undefined, dest: NodeProbe, route: NodeRoute | undefined, sourceName: string): string | undefined {
  if (source === undefined) return `the source ${sourceName} is this machine`;
  if (!source.tools) return `${sourceName} lacks perl (IO::Socket::INET), bash or sha256sum to send`;
  if (!dest.tools) return `${dest.node} lacks perl (IO::Socket::INET), bash or sha256sum to receive`;
  if (route === undefined) return `${dest.node} has neither a fabric_ip nor a known address`;
  return undefined;
}

/** A destination the chain will serve, or one the relay serves and why. */
export interface RoutePlan {
  readonly direct: readonly NodeRoute[];
  readonly relay: readonly { node: string; why: string }[];
}

/** Splits the destinations (in cluster order: the chain's order) between the chain and the relay. */
export function planRoutes(sourceName: string, source: NodeProbe | undefined, dests: readonly NodeProbe[], routes: ReadonlyMap<string, NodeRoute>, forceRelay: string | undefined): RoutePlan {
  const direct: NodeRoute[] = [];
  const relay: { node: string; why: string }[] = [];
  for (const d of dests) {
    const route = routes.get(d.node);
    const why = forceRelay ?? directBlocker(source, d, route, sourceName);
    if (why === undefined && route !== undefined) direct.push(route);
    else relay.push({ node: d.node, why: why ?? "no route" });
  }
  return { direct, relay };
}

/**
 * What an image push leaves out of its archive, from the probes made before the bytes: nothing
 * unless the source runs the filter (perl, as a hop needs); a target whose images containerd keeps
 * counts as storing none (its `docker load` takes an archive with layers missing and only warns
 * when it cannot unpack them: moby daemon/containerd/image_exporter.go).
 */
export function pushSkip(diffIds: readonly string[], source: NodeProbe | undefined, targets: readonly NodeProbe[]): LayerSkip | undefined {
  if (source?.tools !== true) return undefined;
  return layerSkip(diffIds, targets.map((p) => storedChains(p.store === "containerd" ? [] : (p.images ?? []))), source.epochOffset);
}
