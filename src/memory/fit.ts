import type { EngineMemoryFlags } from "../engine/adapter.js";
import { adapterOf } from "../engine/registry.js";
import { findAnyFlag, flagsOfWords } from "../recipe/args.js";
import type { Recipe } from "../recipe/recipe.js";
import { KIB_PER_GIB, type Meminfo } from "./meminfo.js";

/*
 * Fit, before any container starts: what one node of a deployment will need, against what that
 * node has. Pure: preflight (with /proc/meminfo read over SSH) and `plan` (with what doctor last
 * saw) call it and print its text. A DGX Spark's GPU and CPU share one pool, so the engine's GPU
 * memory, its processes and /dev/shm all come out of MemTotal.
 */

const GIB = 1024 ** 3;

/**
 * The engine's working memory beside weights and KV cache (peak activations of the profile run,
 * CUDA graphs, NCCL buffers, non-torch allocations). With a utilization share the engine fits it
 * inside the share itself; with a fixed KV size it comes on top. An estimate, printed as such.
 */
export const WORKING_MEMORY_GIB = 4;
/**
 * The engine's processes outside its GPU allocations (API server, engine core, one worker per
 * GPU: Python, torch, the CUDA context's host side, the tokenizer) and the loader's staging
 * buffers while it reads the shards. Loaders briefly need more than the mapped weights (the
 * seeds' "loader balloons memory"), so this is an allowance, not a measurement.
 */
export const ENGINE_AND_LOADER_GIB = 6;
/** Less than this to spare (or 5% of the node's total, whichever is more) is tight: a warning. */
export const TIGHT_MARGIN_GIB = 4;

/** What the recipe's flags ask of a node's memory, read through the engine's adapter. */
export type MemoryAsk =
  /** `unsized`: the engine sizes its KV cache from what launcher cannot read: the need is a lower bound without it. `allowance`: kvBytes is an assumption, not read. */
  | { readonly kind: "kv"; readonly kvBytes: number; readonly source: string; readonly unsized?: string; readonly allowance?: true }
  /** `ofFree`: a share of the memory free at the engine's start, for weights and KV cache only (EngineMemoryFlags.shareOf). */
  | { readonly kind: "utilization"; readonly fraction: number; readonly source: string; readonly ofFree?: true }
  | { readonly kind: "unknown"; readonly problem: string };

export function memoryAsk(recipe: Pick<Recipe, "engine" | "args">, imageDefault?: number): MemoryAsk {
  const engine = adapterOf(recipe.engine)?.memoryFlags;
  // The image's own parser's default, when it was read, over the engine's table.
  const table = engine === undefined || imageDefault === undefined ? engine : { ...engine, defaultUtilization: imageDefault };
  if (table === undefined) return { kind: "unknown", problem: `engine ${recipe.engine} does not say how much memory it claims` };
  const flags = flagsOfWords(recipe.args);
  const kv = findAnyFlag(flags, table.kvCacheBytes);
  if (kv !== undefined) {
    const value = kv.values[0] ?? "";
    // Plain bytes only: launcher does not guess how the engine reads a unit.
    if (!/^\d+$/.test(value) || Number(value) <= 0) return { kind: "unknown", problem: `${kv.name} ${value} is not a number of bytes the fit check can read; write it in bytes` };
    return { kind: "kv", kvBytes: Number(value), source: `${kv.name} ${value}` };
  }
  if (table.kvAllowance !== undefined) return allowanceAsk(table.kvAllowance, flags);
  const util = findAnyFlag(flags, table.utilization);
  const ofFree = table.shareOf === "free-at-start" ? { ofFree: true as const } : {};
  const name = table.utilization[0] ?? "utilization";
  if (util === undefined && table.defaultUtilization === undefined) return { kind: "unknown", problem: `${name} is not given: ${table.withoutFlag ?? "the engine computes its share when it starts"}; give ${name} for a fit check` };
  if (util === undefined) return { kind: "utilization", fraction: table.defaultUtilization ?? 1, source: `${name} ${table.defaultUtilization} (the engine's default)`, ...ofFree };
  const value = util.values[0] ?? "";
  const fraction = Number(value);
  if (!/^(\d+\.?\d*|\.\d+)$/.test(value) || fraction <= 0 || fraction > 1) return { kind: "unknown", problem: `${util.name} ${value} is not a fraction between 0 and 1` };
  return { kind: "utilization", fraction, source: `${util.name} ${value}`, ...ofFree };
}

