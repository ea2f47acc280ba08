import type { ClusterNode } from "../../cluster/cluster.js";
import { FABRIC_ENV_KEYS, fabricEnv } from "../../cluster/fabric-env.js";
import type { EngineRecipe } from "../adapter.js";

/*
 * vLLM's per-node env, beside the communication libraries' (../../cluster/fabric-env.ts):
 * - VLLM_HOST_IP: vLLM's own address for the node, "If you are using multi-node inference, you
 *   should set this differently on each node" (vllm/envs.py, VLLM_HOST_IP; read by get_ip()).
 * - RAY_NODE_IP_ADDRESS / RAY_OVERRIDE_NODE_IP_ADDRESS: the Ray backend's node address
 *   (`ray start --node-ip-address` is passed as well, ./ray.ts).
 */

/** Every key vllmNodeEnv sets: the recipe's [env] may set none of them. */
export const VLLM_NODE_ENV_KEYS: readonly string[] = [...FABRIC_ENV_KEYS, "VLLM_HOST_IP", "RAY_NODE_IP_ADDRESS", "RAY_OVERRIDE_NODE_IP_ADDRESS"];

/** One node's env, from that node's own facts only: a worker never gets the head's address. */
export function vllmNodeEnv(recipe: Pick<EngineRecipe, "distributed_backend">, node: ClusterNode): Record<string, string> {
  const env = fabricEnv(node);
  if (node.fabric_ip !== undefined) {
    env.VLLM_HOST_IP = node.fabric_ip;
    if (recipe.distributed_backend === "ray") {
      env.RAY_NODE_IP_ADDRESS = node.fabric_ip;
      env.RAY_OVERRIDE_NODE_IP_ADDRESS = node.fabric_ip;
    }
  }
  return env;
}

/** The per-node keys launcher manages among the names `list` gives (comma-separated, each `NAME[:suffix]`). */
const managedAmong = (list: string): string[] =>
  list.split(",").map((v) => v.trim().split(":")[0] ?? "").filter((name) => VLLM_NODE_ENV_KEYS.includes(name));

/**
 * vllm/v1/executor/vllm_net_devices.py set_worker_net_device (mp and uniproc workers): with both
 * VLLM_GPU_NIC_PCIE_MAPPING (GPU_BDF=NIC_BDF pairs) and VLLM_NIC_SELECTION_VARS (env names, each
 * `NAME[:suffix]`) set, each worker finds the RDMA device of the NIC mapped to its GPU and puts it
 * in front of each named variable's value (`value = f"{rdma_dev}{suffix}"`, then
 * `f"{value},{existing}"`): NCCL_IB_HCA or UCX_NET_DEVICES then lead with vLLM's choice, not
 * launcher's per-node value. One without the other raises ("both must be set together").
 */
export const VLLM_ENV_OVERRIDES = [
  {
    env: "VLLM_NIC_SELECTION_VARS",
    needs: "VLLM_GPU_NIC_PCIE_MAPPING",
    says: (value: string): string => {
      const managed = managedAmong(value);
      const over = managed.length === 0 ? `none of the NCCL/UCX variables launcher manages per node (${FABRIC_ENV_KEYS.join(", ")})` : `${managed.join(", ")}, which launcher sets per node from the cluster file`;
      return `vLLM's workers put the RDMA device that VLLM_GPU_NIC_PCIE_MAPPING maps to their GPU in front of each variable it lists: here ${over}`;
    },
  },
  {
    env: "VLLM_GPU_NIC_PCIE_MAPPING",
    needs: "VLLM_NIC_SELECTION_VARS",
    says: (): string => `with VLLM_NIC_SELECTION_VARS, vLLM's workers choose their NIC from this map and put it in front of the NCCL/UCX variables that lists (launcher sets ${FABRIC_ENV_KEYS.filter((k) => /HCA|NET_DEVICES/.test(k)).join(" and ")} per node)`,
  },
] as const;
