import { UserError } from "../../config/errors.js";
import { linePattern } from "../../config/reg-exp.js";
import type { RankCommand, RankContext } from "../adapter.js";

/*
 * llama.cpp over RPC where each node's address is known only at start (a Kubernetes export;
 * RankContext.addressesAtStart): why it is refused by default, and the one case it runs.
 *
 * - A worker's rpc-server has no authentication (tools/rpc/rpc-server.cpp: "Never expose the RPC
 *   server to an open network!"), so launcher binds it to the node's fabric address only
 *   (./command.ts), never 0.0.0.0 and never the node's LAN.
 * - The head's `--rpc HOST:PORT,...` may name a host: ggml/src/ggml-rpc/ggml-rpc.cpp socket_connect
 *   resolves it with gethostbyname (IPv4), once, at start, with no retry.
 * - In a LeaderWorkerSet a worker pod's one stable name is its StatefulSet DNS name,
 *   NAME-GROUP-INDEX.NAME.NAMESPACE (kubernetes-sigs/lws pkg/controllers/pod_controller.go
 *   constructWorkerStatefulSetApplyConfiguration: the workers' StatefulSet is named after the leader
 *   pod, its serviceName is the set's own name under the default SubdomainShared policy, its
 *   ordinals start at 1). That name resolves to the pod's IP, which on the node's network
 *   (hostNetwork, the export's default) is the node's Kubernetes address: on a Spark cluster
 *   normally its LAN, not its fabric address.
 *
 * So by default the head could dial a worker only at an address where rpc-server must not listen.
 * Binding rpc-server to the pod's IP anyway would work on any cluster and expose an unauthenticated
 * server that runs code sent to it on the LAN: left out. Where the cluster's node addresses ARE the
 * fabric addresses (k3s or MicroK8s started with --node-ip set to it), the pod's IP is one
 * rpc-server may listen on (RankContext.nodeAddressIsFabric): each pod's start checks it is one of
 * its node's fabric addresses, and ends the pod if not (the export's start script); the workers
 * listen on it, and the head dials the workers by their DNS names once each accepts (RPC_WAIT below).
 */

/** The export's option that says so (src/cli/export-k8s.ts). */
export const NODE_IP_IS_FABRIC_FLAG = "--node-ip-is-fabric";

export function rpcNeedsAddresses(): UserError {
  return new UserError(
    "llama.cpp's RPC workers need each node's fabric address before the head starts, and a Kubernetes pod has none to give: rpc-server has no authentication, so launcher binds it to the node's fabric address only, while the head can name a worker pod only by its DNS name (NAME-0-1.NAME), which resolves to the pod's IP, the node's Kubernetes address (its LAN under host networking)",
    `serve it with launcher up, which knows each node's fabric_ip; or, where every node's Kubernetes address is its fabric address (k3s --node-ip set to it, MicroK8s likewise), pass ${NODE_IP_IS_FABRIC_FLAG}: each worker then listens on its pod IP, which its pod checks is one of its node's fabric addresses`,
  );
}

/** How long the head waits for its workers' rpc-servers to accept before its pod fails. */
export const RPC_WAIT_SECONDS = 300;
/** Env that shortens or lengthens that wait. */
export const RPC_WAIT_SECONDS_ENV = "LAUNCHER_RPC_WAIT_SECONDS";
/** The line the head prints when a worker never accepted (a fatal line of ./log-shapes.ts). */
export const RPC_NOT_REACHED = "launcher: llama.cpp RPC worker not reached after";
export const RPC_NOT_REACHED_PATTERN = linePattern(RPC_NOT_REACHED, " \\d+ s: ", true);
/** The name the head's wait goes by ($0), in bash's own messages. */
export const RPC_WAIT_NAME = "launcher-rpc-wait";

/**
 * The head's wait, run by bash: $1 seconds, $2 HOST:PORT,..., then llama-server's argv. llama-server
 * connects to each worker once and aborts if one is not there (./command.ts), and in a
 * LeaderWorkerSet the pods start together (startupPolicy LeaderCreated): so the head first waits,
 * bounded, until each worker's name resolves and its port accepts. The image has no Python; bash's
 * /dev/tcp/HOST/PORT redirection connects (resolving HOST with getaddrinfo: bash's lib/sh/netopen.c),
 * and coreutils' `timeout` bounds one attempt at a host that drops packets. Both are in every Ubuntu
 * image (Essential packages), which docker-images/llamacpp-spark/Dockerfile's CUDA base is. A probe's
 * connection is harmless: rpc-server serves one client at a time and, once one goes, accepts the
 * next (ggml-rpc.cpp ggml_backend_rpc_start_server: "Client connection closed", then accept()).
 */
export const RPC_WAIT = `limit=\${${RPC_WAIT_SECONDS_ENV}:-$1} workers=$2
shift 2
# Digits only: bash evaluates a[$(cmd)] inside $((...)), so the env's value is checked first.
case $limit in ''|*[!0-9]*) echo "launcher: ${RPC_WAIT_SECONDS_ENV} must be a whole number of seconds, not '$limit'" >&2; exit 1 ;; esac
deadline=$((SECONDS + limit))
IFS=, read -r -a endpoints <<< "$workers"
for ep in "\${endpoints[@]}"; do
  until timeout 2 bash -c 'exec 3<>"/dev/tcp/\${1%:*}/\${1##*:}"' probe "$ep" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "${RPC_NOT_REACHED} $limit s: $ep; check that every worker pod of the group runs its rpc-server and that its name resolves to its fabric address" >&2
      exit 1
    fi
    sleep 1
  done
done
echo "launcher: llama.cpp RPC workers accept: $workers" >&2
exec "$@"`;

/**
 * A rank where addresses are known only at start. The worker is launcher's own (`rpc-server` on the
 * node's address, the pod IP checked to be the fabric's); the head runs llama-server under the wait.
 */
export function rpcAtStart(ctx: RankContext, head: () => RankCommand, worker: () => RankCommand): RankCommand {
  if (ctx.nodeAddressIsFabric !== true) throw rpcNeedsAddresses();
  if (ctx.rank > 0) return worker();
  const cmd = head();
  // launcher's own --rpc, which ends the head's command (./command.ts).
  const rpc = cmd.command.lastIndexOf("--rpc");
  const endpoints = cmd.command[rpc + 1];
  if (rpc < 0 || endpoints === undefined) throw new Error("llama.cpp's head command has no --rpc for its workers");
  const entry = cmd.entrypoint ?? [];
  return { ...cmd, entrypoint: ["bash"], command: ["-c", RPC_WAIT, RPC_WAIT_NAME, String(RPC_WAIT_SECONDS), endpoints, ...entry, ...cmd.command] };
}
