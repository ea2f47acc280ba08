export interface ClusterNode {
  readonly name: string;
  readonly rank: number;
  readonly host: string;
  readonly user?: string;
  readonly port?: number;
  /** Home of the SSH user on the node, for `~` in mount paths; undefined when the user is unknown. */
  readonly home?: string;
  readonly fabric_ip?: string;
  readonly fabric_iface?: string;
  readonly hca: readonly string[];
  readonly gid_index?: number;
  readonly gpus: number;
  /** Where HTTP reaches the node; host may be an SSH alias that only ssh understands. */
  readonly address?: string;
  /**
   * The IP this machine's resolver gives for `address` when that is a name (never from the cluster
   * file): the head's engine binds to it, since a name resolved on the node itself can say
   * something else (Debian and Ubuntu map a machine's own name to 127.0.1.1 in /etc/hosts).
   */
  readonly address_ip?: string;
  /** Active RoCE ports, as detected (never from the cluster file): four means mesh or ring cabling. */
  readonly ports_up?: number;
  /** GiB of available memory below which the memory guard trips (src/memory/memory-watch.ts memoryFloorGiB). */
  readonly memory_floor?: number;
}

export interface SshSettings {
  readonly config?: string;
  readonly known_hosts?: string;
  readonly identity?: string;
  readonly options: readonly string[];
}

export interface Cluster {
  readonly file: string;
  readonly name: string;
  readonly api_port: number;
  readonly master_port: number;
  /** Where the head's engine listens (the cluster file's api_bind; see src/plan/api-address.ts). Absent: "management". */
  readonly api_bind?: string;
  readonly ssh: SshSettings;
  readonly run_args: readonly string[];
  readonly extra_args: readonly string[];
  readonly nodes: readonly ClusterNode[];
  /** The floor of every node without its own (the cluster file's memory_floor). */
  readonly memory_floor?: number;
}
