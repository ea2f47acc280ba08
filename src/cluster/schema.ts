import * as z from "zod";

/** A Spark shows about 119.7 GiB; below 4 GiB available, a loader's next burst can wedge it. */
export const DEFAULT_MEMORY_FLOOR_GIB = 4;

/**
 * The highest floor a cluster file may set: more than any single node launcher targets has (a
 * Spark shows 119.7 GiB), so a floor above it is MiB written for GiB (4096), not a wish: the guard
 * would kill every boot at its first sample and blame the deployment. Not lower: the rig's guard
 * test sets a floor just under what the machine it runs on has free. Each node's real total is
 * checked at preflight (memory-watch.ts floorProblem), which catches a smaller mistake (512 MiB as 512).
 */
export const MAX_MEMORY_FLOOR_GIB = 512;

const memoryFloor = z
  .number()
  .positive()
  .max(MAX_MEMORY_FLOOR_GIB, { error: `is in GiB and must be at most ${MAX_MEMORY_FLOOR_GIB} GiB (a Spark has about 119.7 GiB): a number of MiB written here reads as GiB` });

const nodeSchema = z.strictObject({
  name: z.string().meta({ description: "Node name, used in container names and messages." }),
  host: z.string().meta({ description: "SSH destination (a host name, an address, or an alias from the SSH config)." }),
  user: z.string().optional().meta({ description: "SSH user (default: from the SSH config, else the local user)." }),
  port: z.number().int().min(1).max(65535).optional().meta({ description: "SSH port." }),
  home: z.string().optional().meta({ description: "Home folder of the SSH user on the node, for ~ in mount paths (default /root for root, else /home/<user>)." }),
  fabric_ip: z.string().optional().meta({ description: "The node's IP on the fast fabric (VLLM_HOST_IP; the head's is the rendezvous address)." }),
  fabric_iface: z.string().optional().meta({ description: "The fabric netdev, e.g. enp1s0f1np1 (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, ...)." }),
  hca: z.array(z.string()).optional().meta({ description: "Active RoCE HCAs of this node, e.g. [\"rocep1s0f1\"] (NCCL_IB_HCA)." }),
  gid_index: z.number().int().min(0).optional().meta({ description: "RoCE v2 GID index of this node (NCCL_IB_GID_INDEX); differs between nodes." }),
  gpus: z.number().int().min(1).optional().meta({ description: "GPUs on the node.", default: 1 }),
  address: z.string().optional().meta({ description: "Address for HTTP to the node (the API on the head); default: the SSH config's HostName, else host." }),
  memory_floor: memoryFloor.optional().meta({ description: "GiB of available memory (MemAvailable) below which the memory guard kills the deployment on every node; default: the cluster's memory_floor." }),
});

export const DEFAULT_RUN_ARGS = [
  "--gpus", "all",
  "--network", "host",
  "--device", "/dev/infiniband",
  "--ulimit", "memlock=-1",
  "--ulimit", "nofile=1048576:1048576",
] as const;

export const clusterFileSchema = z
  .strictObject({
    name: z.string().optional().meta({ description: "Name of the cluster." }),
    api_port: z.number().int().min(1).max(65535).optional().meta({ description: "Port of the OpenAI API on the head.", default: 8000 }),
    master_port: z.number().int().min(1).max(65535).optional().meta({ description: "Rendezvous port (--master-port).", default: 29501 }),
    api_bind: z
      .string()
      .optional()
      .meta({
        description:
          "Where the head's engine listens for HTTP: \"management\" (the head's address, as launcher and its gateway reach it), \"loopback\" (127.0.0.1: launcher and its gateway run on the head), \"any\" (0.0.0.0: every address, so anyone on the network reaches the engine's routes that its key does not guard), or an IP address of the head.",
        default: "management",
      }),
    ssh: z
      .strictObject({
        config: z.string().optional().meta({ description: "SSH config file (relative to the cluster file)." }),
        known_hosts: z.string().optional().meta({ description: "known_hosts file (relative to the cluster file)." }),
        identity: z.string().optional().meta({ description: "Private key file (relative to the cluster file)." }),
        options: z.array(z.string()).optional().meta({ description: "Extra ssh -o options, e.g. [\"ConnectTimeout=10\"]." }),
      })
      .optional()
      .meta({ description: "How to reach the nodes; by default the user's own SSH setup." }),
    docker: z
      .strictObject({
        run_args: z
          .array(z.string())
          .optional()
          .meta({ description: "docker run flags for every container (replaces the DGX Spark defaults).", default: [...DEFAULT_RUN_ARGS] }),
        extra_args: z.array(z.string()).optional().meta({ description: "docker run flags added after run_args.", default: [] }),
      })
      .optional(),
    memory_floor: memoryFloor
      .optional()
      .meta({ description: "GiB of available memory (MemAvailable) below which the memory guard kills a booting deployment's containers on every node, for every node without its own.", default: DEFAULT_MEMORY_FLOOR_GIB }),
    nodes: z.array(nodeSchema).min(1).meta({ description: "The nodes in rank order: the first is the head (rank 0)." }),
  })
  .meta({ title: "launcher cluster", description: "cluster.toml: the nodes launcher deploys to." });

export type ClusterFile = z.infer<typeof clusterFileSchema>;
export const CLUSTER_KEYS = Object.keys(clusterFileSchema.shape);
export const NODE_KEYS = Object.keys(nodeSchema.shape);
export const SSH_KEYS = ["config", "known_hosts", "identity", "options"];
export const DOCKER_KEYS = ["run_args", "extra_args"];
