import type { ClusterNode } from "./cluster.js";

// Four fabric ports up (mesh or ring cabling between Sparks): what NCCL needs to use them all.
const FOUR_PORT_ENV: Readonly<Record<string, string>> = { NCCL_IB_SUBNET_AWARE_ROUTING: "1", NCCL_IB_MERGE_NICS: "0", NCCL_NET_PLUGIN: "none" };

const IFACE_ENV_KEYS = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "MN_IF_NAME", "OMPI_MCA_btl_tcp_if_include"] as const;

/** Every env key launcher sets from the cluster file; recipes must leave them alone. */
export const FABRIC_ENV_KEYS: readonly string[] = [
  ...IFACE_ENV_KEYS,
  "NCCL_IB_HCA",
  "NCCL_IB_DISABLE",
  "NCCL_IB_GID_INDEX",
  "VLLM_HOST_IP",
  "RAY_NODE_IP_ADDRESS",
  "RAY_OVERRIDE_NODE_IP_ADDRESS",
  ...Object.keys(FOUR_PORT_ENV),
];

/** The fabric env of one node, from that node's own values only: a worker never gets the head's. */
export function fabricEnv(node: ClusterNode, backend: "mp" | "ray"): Record<string, string> {
  const env: Record<string, string> = {};
  if (node.fabric_iface !== undefined) {
    for (const key of IFACE_ENV_KEYS) {
      env[key] = node.fabric_iface;
    }
  }
  if (node.hca.length > 0) {
    env.NCCL_IB_HCA = node.hca.join(",");
    env.NCCL_IB_DISABLE = "0";
  }
  if (node.gid_index !== undefined) env.NCCL_IB_GID_INDEX = String(node.gid_index);
  if ((node.ports_up ?? 0) >= 4) Object.assign(env, FOUR_PORT_ENV);
  if (node.fabric_ip !== undefined) {
    env.VLLM_HOST_IP = node.fabric_ip;
    if (backend === "ray") {
      env.RAY_NODE_IP_ADDRESS = node.fabric_ip;
      env.RAY_OVERRIDE_NODE_IP_ADDRESS = node.fabric_ip;
    }
  }
  return env;
}
