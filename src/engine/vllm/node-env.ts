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
