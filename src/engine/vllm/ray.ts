import { VLLM_NODE_ENV_KEYS } from "./node-env.js";
import { linePattern } from "../../config/reg-exp.js";
import { shellQuote } from "../../config/shell-words.js";
import type { EngineRecipe as Recipe, RankCommand, RankContext } from "../adapter.js";
import type { ImageProbe, ImageUse } from "../image-contract.js";

// vLLM's Ray backend as it really starts (vLLM's examples/ray_serving/run_cluster.sh, formerly
// examples/online_serving/): a Ray head (`ray start --head`), workers joining it (`ray start
// --block --address=HEAD:PORT`), and one `vllm serve --distributed-executor-backend ray` on the
// head once every node has joined.

export const RAY_PORT = 6379;

/** How long the head waits for every node to join Ray before it gives up and fails the boot. */
export const RAY_JOIN_SECONDS = 300;
/** Recipe `[env]` key that shortens or lengthens that wait (the practice cluster's tests use it). */
export const RAY_JOIN_SECONDS_ENV = "LAUNCHER_RAY_JOIN_SECONDS";

/**
 * Env of every Ray node. Ray's memory monitor kills workers when the node's memory use passes its
 * threshold (ray-project/ray src/ray/common/ray_config_def.h: memory_monitor_refresh_ms, "Monitor
 * is disabled when this value is 0"; RAY_<name> overrides a config value). On a DGX Spark the GPU's memory IS the node's
 * memory, so a loaded model looks like host memory pressure and the monitor kills the engine's
 * workers: Spark users start Ray with RAY_memory_monitor_refresh_ms=0. A recipe's `[env]` wins.
 */
export const RAY_NODE_ENV: Readonly<Record<string, string>> = { RAY_memory_monitor_refresh_ms: "0" };

/**
 * vLLM gives every Ray worker the head's env, but for the names listed in
 * VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json (vllm/ray/ray_env.py RAY_NON_CARRY_OVER_ENV_VARS;
 * VLLM_CONFIG_ROOT defaults to ${XDG_CONFIG_HOME:-~/.config}/vllm, vllm/envs.py). Two executors:
 * - RayExecutorV2, the default (vllm/envs.py VLLM_USE_RAY_V2_EXECUTOR_BACKEND, default "1"):
 *   vllm/v1/executor/ray_env_utils.py get_driver_env_vars takes the head's whole os.environ minus
 *   the worker-specific names and that file's, and ray_executor_v2.py initialize_worker sets each
 *   with os.environ.setdefault: a worker keeps a value of its own and gets the head's for every
 *   name it lacks.
 * - RayDistributedExecutor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0): vllm/ray/ray_env.py
 *   get_env_vars_to_copy takes the names under VLLM_, LMCACHE_, NCCL_, UCX_, HF_, HUGGING_FACE_
 *   (more with VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY, names with VLLM_RAY_EXTRA_ENV_VARS_TO_COPY)
 *   minus the same exclusions, and the workers overwrite their own values with them
 *   (update_environment_variables).
 * Launcher's per-node fabric env (each node's own interface, HCAs, GID index, IP) must be the
 * node's own under both: a worker's own values would survive V2, but a key one node has and
 * another lacks (NCCL_IB_HCA on a node without an HCA) would come from the head, and the legacy
 * executor would replace them all. So every per-node key goes in that file: all of them, not
 * only those under the legacy prefixes, since V2 copies every name.
 */
export const RAY_NON_CARRY_OVER_FILE = "ray_non_carry_over_env_vars.json";
export const rayNonCarryOverKeys = (): string[] => [...VLLM_NODE_ENV_KEYS].sort();

/** The line the head prints when the wait ends with nodes missing (the boot watcher's fatal line). */
export const RAY_NOT_JOINED = "launcher: Ray nodes not joined after";
export const RAY_NOT_JOINED_PATTERN = linePattern(RAY_NOT_JOINED, " \\d+ s: ", false);

