import type { ClusterNode } from "./cluster.js";

/*
 * The fabric env launcher sets on each node for the communication libraries every engine's ranks
 * use: only variables that a component in the serving path really reads, each with where it is
 * read. Set per node from that node's own values. An engine's own address variables are its
 * adapter's (src/engine/vllm/node-env.ts).
 *
 * - NCCL_SOCKET_IFNAME: NCCL's bootstrap and socket transport interface (NCCL user guide, env.rst
 *   "NCCL_SOCKET_IFNAME": a list of interface-name prefixes).
 * - GLOO_SOCKET_IFNAME: the interface of torch.distributed's Gloo groups, which vLLM creates for
 *   its CPU-side groups (vllm/distributed/parallel_state.py, GroupCoordinator: a "gloo" cpu_group);
 *   PyTorch reads it for the Gloo device (torch/csrc/distributed/c10d, getCvarString
 *   {"GLOO_SOCKET_IFNAME"}; PyTorch docs, distributed.rst "Choosing the network interface to use").
 * - NCCL_IB_HCA / NCCL_IB_DISABLE / NCCL_IB_GID_INDEX: NCCL's IB/RoCE transport (env.rst; the params
 *   are NCCL_PARAM(IbDisable, "IB_DISABLE") in src/transport/net_ib.cc, IB_HCA and IB_GID_INDEX
 *   beside it). The GID index differs between Sparks (3 or 4): a wrong one fails every RDMA connect.
 * - UCX_NET_DEVICES: UCX (NIXL's transport, and what vLLM forwards to Ray workers with its UCX_*
 *   prefix, vllm/ray/ray_env.py) takes RDMA devices as DEVICE:PORT ("mlx5_0:1", Open MPI docs,
 *   tuning-apps/networking/ib-and-roce: `UCX_NET_DEVICES=mlx5_0:1`) and a plain netdev name only
 *   for its TCP transport: set to the fabric netdev it would confine UCX to TCP, so it gets the
 *   HCAs' ports, and only when the node has HCAs.
 * - Four ports up: NCCL_IB_MERGE_NICS=0 (NCCL_PARAM(IbMergeNics, "IB_MERGE_NICS", 1), net_ib.cc:
 *   each port reaches a different neighbour, so they must not merge into one virtual NIC),
 *   NCCL_IB_SUBNET_AWARE_ROUTING=1 (NCCL_PARAM(IbSubnetAwareRouting, ...) in
 *   src/transport/net_ib/connect.cc, NCCL 2.30.7 and later: pick the HCA on the peer's subnet),
 *   NCCL_NET_PLUGIN=none (env.rst: no external net plugin, NCCL's own IB transport).
 *
 * Dropped because nothing launched here reads them: TP_SOCKET_IFNAME (TensorPipe, torch RPC only;
 * vLLM does not use torch.distributed.rpc), OMPI_MCA_btl_tcp_if_include (Open MPI's TCP BTL; vLLM
 * runs no MPI), MN_IF_NAME (one community launcher's own script variable).
 */

// Four fabric ports up (mesh or ring cabling between Sparks): what NCCL needs to use them all.
const FOUR_PORT_ENV: Readonly<Record<string, string>> = { NCCL_IB_SUBNET_AWARE_ROUTING: "1", NCCL_IB_MERGE_NICS: "0", NCCL_NET_PLUGIN: "none" };

const IFACE_ENV_KEYS = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"] as const;

/** Every env key fabricEnv sets from the cluster file; recipes must leave them alone. */
export const FABRIC_ENV_KEYS: readonly string[] = [
  ...IFACE_ENV_KEYS,
  "UCX_NET_DEVICES",
  "NCCL_IB_HCA",
  "NCCL_IB_DISABLE",
  "NCCL_IB_GID_INDEX",
  ...Object.keys(FOUR_PORT_ENV),
];

/**
 * An HCA as UCX names a device port. On a ConnectX-7 each port is its own RDMA device with port 1
 * (/sys/class/infiniband/<hca>/ports/1, as detection reads it); `mlx5_0:2` given in the cluster
 * file keeps its port.
 */
const ucxDevice = (hca: string): string => (hca.includes(":") ? hca : `${hca}:1`);

/** The fabric env of one node, from that node's own values only: a worker never gets the head's. */
export function fabricEnv(node: ClusterNode): Record<string, string> {
  const env: Record<string, string> = {};
  if (node.fabric_iface !== undefined) {
    for (const key of IFACE_ENV_KEYS) {
      env[key] = node.fabric_iface;
    }
  }
  if (node.hca.length > 0) {
    env.NCCL_IB_HCA = node.hca.join(",");
    env.NCCL_IB_DISABLE = "0";
    env.UCX_NET_DEVICES = node.hca.map(ucxDevice).join(",");
  }
  if (node.gid_index !== undefined) env.NCCL_IB_GID_INDEX = String(node.gid_index);
  if ((node.ports_up ?? 0) >= 4) Object.assign(env, FOUR_PORT_ENV);
  return env;
}

/** What a node of a multi-node plan lacks to be reached on the fabric. */
export interface FabricGap {
  readonly node: string;
  readonly missing: readonly ("fabric_ip" | "fabric_iface")[];
}

/**
 * Nodes of a multi-node deployment without a fabric IP or interface (neither in the cluster file
 * nor detected): NCCL, Gloo and vLLM would then pick an address themselves, often the management
 * LAN, or fail to rendezvous. One node alone needs no fabric.
 */
export function fabricGaps(nodes: readonly ClusterNode[]): FabricGap[] {
  if (nodes.length < 2) return [];
  return nodes.flatMap((n): FabricGap[] => {
    const missing = [...(n.fabric_ip === undefined ? ["fabric_ip" as const] : []), ...(n.fabric_iface === undefined ? ["fabric_iface" as const] : [])];
    return missing.length === 0 ? [] : [{ node: n.name, missing }];
  });
}

/** The one wording of a fabric gap, for `plan`'s warning and `up`'s error alike. */
export function describeFabricGap(gap: FabricGap, clusterFile: string): { message: string; hint: string } {
  const what = gap.missing.map((m) => (m === "fabric_ip" ? "fabric IP" : "fabric interface")).join(" or ");
  return {
    message: `node ${gap.node} has no ${what} (neither in ${clusterFile} nor detected): NCCL, Gloo and vLLM would pick an address themselves, often the management network`,
    hint: `run \`launcher doctor --cluster ${clusterFile}\` to detect it, or set ${gap.missing.join(" and ")} for ${gap.node} in ${clusterFile}`,
  };
}
