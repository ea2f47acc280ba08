import type { EngineRecipe as Recipe, RankCommand, RankContext, StartOrder } from "../adapter.js";
import { rayCommand } from "./ray.js";

function parallelFlags(recipe: Recipe): string[] {
  return [
    "--tensor-parallel-size", String(recipe.tensor_parallel_size),
    "--pipeline-parallel-size", String(recipe.pipeline_parallel_size),
  ];
}

// vllm/entrypoints/openai/cli_args.py FrontendArgs: --host ("Host name", default None: uvicorn
// then listens on every address) and --port; the address is launcher's (src/plan/api-address.ts).
function apiFlags(ctx: RankContext): string[] {
  return ["--host", ctx.apiHost, "--port", String(ctx.apiPort)];
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

export function vllmRankCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  return recipe.distributed_backend === "ray" ? rayCommand(recipe, ctx, [...parallelFlags(recipe), ...apiFlags(ctx)]) : mpCommand(recipe, ctx);
}

/**
 * Ray needs its head up first: the workers' `ray start --address` joins it. mp ranks start at
 * once: a headless rank's torch rendezvous client retries its connection to the head's TCPStore
 * (--master-addr:--master-port) until the distributed timeout, and the head waits there for every
 * rank (the project's reference notes on vLLM's mp backend, ../shared/REFERENCE.md: "Start
 * workers first and rank 0 last (or all at once)"), so the head's `docker run` need not wait for
 * the workers'.
 */
export function vllmStartOrder(recipe: Recipe): StartOrder {
  return recipe.distributed_backend === "ray" ? "head first" : "at once";
}