/**
 * The join check, run on the head. It works on a minimal Ray install: `ray.nodes()` reads the GCS
 * node table (python/ray/_private/state.py, core Ray), whereas `ray list nodes` is the State API
 * that needs `ray[default]` (doc/source/ray-observability/state/cli.rst). It connects once (as vLLM
 * itself does, ray.init in vllm/v1/executor/ray_utils.py initialize_ray_cluster), polls bounded in
 * time, and names the nodes whose IP is not among the alive nodes' NodeManagerAddress.
 * argv: SECONDS NAME=IP[,NAME=IP...]
 */
export const RAY_JOIN_CHECK = [
  "import sys, time, ray",
  "limit = int(sys.argv[1])",
  "want = [p.split('=', 1) for p in sys.argv[2].split(',')]",
  "ray.init(address='auto', logging_level='ERROR', log_to_driver=False)",
  "deadline = time.monotonic() + limit",
  "while True:",
  "    alive = {n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']}",
  "    missing = [name + ' (' + ip + ')' for name, ip in want if ip not in alive]",
  "    if not missing or time.monotonic() >= deadline:",
  "        break",
  "    time.sleep(1)",
  "ray.shutdown()",
  "if missing:",
  `    print('${RAY_NOT_JOINED} %d s: %s; check that their containers run and reach the head on port ${RAY_PORT}' % (limit, ', '.join(missing)), file=sys.stderr, flush=True)`,
  "    sys.exit(1)",
  "print('launcher: all %d Ray nodes joined' % len(want), flush=True)",
].join("\n");

/**
 * The head's script; values only as $1...: $1 head IP, $2 Ray port, $3 wait seconds, $4 the keys
 * that must not be carried over (comma-joined), $5 the nodes to wait for (NAME=IP,...), then the
 * `vllm serve` argv. The exclusion file is written unless one is there already (an image or a
 * mount may bring its own): then it must list our keys, or the boot stops saying which to add.
 */
const HEAD_SCRIPT = `set -e
ip=$1 port=$2 join=\${${RAY_JOIN_SECONDS_ENV}:-$3} keys=$4 nodes=$5
shift 5
root=\${VLLM_CONFIG_ROOT:-\${XDG_CONFIG_HOME:-$HOME/.config}/vllm}
file=$root/${RAY_NON_CARRY_OVER_FILE}
if [ -e "$file" ]; then
  have=""
  while IFS= read -r line || [ -n "$line" ]; do have="$have$line"; done < "$file"
  lack=""
  IFS=,; for k in $keys; do case "$have" in *\\"$k\\"*) ;; *) lack="$lack $k" ;; esac; done; unset IFS
  if [ -n "$lack" ]; then
    echo "launcher: $file exists without$lack: vLLM would copy the head's values of these to every Ray worker; add them to its list" >&2
    exit 1
  fi
else
  json=""
  IFS=,; for k in $keys; do json="$json\${json:+,}\\"$k\\""; done; unset IFS
  mkdir -p "$root"
  printf '[%s]\\n' "$json" > "$file"
fi
ray start --head --node-ip-address="$ip" --port="$port"
python3 -c "$CHECK" "$join" "$nodes"
exec "$@"`;

/** Every node's Ray address: its fabric IP, the head's master address, else the name SSH reaches. */
export function rayNodeIp(ctx: RankContext, rank: number): string {
  const node = ctx.nodes[rank];
  return node?.ip ?? (rank === 0 ? ctx.masterAddr : (node?.name ?? ctx.masterAddr));
}

