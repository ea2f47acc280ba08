import type { EngineRecipe as Recipe, RankCommand, RankContext } from "../adapter.js";

/**
 * The env the launch program reads SGLang's API key from. SGLang itself reads its key only from
 * --api-key (python/sglang/srt/server_args.py, ServerArgs.api_key, sgl-project/sglang 001067ff),
 * and launcher never writes a key into a container's arguments (src/plan/plan.ts keyEnv): the
 * program below moves it from the env into sys.argv inside the Python process.
 */
export const SGLANG_KEY_ENV = "SGLANG_API_KEY";

/** The first line of LAUNCH_PROGRAM: the practice engine's python3 stand-in knows it by this line. */
export const LAUNCH_FIRST_LINE = "# launcher: run sglang.launch_server with the API key from the env (format 1)";

/**
 * What `python3 -m sglang.launch_server ARGS` does (python/sglang/launch_server.py: it reads
 * sys.argv[1:]), run with runpy as `-m` runs it, with `--api-key KEY` added from the env when set.
 */
export const LAUNCH_PROGRAM = [
  LAUNCH_FIRST_LINE,
  "import os, runpy, sys",
  `key = os.environ.get("${SGLANG_KEY_ENV}")`,
  'sys.argv = ["sglang.launch_server", *sys.argv[1:], *(["--api-key", key] if key else [])]',
  'runpy.run_module("sglang.launch_server", run_name="__main__", alter_sys=True)',
].join("\n");

/**
 * Every rank runs the same launch command (SGLang's multi-node: python/sglang/srt/server_args.py
 * dist_init_addr "The host address for initializing distributed backend", nnodes, node_rank):
 * the head's address and port on every node, the node count, its own rank. One node gets none of
 * them (SGLang then starts its ranks on the node itself). Rank 0 serves SGLang's API at the
 * cluster's api_bind and api_port. --enable-metrics: drain and the daemon read /metrics, which
 * SGLang serves only with it (ServerArgs.enable_metrics, "Enable log prometheus metrics").
 *
 * A rank >= 1 serves HTTP too: once its schedulers are ready, _launch_subprocesses starts
 * launch_dummy_health_check_server(server_args.host, server_args.port, ...), a uvicorn app of
 * /health and /health_generate answering 200 with no key check (python/sglang/srt/entrypoints/
 * engine.py and utils/common.py, sgl-project/sglang 001067ff). Without flags it binds ServerArgs'
 * defaults, 127.0.0.1:30000, on the worker's host (host networking), where a port taken fails the
 * worker after its weights loaded: launcher gives it loopback and the deployment's api_port, the
 * port the cluster keeps for it. Nothing else on the worker uses the API, so its launch runs
 * SGLang's module as it is, without the key: SGLang logs its settings with api_key in plain text
 * (engine.py: logger.info(f"server_args={server_args.resolved_dict()}")), and a worker's log should
 * not hold the key.
 */
export function sglangRankCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  const parallel = ["--tp-size", String(recipe.tensor_parallel_size), "--pp-size", String(recipe.pipeline_parallel_size)];
  // An IPv6 address in brackets, as SGLang writes one beside a port (python/sglang/srt/utils/network.py
  // _wrap, sgl-project/sglang 0564b521).
  const host = ctx.masterAddr.includes(":") ? `[${ctx.masterAddr}]` : ctx.masterAddr;
  const dist = ctx.nnodes > 1 ? ["--dist-init-addr", `${host}:${ctx.masterPort}`, "--nnodes", String(ctx.nnodes), "--node-rank", String(ctx.rank)] : [];
  const command = ["--model-path", recipe.model, ...recipe.args, ...parallel, ...dist];
  if (ctx.rank !== 0) return { entrypoint: ["python3"], command: ["-m", "sglang.launch_server", ...command, "--host", WORKER_HEALTH_HOST, "--port", String(ctx.apiPort)] };
  return { entrypoint: ["python3", "-c", LAUNCH_PROGRAM], command: [...command, "--host", ctx.apiHost, "--port", String(ctx.apiPort), "--enable-metrics"] };
}

/** Where a worker's dummy health server listens: its own host only (nothing reads it from outside). */
export const WORKER_HEALTH_HOST = "127.0.0.1";