/** An engine's KV allowance: unsized where no flag sizes its cache (or a size of 0, the engine's "from the model"). */
function allowanceAsk(a: NonNullable<EngineMemoryFlags["kvAllowance"]>, flags: ReturnType<typeof flagsOfWords>): MemoryAsk {
  const size = a.sizedBy === undefined ? undefined : findAnyFlag(flags, a.sizedBy);
  const value = size?.values[0];
  const sized = a.sizedBy === undefined || (value !== undefined && /^\d+$/.test(value) && Number(value) > 0);
  if (!sized) return { kind: "kv", kvBytes: 0, source: a.unsized ?? "the engine sizes it at its start", unsized: a.unsized ?? "the engine sizes its KV cache at its start" };
  return { kind: "kv", kvBytes: a.bytes, source: size === undefined ? a.source : `${size.name} ${value ?? ""}: ${a.source}`, allowance: true };
}

// docker/go-units size.go: RAMInBytes (what `docker run --shm-size` reads) takes binary units,
// case-insensitive, with an optional `i` and `b`: "32gb" is 32 GiB.
const UNITS: Readonly<Record<string, number>> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4, p: 1024 ** 5 };
export function dockerSizeBytes(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?) ?([kmgtp]?)i?b?$/i.exec(size.trim());
  if (!m) return undefined;
  return Number(m[1]) * (UNITS[(m[2] ?? "").toLowerCase()] ?? 1);
}

/** One node as the check sees it. */
export interface NodeMemoryFacts {
  readonly node: string;
  /** undefined: not read (the node did not answer, or doctor never saw it). */
  readonly meminfo?: Meminfo;
  /** The model snapshot's size on this node's disk; undefined: not there, or not looked at. */
  readonly weightsBytes?: number;
  /** Other deployments whose containers run on this node now. */
  readonly deployments?: readonly string[];
}

export type FitVerdict = "ok" | "tight" | "over-available" | "over-total" | "unknown";
/** Every verdict, in order of gravity; errors are the last two. */
export const FIT_VERDICTS: readonly FitVerdict[] = ["unknown", "ok", "tight", "over-available", "over-total"];

export interface FitProblem {
  readonly severity: "error" | "warning";
  readonly message: string;
}

export interface NodeFit {
  readonly node: string;
  readonly verdict: FitVerdict;
  /** The arithmetic, line by line, as printed. */
  readonly lines: readonly string[];
  /** Why the verdict is what it is, and what to do. */
  readonly problems: readonly FitProblem[];
  readonly needGiB?: number;
  /** The snapshot's size the check counted (kept for `plan`). */
  readonly weightsBytes?: number;
}

export interface FitReport {
  readonly nodes: readonly NodeFit[];
  readonly ask: MemoryAsk;
}

/** A node's fit as `plan --json` prints it (`memory_fit.nodes`): snake_case keys, the unit in the key's tail. */
export interface NodeFitJson {
  readonly node: string;
  readonly verdict: FitVerdict;
  readonly lines: readonly string[];
  readonly problems: readonly FitProblem[];
  readonly need_gib?: number;
  readonly weights_bytes?: number;
}

export const nodeFitJson = (n: NodeFit): NodeFitJson => ({
  node: n.node,
  verdict: n.verdict,
  lines: n.lines,
  problems: n.problems,
  ...(n.needGiB === undefined ? {} : { need_gib: n.needGiB }),
  ...(n.weightsBytes === undefined ? {} : { weights_bytes: n.weightsBytes }),
});

const g = (n: number): string => (Math.round(n * 10) / 10).toFixed(1);

/**
 * The fit of every node of a deployment (nodes in rank order). `defaultUtilization`: the share the
 * engine takes without a flag, as the image's own parser gives it (else the engine's table's).
 */
export function fitDeployment(recipe: Pick<Recipe, "engine" | "args" | "tensor_parallel_size" | "pipeline_parallel_size" | "shm_size">, nodes: readonly NodeMemoryFacts[], defaultUtilization?: number): FitReport {
  const ask = memoryAsk(recipe, defaultUtilization);
  return { ask, nodes: nodes.map((n) => fitNode(recipe, ask, n)) };
}