/** Ray backend: a Ray head and workers, then one `vllm serve` on the head once all nodes joined. */
export function rayCommand(recipe: Recipe, ctx: RankContext, serveFlags: readonly string[]): RankCommand {
  if (ctx.addressesAtStart === true) return rayCommandByCount(recipe, ctx, serveFlags);
  const ip = rayNodeIp(ctx, ctx.rank);
  if (ctx.rank > 0) {
    return {
      entrypoint: ["ray"],
      command: ["start", "--block", `--address=${ctx.masterAddr}:${RAY_PORT}`, `--node-ip-address=${ip}`],
      env: RAY_NODE_ENV,
    };
  }
  const nodes = ctx.nodes.map((n, rank) => `${n.name}=${rayNodeIp(ctx, rank)}`).join(",");
  return {
    entrypoint: ["sh"],
    command: ["-c", HEAD_SCRIPT.replace('"$CHECK"', shellQuote(RAY_JOIN_CHECK)), "sh", ip, String(RAY_PORT), String(RAY_JOIN_SECONDS), rayNonCarryOverKeys().join(","), nodes, ...serveArgv(recipe, serveFlags)],
    env: RAY_NODE_ENV,
  };
}

/** The head's `vllm serve`: the image's ENTRYPOINT is replaced by the head's script, so the recipe's entrypoint, else vLLM's CLI. */
function serveArgv(recipe: Recipe, serveFlags: readonly string[]): string[] {
  const backend = recipe.args.includes("--distributed-executor-backend") ? [] : ["--distributed-executor-backend", "ray"];
  return [...(recipe.entrypoint ?? ["vllm", "serve"]), recipe.model, ...recipe.args, ...backend, ...serveFlags];
}

/*
 * Ray where no node's address is known before the ranks start (RankContext.addressesAtStart: a
 * Kubernetes export, whose pods land on nodes the scheduler picks). As LWS's own vLLM example does
 * (kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml and build/ray_init.sh: `ray start --head`
 * on the leader, which then polls `sum(node["Alive"] for node in ray.nodes())` until it is the
 * group's size; `ray start --address=$(LWS_LEADER_ADDRESS):6379 --block` on the workers, retried
 * until the head answers), the head waits for the nodes by count. Each node's Ray address is its
 * own, read at start from RAY_NODE_IP_ADDRESS, which the per-node env (./node-env.ts) sets from the
 * node's fabric IP and the export's start script exports from the fabric it detects; without one
 * Ray finds the node's address itself (python/ray/_private/services.py
 * node_ip_address_from_perspective). The pods start in no order (LWS startupPolicy LeaderCreated
 * creates them together), and a worker whose `ray start` fails ends its pod, which recreates the
 * whole group (RecreateGroupOnPodRestart): so a worker first waits, bounded, for the head's port.
 * It dials the leader's pod name (LWS_LEADER_ADDRESS), not its Ray address: the head's GCS listens
 * on every address of its node (ray-project/ray src/ray/rpc/grpc_server.cc GrpcServer::Run,
 * "0.0.0.0" unless it listens to localhost only), and registers the node by its Ray address.
 */

/**
 * The join check by count, run on the head: argv SECONDS COUNT. It counts the alive nodes in Ray's
 * node table (as RAY_JOIN_CHECK reads it), polls bounded in time, and says how many are missing.
 */
export const RAY_COUNT_CHECK = [
  "import sys, time, ray",
  "limit, want = int(sys.argv[1]), int(sys.argv[2])",
  "ray.init(address='auto', logging_level='ERROR', log_to_driver=False)",
  "deadline = time.monotonic() + limit",
  "while True:",
  "    alive = sum(1 for n in ray.nodes() if n['Alive'])",
  "    if alive >= want or time.monotonic() >= deadline:",
  "        break",
  "    time.sleep(1)",
  "ray.shutdown()",
  "if alive < want:",
  `    print('${RAY_NOT_JOINED} %d s: %d of %d nodes alive; check that every pod of the group runs and reaches the head on port ${RAY_PORT}' % (limit, alive, want), file=sys.stderr, flush=True)`,
  "    sys.exit(1)",
  "print('launcher: all %d Ray nodes joined' % want, flush=True)",
].join("\n");

