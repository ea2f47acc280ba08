import { isIPv4 } from "node:net";
import { UserError } from "../../config/errors.js";
import type { EngineRecipe as Recipe, GgufFiles, RankCommand, RankContext, StartOrder } from "../adapter.js";
import { rpcAtStart } from "./at-start.js";
import { llamacppSpellings } from "./flags.js";
import { ggufContainerPaths, ggufWeightFiles, modelPathProblem } from "./gguf.js";

/*
 * llama.cpp across nodes (tools/rpc/README.md): each worker runs `rpc-server -H HOST -p PORT`,
 * which exposes its node's devices to one client; the head runs `llama-server --rpc
 * HOST:PORT,...`, which connects to every worker at start (ggml/src/ggml-rpc/ggml-rpc.cpp
 * rpc_dispatcher::start: GGML_ABORT "Failed to connect to ...", no retry) and splits the model's
 * layers over its own GPU and theirs (--split-mode layer, the default). So the workers start
 * first, and the head only once each worker's port accepts (EngineAdapter.headAwaitsWorkersPort).
 */

/** Where the official images keep the programs (.devops/cuda.Dockerfile: WORKDIR /app, COPY build/bin). */
export const LLAMA_SERVER = "/app/llama-server";
export const RPC_SERVER = "/app/rpc-server";

/**
 * A worker's rpc-server: bound to the node's fabric address only. The RPC protocol has no
 * authentication ("Never expose the RPC server to an open network!", tools/rpc/rpc-server.cpp),
 * so never 0.0.0.0: a node without a fabric_ip has no address launcher could bind it to.
 */
function workerCommand(ctx: RankContext): RankCommand {
  const ip = ctx.nodeIp;
  if (ip === undefined) {
    const node = ctx.nodes[ctx.rank]?.name ?? `rank ${ctx.rank}`;
    throw new UserError(`node ${node}: no fabric_ip, which a llama.cpp worker binds its rpc-server to (the RPC protocol has no authentication, so it never listens on every address)`, `set fabric_ip for ${node} in the cluster file, or run launcher cluster init to detect it`);
  }
  // Known only in the pod (a Kubernetes export whose node addresses are the fabric's): the pod's
  // start script checks it is one of its node's fabric addresses before rpc-server runs.
  const atStart = ctx.addressesAtStart === true && ctx.nodeAddressIsFabric === true;
  const bad = atStart ? undefined : workerAddressProblem(ip);
  if (bad !== undefined) {
    const node = ctx.nodes[ctx.rank]?.name ?? `rank ${ctx.rank}`;
    throw new UserError(`node ${node}: fabric_ip ${JSON.stringify(ip)} ${bad}`, `set fabric_ip for ${node} in the cluster file to the IPv4 address of its fabric port (launcher cluster init detects it)`);
  }
  return { entrypoint: [RPC_SERVER], command: ["--host", ip, "--port", String(ctx.masterPort)] };
}

/**
 * Why an address cannot be a worker's --host, undefined when it can. The RPC protocol has no
 * authentication, so never an address that binds everywhere; and IPv4 only: the head reads each
 * --rpc HOST:PORT with ggml/src/ggml-rpc/ggml-rpc.cpp parse_endpoint, which splits it at its first
 * ':' (and socket_connect resolves HOST with gethostbyname, IPv4), so an IPv6 literal breaks it.
 */
export function workerAddressProblem(ip: string): string | undefined {
  if (!isIPv4(ip)) return "is not an IPv4 address, which a llama.cpp worker's rpc-server binds to (the head's --rpc HOST:PORT takes no IPv6 literal)";
  if (ip === "0.0.0.0") return "is the unspecified address: rpc-server would listen on every interface, and its RPC protocol has no authentication";
  if (ip.startsWith("127.")) return "is a loopback address, which the head on another node cannot reach";
  return undefined;
}

/** The RPC endpoints of every worker, in rank order (each listens on master_port at its fabric address). */
export const rpcEndpoints = (ctx: RankContext): string[] => ctx.nodes.slice(1).map((n) => `${n.ip ?? n.name}:${ctx.masterPort}`);

const MMPROJ = llamacppSpellings("--mmproj");

/**
 * --model (and --mmproj): the recipe's `gguf` files in the HF cache the container mounts, its
 * split file checked and the projector given once; else `model` is the GGUF file as the
 * container sees it.
 */
function modelWords(recipe: Recipe): string[] {
  const paths = ggufContainerPaths(recipe);
  if (paths === undefined) {
    const bad = modelPathProblem(recipe.model);
    if (bad !== undefined) throw new UserError(`recipe model: ${bad.problem}`, bad.fix);
    return ["--model", recipe.model];
  }
  ggufWeightFiles(recipe.gguf as GgufFiles);
  if (paths.mmproj !== undefined && recipe.args.some((w) => MMPROJ.some((f) => w === f || w.startsWith(`${f}=`)))) {
    throw new UserError("recipe args: --mmproj is given beside gguf.mmproj, and llama-server takes one projector", "remove --mmproj from args: launcher passes gguf.mmproj's file");
  }
  return ["--model", paths.model, ...(paths.mmproj === undefined ? [] : ["--mmproj", paths.mmproj])];
}

/**
 * The head's llama-server: the model, the recipe's flags, then the API address, --metrics (drain
 * and the daemon's live view read llamacpp:* on /metrics, which answers 501 without it) and the
 * workers.
 */
function headCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  const rpc = ctx.nnodes > 1 ? ["--rpc", rpcEndpoints(ctx).join(",")] : [];
  const command = [...modelWords(recipe), ...recipe.args, "--host", ctx.apiHost, "--port", String(ctx.apiPort), "--metrics", ...rpc];
  return { entrypoint: recipe.entrypoint ?? [LLAMA_SERVER], command };
}

export function llamacppRankCommand(recipe: Recipe, ctx: RankContext): RankCommand {
  // Where no node's address is known before it starts, the head can name its workers only where
  // their Kubernetes address is their fabric address (./at-start.ts).
  if (ctx.addressesAtStart === true && ctx.nnodes > 1) return rpcAtStart(ctx, () => headCommand(recipe, ctx), () => workerCommand(ctx));
  return ctx.rank === 0 ? headCommand(recipe, ctx) : workerCommand(ctx);
}

/** Workers first: the head connects to them once, at its start. */
export const llamacppStartOrder = (): StartOrder => "workers first";