function fitNode(recipe: Pick<Recipe, "tensor_parallel_size" | "pipeline_parallel_size" | "shm_size">, ask: MemoryAsk, facts: NodeMemoryFacts): NodeFit {
  const node = facts.node;
  if (ask.kind === "unknown") return { node, verdict: "unknown", lines: [`${node}: no fit check: ${ask.problem}`], problems: [] };
  const mem = facts.meminfo;
  if (mem === undefined) return { node, verdict: "unknown", lines: [`${node}: no fit check: the node's memory was not read (launcher doctor reads it)`], problems: [] };
  const total = mem.totalKiB / KIB_PER_GIB;
  const available = mem.availableKiB / KIB_PER_GIB;
  const free = mem.freeKiB / KIB_PER_GIB;
  const cache = (mem.cachedKiB + mem.reclaimableSlabKiB) / KIB_PER_GIB;
  // Each GPU holds its slice of the weights: TP splits the layers' tensors, PP the layers.
  const split = recipe.tensor_parallel_size * recipe.pipeline_parallel_size;
  const share = facts.weightsBytes === undefined ? undefined : facts.weightsBytes / split / GIB;
  const shareText = facts.weightsBytes === undefined ? "weights ? (size not read: not counted)" : `weights ${g(share ?? 0)} (${g(facts.weightsBytes / GIB)} on disk / TP ${recipe.tensor_parallel_size} x PP ${recipe.pipeline_parallel_size})`;
  const problems: FitProblem[] = [];
  let need: number;
  let needText: string;
  if (ask.kind === "kv") {
    const kv = ask.kvBytes / GIB;
    need = (share ?? 0) + kv + WORKING_MEMORY_GIB + ENGINE_AND_LOADER_GIB;
    const kvText = ask.unsized === undefined ? `KV cache ${g(kv)} (${ask.source})` : `KV cache ? (${ask.unsized}: not counted)`;
    needText = `${shareText} + ${kvText} + working memory ${g(WORKING_MEMORY_GIB)} + engine and loader ${g(ENGINE_AND_LOADER_GIB)}`;
  } else {
    // The engine claims total x fraction for weights, working memory and KV together; or (ofFree)
    // what is free at its start x fraction for weights and KV, its working memory on top.
    const budget = (ask.ofFree ? available : total) * ask.fraction;
    const outside = ask.ofFree ? WORKING_MEMORY_GIB : 0;
    need = budget + outside + ENGINE_AND_LOADER_GIB;
    const kvLeft = share === undefined ? undefined : budget - share - (WORKING_MEMORY_GIB - outside);
    const kvText = `KV cache ${kvLeft === undefined ? "the rest" : g(kvLeft)}`;
    const inside = ask.ofFree ? `${ask.source} x available ${g(available)}: ${shareText}, ${kvText}` : `${ask.source} x total ${g(total)}: ${shareText}, working memory ${g(WORKING_MEMORY_GIB)}, ${kvText}`;
    needText = `engine budget ${g(budget)} (${inside})${ask.ofFree ? ` + working memory ${g(WORKING_MEMORY_GIB)}` : ""} + engine and loader ${g(ENGINE_AND_LOADER_GIB)}`;
    if (kvLeft !== undefined && kvLeft <= 0) {
      problems.push({ severity: "warning", message: `${node}: the weights on disk (${g(share ?? 0)} GiB per node) and working memory leave no KV cache in the engine's ${g(budget)} GiB budget; the boot fails unless the engine loads less than is on disk: raise ${ask.source.split(" ")[0] ?? "the utilization"} or use more nodes` });
    }
  }
  const shm = dockerSizeBytes(recipe.shm_size);
  const shmGiB = shm === undefined ? undefined : shm / GIB;
  const spare = available - need;
  const lines = [
    `${node}: need ${g(need)} GiB = ${needText}`,
    `${" ".repeat(node.length)}  has total ${g(total)}, available ${g(available)} (page cache ${g(cache)}, free ${g(free)}) -> ${spare >= 0 ? `${g(spare)} to spare` : `${g(-spare)} short`}`,
  ];
  // /dev/shm is a tmpfs of at most shm_size: it takes memory only as it fills (vLLM's message
  // queues take little), so it is the worst case beside the need, not part of it.
  if (shmGiB !== undefined) lines.push(`${" ".repeat(node.length)}  + /dev/shm up to ${g(shmGiB)} (shm_size ${recipe.shm_size}): a tmpfs, counted only as it fills, so not in the need`);
  let verdict: FitVerdict;
  const held = describeHolders(node, mem, facts.deployments ?? []);
  if (need > total) {
    verdict = "over-total";
    problems.unshift({ severity: "error", message: `${node}: the deployment needs ${g(need)} GiB, more than the node's total ${g(total)} GiB: lower ${ask.kind === "kv" ? "the KV budget" : ask.source.split(" ")[0]}, the max model len or use more nodes (TP/PP)` });
  } else if (need > available) {
    verdict = "over-available";
    problems.unshift({ severity: "error", message: `${node}: the deployment needs ${g(need)} GiB, but only ${g(available)} of ${g(total)} GiB are available now: ${held}` });
  } else {
    const margin = Math.max(TIGHT_MARGIN_GIB, total * 0.05);
    verdict = spare < margin ? "tight" : "ok";
    if (verdict === "tight") problems.unshift({ severity: "warning", message: `${node}: tight: ${g(spare)} GiB to spare after the ${g(need)} GiB the deployment needs (less than ${g(margin)}); a loader that briefly takes more can freeze the node: ${held}` });
    // The kernel counts clean page cache as available, but the GPU's allocations on a Spark do
    // not always make it give the cache back in time.
    else if (need > free && cache >= 1) problems.push({ severity: "warning", message: `${node}: the boot needs ${g(need - free)} GiB of the ${g(cache)} GiB page cache to be given back while it loads: launcher up --drop-caches frees it first` });
    if (shmGiB !== undefined && need + shmGiB > available) problems.push({ severity: "warning", message: `${node}: if /dev/shm filled to its ${recipe.shm_size} the node would run ${g(need + shmGiB - available)} GiB short: lower shm_size if the engine does not need it` });
  }
  // Without the weights (or a KV cache launcher cannot size) a fixed-KV need is only a lower
  // bound: enough to refuse, not to say it fits.
  const missing = ask.kind !== "kv" ? [] : [...(share === undefined ? ["the weights"] : []), ...(ask.unsized === undefined ? [] : ["the KV cache"])];
  const partial = missing.length > 0 && !(verdict === "over-total" || verdict === "over-available");
  const assumed = ask.kind === "kv" && ask.allowance === true ? ", the KV cache an allowance" : "";
  lines[1] = `${lines[1] ?? ""}: ${partial ? `${verdict} without ${missing.join(" and ")}` : `${verdict}${assumed}`}`;
  if (partial) verdict = "unknown";
  return { node, verdict, lines, problems, needGiB: Math.round(need * 10) / 10, ...(facts.weightsBytes === undefined ? {} : { weightsBytes: facts.weightsBytes }) };
}