/** The line a worker prints when the head's port never answered (the boot watcher's fatal line). */
export const RAY_HEAD_UNREACHED = "launcher: Ray head not reached after";
export const RAY_HEAD_UNREACHED_PATTERN = linePattern(RAY_HEAD_UNREACHED, " \\d+ s: ", false);

/**
 * A worker's wait for the head's Ray port, bounded: argv HOST PORT SECONDS. A name that does not
 * resolve yet (the head's pod not yet in its Service's DNS) is retried like a refused connection.
 */
export const RAY_HEAD_WAIT = [
  "import socket, sys, time",
  "host, port, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])",
  "deadline = time.monotonic() + limit",
  "while True:",
  "    try:",
  "        socket.create_connection((host, port), timeout=2).close()",
  "        break",
  "    except OSError as e:",
  "        if time.monotonic() >= deadline:",
  `            print('${RAY_HEAD_UNREACHED} %d s: %s:%d (%s)' % (limit, host, port, e), file=sys.stderr, flush=True)`,
  "            sys.exit(1)",
  "        time.sleep(1)",
].join("\n");

/** `text` with `from` put as `to`, once; a `from` not there is launcher's bug (the script it edits changed). */
function swap(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`ray.ts: the head's script has no ${JSON.stringify(from)} to change`);
  return text.replace(from, () => to);
}

/** The by-count head's script: HEAD_SCRIPT with the node's own address read at start ($1 may be empty) and $5 a count. */
const HEAD_SCRIPT_BY_COUNT = swap(
  swap(HEAD_SCRIPT, "ip=$1 ", "ip=${1:-${RAY_NODE_IP_ADDRESS:-}} "),
  'ray start --head --node-ip-address="$ip" --port="$port"',
  'ray start --head ${ip:+"--node-ip-address=$ip"} --port="$port"',
);

/** A by-count worker's script: $1 head address, $2 Ray port, $3 wait seconds. */
const WORKER_SCRIPT_BY_COUNT = `set -e
head=$1 port=$2 join=\${${RAY_JOIN_SECONDS_ENV}:-$3} ip=\${RAY_NODE_IP_ADDRESS:-}
python3 -c "$WAIT" "$head" "$port" "$join"
exec ray start --block --address="$head:$port" \${ip:+"--node-ip-address=$ip"}`;

function rayCommandByCount(recipe: Recipe, ctx: RankContext, serveFlags: readonly string[]): RankCommand {
  const join = String(RAY_JOIN_SECONDS);
  if (ctx.rank > 0) {
    return { entrypoint: ["sh"], command: ["-c", swap(WORKER_SCRIPT_BY_COUNT, '"$WAIT"', shellQuote(RAY_HEAD_WAIT)), "sh", ctx.masterAddr, String(RAY_PORT), join], env: RAY_NODE_ENV };
  }
  return {
    entrypoint: ["sh"],
    command: ["-c", swap(HEAD_SCRIPT_BY_COUNT, '"$CHECK"', shellQuote(RAY_COUNT_CHECK)), "sh", ctx.nodeIp ?? "", String(RAY_PORT), join, rayNonCarryOverKeys().join(","), String(ctx.nnodes), ...serveArgv(recipe, serveFlags)],
    env: RAY_NODE_ENV,
  };
}

/**
 * Ray is not installed with vLLM any more (its docs: `pip install "ray[cgraph]"` for the Ray
 * backend, whose compiled graphs need the cgraph extra): the image must bring it.
 */
export function rayImageProbes(use: ImageUse): ImageProbe[] {
  if (use.backend !== "ray") return [];
  return [
    {
      argv: ["ray", "--version"],
      problem: (image) =>
        `image ${image} has no \`ray\` command, and distributed_backend = "ray" needs it (vLLM no longer installs Ray): add \`RUN pip install "ray[cgraph]"\` to its Dockerfile and rebuild, or use distributed_backend = "mp"`,
    },
  ];
}
