import { shellJoin } from "../../config/shell-words.js";
import type { EngineRecipe as Recipe, RankCommand, RankContext } from "../adapter.js";

const RAY_PORT = 6379;
// Bounded wait for the Ray cluster before vllm serve; a missing worker fails the boot visibly.
const RAY_WAIT_SECONDS = 600;

function parallelFlags(recipe: Recipe): string[] {
  return [
    "--tensor-parallel-size", String(recipe.tensor_parallel_size),
    "--pipeline-parallel-size", String(recipe.pipeline_parallel_size),
  ];
}

function apiFlags(ctx: RankContext): string[] {
  return ["--host", "0.0.0.0", "--port", String(ctx.apiPort)];
}

/** vLLM multiprocessing backend: every rank runs `vllm serve`; ranks above 0 are headless. */
function mpCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  const managed = [
    ...parallelFlags(recipe),
    "--nnodes", String(ctx.nnodes),
    "--node-rank", String(ctx.rank),
    "--master-addr", ctx.masterAddr,
    "--master-port", String(ctx.masterPort),
    ...(ctx.rank === 0 ? apiFlags(ctx) : ["--headless"]),
  ];
  const command = [recipe.model, ...recipe.args, ...managed];
  return recipe.entrypoint === undefined ? { command } : { entrypoint: recipe.entrypoint, command };
}

/** Ray backend: a Ray head and workers, then one `vllm serve` on the head once all nodes joined. */
function rayCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  const ip = ctx.nodeIp ?? ctx.masterAddr;
  if (ctx.rank > 0) {
    return {
      entrypoint: ["ray"],
      command: ["start", "--block", `--address=${ctx.masterAddr}:${RAY_PORT}`, `--node-ip-address=${ip}`],
    };
  }
  const backend = recipe.args.includes("--distributed-executor-backend") ? [] : ["--distributed-executor-backend", "ray"];
  const serve = ["vllm", "serve", recipe.model, ...recipe.args, ...backend, ...parallelFlags(recipe), ...apiFlags(ctx)];
  const script = [
    `ray start --head --node-ip-address=${shellJoin([ip])} --port=${RAY_PORT}`,
    `for i in $(seq ${RAY_WAIT_SECONDS}); do [ "$(ray list nodes --filter state=ALIVE 2>/dev/null | grep -c ALIVE)" -ge ${ctx.nnodes} ] && break; sleep 1; done`,
    `exec ${shellJoin(serve)}`,
  ].join(" && ");
  return { entrypoint: ["bash"], command: ["-c", script] };
}

export function vllmRankCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  return recipe.distributed_backend === "ray" ? rayCommand(recipe, ctx) : mpCommand(recipe, ctx);
}

/** mp starts workers first so the head finds them waiting; Ray needs its head up first. */
export function vllmStartsHeadFirst(recipe: Recipe): boolean {
  return recipe.distributed_backend === "ray";
}