/** What holds the memory that is not available: other deployments, shared memory, page cache, the rest. */
function describeHolders(node: string, mem: Meminfo, deployments: readonly string[]): string {
  const used = (mem.totalKiB - mem.availableKiB) / KIB_PER_GIB;
  const parts = [`${g(used)} GiB in use`];
  if (deployments.length > 0) parts.push(`deployment${deployments.length > 1 ? "s" : ""} ${deployments.join(", ")} run${deployments.length > 1 ? "" : "s"} on ${node} (launcher down NAME)`);
  if (mem.shmemKiB >= KIB_PER_GIB) parts.push(`${g(mem.shmemKiB / KIB_PER_GIB)} GiB in shared memory and tmpfs (/dev/shm of leftover containers or processes)`);
  const cache = (mem.cachedKiB + mem.reclaimableSlabKiB) / KIB_PER_GIB;
  if (cache >= 1) parts.push(`${g(cache)} GiB page cache (launcher up --drop-caches frees it)`);
  if (deployments.length === 0) parts.push(`leftover processes hold the rest (ps aux --sort=-rss on ${node})`);
  return parts.join("; ");
}

/**
 * The fit from what the store kept, for `plan` and for a guard that did not make the check itself
 * (the daemon's, after ready): each node's memory as doctor or up's probe last read it, and the
 * weights' size the last preflight of the model read there.
 */
export function fitFromKept(
  recipe: Parameters<typeof fitDeployment>[0],
  nodes: readonly string[],
  memory: ReadonlyMap<string, { readonly meminfo: Meminfo }>,
  weights: ReadonlyMap<string, number>,
): FitReport {
  return fitDeployment(
    recipe,
    nodes.map((node) => {
      const seen = memory.get(node)?.meminfo;
      // Where the head alone reads the files, its size is each node's (nodes are head first).
      const bytes = weights.get(adapterOf(recipe.engine)?.weightsReadBy === "head" ? (nodes[0] ?? node) : node);
      return { node, ...(seen === undefined ? {} : { meminfo: seen }), ...(bytes === undefined ? {} : { weightsBytes: bytes }) };
    }),
  );
}

/** The arithmetic, node by node, then the problems: what preflight and `plan` print. */
export function fitText(report: FitReport): string {
  const out = ["memory fit (GiB):", ...report.nodes.flatMap((n) => n.lines.map((l) => `  ${l}`))];
  const problems = report.nodes.flatMap((n) => n.problems.map((p) => `${p.severity}: ${p.message}`));
  return [...out, ...problems].join("\n");
}

/** Errors (the boot must not start) and warnings, as lines. */
export function fitProblems(report: FitReport): { errors: string[]; warnings: string[] } {
  const all = report.nodes.flatMap((n) => n.problems);
  const of = (severity: FitProblem["severity"]): string[] => all.filter((p) => p.severity === severity).map((p) => p.message);
  return { errors: of("error"), warnings: of("warning") };
}
