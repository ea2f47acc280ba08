import type { EngineFlags, FlagChoice, FlagCondition, FlagsJudge } from "../adapter.js";
import { optionShapes, shippedDump, type ArgparseDump } from "../argparse-dump.js";
// argparse's unique-prefix rule (CPython Lib/argparse.py _get_option_tuples), the same for SGLang's
// plain ArgumentParser as for vLLM's subclass of it.
import { withPrefixes } from "../vllm/abbrev.js";
import { SGLANG_KEY_ENV } from "./command.js";
import TABLE_JSON from "./parser-table.json" with { type: "json" };
import { lazy } from "../../config/lazy.js";

/*
 * SGLang's command line, from python/sglang/srt/server_args.py (sgl-project/sglang 001067ff):
 * ServerArgs fields become flags (`tp_size` -> --tp-size) with their aliases
 * (tp_size: --tensor-parallel-size; pp_size: --pipeline-parallel-size; dp_size:
 * --data-parallel-size; dist_init_addr: --nccl-init-addr; model_path: --model), parsed by
 * prepare_server_args's argparse.ArgumentParser with its default allow_abbrev, so `--tp` and `--dp`
 * are the unique prefixes users write for --tp-size and --dp-size (SGLang's own docs launch with
 * `--tp 2`, `--dp 2`). An image's own parser (./parser-dump.ts) knows every option, so that a flag
 * it does not know is refused before up (sglangFlagsFrom). Without an image, launcher's table
 * (./parser-table.json, the same parser reconstructed from server_args.py at 001067ff, regenerated
 * from an image by scripts/sglang-parser-table.ts) judges alike, but a flag it does not know is
 * only a warning: the image may be older or newer than the table.
 */

const TP = ["--tp-size", "--tensor-parallel-size", "--tp"];
const PP = ["--pp-size", "--pipeline-parallel-size", "--pp"];
const DP = ["--dp-size", "--data-parallel-size", "--dp"];
// ServerArgs.ep_size also has the alias `--ep` at 001067ff (older releases had none, and there
// --ep-num-redundant-experts made the prefix ambiguous): a parser's dump adds its aliases. `--pp` is
// ambiguous (--pp-max-micro-batch-size), refused with the managed --pp-size all the same.
const EP = ["--ep-size", "--expert-parallel-size"];
const DIST = "launcher gives every node the head's fabric address and port, the node count and its rank";
const DP_ATTENTION = ["--enable-dp-attention"];

/**
 * vLLM's spellings a recipe moved from vLLM keeps, which SGLang's parser has not (its field for
 * each, python/sglang/srt/server_args.py: context_length, mem_fraction_static,
 * max_running_requests, speculative_*; the same pairs in a two-Spark report of SGLang v0.5.12,
 * al-engr.com "sglang-deepseek-spark-pivot"): refused at validate with SGLang's own flag, rather
 * than left to stop SGLang's parser at boot.
 */
const VLLM_ONLY = [
  { flags: ["--max-model-len"], why: "SGLang has no --max-model-len (vLLM's)", instead: "write --context-length" },
  { flags: ["--gpu-memory-utilization"], why: "SGLang has no --gpu-memory-utilization (vLLM's)", instead: "write --mem-fraction-static, the share of the node's memory SGLang takes for weights and KV cache" },
  { flags: ["--max-num-seqs"], why: "SGLang has no --max-num-seqs (vLLM's)", instead: "write --max-running-requests" },
  { flags: ["--enable-prefix-caching"], why: "SGLang has no --enable-prefix-caching (vLLM's): its prefix cache (RadixAttention) is on unless --disable-radix-cache", instead: "remove it" },
  { flags: ["--speculative-config"], why: "SGLang has no --speculative-config (vLLM's JSON)", instead: "write SGLang's own: --speculative-algorithm, --speculative-draft-model-path, --speculative-num-steps, --speculative-num-draft-tokens" },
  { flags: ["--distributed-executor-backend"], why: "SGLang has no --distributed-executor-backend (vLLM's): it starts its ranks itself", instead: "remove it" },
] as const;

/**
 * launcher's policy of SGLang's flags, whoever judges them (the table below, or an image's parser).
 * The shapes (which flags take no value, several, JSON, one of a few) come from a parser dump.
 */
const POLICY: Omit<EngineFlags, "boolean" | "many" | "choices" | "known" | "judge"> = {
  aliases: [TP, PP, DP, EP, ["--model-path", "--model"], ["--dist-init-addr", "--nccl-init-addr"]],
  managed: [
    { flags: ["--host"], instead: "set api_bind in the cluster file" },
    { flags: ["--port"], instead: "set api_port in the cluster file" },
    // SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE replaces the init method --dist-init-addr makes
    // (python/sglang/srt/model_executor/model_runner.py init_torch_distributed, sgl-project/sglang 001067ff).
    { flags: ["--dist-init-addr", "--nccl-init-addr"], env: ["SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE"], instead: DIST },
    { flags: ["--nnodes"], instead: `set required_nodes in the recipe (${DIST})` },
    // SGLANG_BLOCK_NONZERO_RANK_CHILDREN = "0": a rank >= 1 returns from its launch instead of
    // serving its health check and waiting on its schedulers (python/sglang/srt/entrypoints/engine.py
    // _launch_subprocesses, sgl-project/sglang 001067ff), for SGLang's Python Engine API: a
    // container's launch process then ends while its rank should run.
    { flags: ["--node-rank"], env: ["SGLANG_BLOCK_NONZERO_RANK_CHILDREN"], instead: DIST },
    { flags: TP, instead: "set tensor_parallel_size in the recipe" },
    { flags: PP, instead: "set pipeline_parallel_size in the recipe" },
    { flags: ["--enable-metrics"], instead: "remove it: launcher turns SGLang's metrics on itself (drain and the daemon read them)" },
    // ServerArgs.use_ray: "Use Ray actors for scheduler process management".
    { flags: ["--use-ray"], why: "launcher starts SGLang's ranks on every node itself, without Ray", instead: "remove it" },
    ...VLLM_ONLY,
  ],
  // Fields SGLang reads as JSON but declares as plain strings (the dump's `loads` types are the others).
  json: ["--json-model-override-args", "--model-loader-extra-config"],
  jsonWhenBraced: [],
  model: ["--model-path", "--model"],
  // Upstream refuses data parallel across nodes without DP attention (server_args.py: `assert
  // not (dp_size > 1 and nnodes != 1 and not enable_dp_attention)`), and a replica per node is
  // one server each, not one deployment (sparkrun issue #284: --nnodes on such replicas trips
  // "tp_size must be divisible by number of nodes").
  // With --enable-dp-attention, data parallel is of the attention inside the tensor parallel ranks:
  // it divides tp rather than multiplying the ranks (ServerArgs._handle_data_parallelism: `assert
  // self.tp_size % self.dp_size == 0`), and multi-node is allowed.
  singleNode: [{ flags: DP, when: { without: DP_ATTENTION }, instead: "data-parallel replicas on several nodes are separate servers: boot one recipe with required_nodes = 1 per node (a lane over them), add --enable-dp-attention (DP attention inside the tensor parallel ranks), or drop --dp-size" }],
  worldSize: [{ key: "data parallel", flags: DP, when: { without: DP_ATTENTION } }],
  // ServerArgs.ep_size: the expert-parallel groups are carved out of the tensor parallel ranks.
  dividesTensorParallel: [
    { key: "expert parallel", flags: EP },
    { key: "data parallel attention", flags: DP, when: { with: DP_ATTENTION } },
  ],
  backend: [],
  // ServerArgs `--config`: a YAML file of more arguments, read by SGLang inside the container.
  flagFiles: ["--config"],
  apiKey: { flags: ["--api-key"], env: SGLANG_KEY_ENV },
};

// python/sglang/srt/server_args.py: fields with `type_parser=json.loads` (the dump names the
// callable `loads`); plain strings SGLang reads as JSON are the policy's (POLICY.json).
const JSON_TYPES = { always: ["loads"], braced: [] } as const;
const VLLM_ONLY_NAMES: ReadonlySet<string> = new Set(VLLM_ONLY.flatMap((m) => m.flags));
/*
 * Options whose choices are not SGLang's own words but what the image installs: server_args.py's
 * add_*_choices functions let a plugin (sglang.srt.plugins.load_plugins, which the dump program
 * runs) extend these lists. An image's dump holds them as that image has them; launcher's table
 * does not check them.
 */
const PLUGIN_CHOICES = [
  "--load-format", "--speculative-draft-load-format", "--quantization", "--speculative-draft-model-quantization",
  "--attention-backend", "--decode-attention-backend", "--prefill-attention-backend", "--speculative-draft-attention-backend",
  "--disaggregation-transfer-backend", "--grammar-backend", "--moe-runner-backend", "--speculative-moe-runner-backend",
  "--fp8-gemm-backend", "--fp4-gemm-backend", "--radix-eviction-policy", "--rl-on-policy-target",
  "--linear-attn-backend", "--linear-attn-decode-backend", "--linear-attn-prefill-backend", "--linear-attn-verify-backend",
  "--reasoning-parser", "--tool-call-parser", "--sampling-backend",
];

/** A parser's choices as a message shows them: the first few, each cut short (they are the image's words). */
const shown = (values: readonly string[]): string => `${values.slice(0, 12).map((v) => (v.length > 40 ? `${v.slice(0, 40)}...` : v)).join(", ")}${values.length > 12 ? ", ..." : ""}`;

/**
 * SGLang's flags as an image's parser dump describes them: every option it knows (so an unknown
 * one is refused), the value shapes and choices it declares, and launcher's policy, each flag of
 * it under every alias the dump gives its action and every prefix argparse takes for it. A vLLM
 * spelling is refused only by a parser that lacks it (a fork that added it takes it).
 * `ignoreChoices`: options whose choices the dump cannot speak for (launcher's table: PLUGIN_CHOICES).
 */
export function sglangFlagsFrom(dump: ArgparseDump, judge: FlagsJudge, ignoreChoices: readonly string[] = []): EngineFlags {
  const shapes = optionShapes(dump, JSON_TYPES, ignoreChoices);
  const managedNames = POLICY.managed.flatMap((m) => m.flags);
  const all = [...new Set([...shapes.known, ...managedNames])];
  const widen = (flags: readonly string[]): string[] => [...new Set([...flags, ...shapes.aliases.filter((g) => g.some((s) => flags.includes(s))).flat()])];
  // A managed flag keeps its own spellings: src/recipe/args.ts managedFlagOf names the flag a prefix of it stands for.
  const spell = (flags: readonly string[]): string[] => [...new Set(widen(flags).flatMap((f) => (managedNames.includes(f) ? [f] : withPrefixes([f], all))))];
  const spellWhen = (when: FlagCondition | undefined): FlagCondition | undefined =>
    when === undefined ? undefined : { ...(when.with === undefined ? {} : { with: spell(when.with) }), ...(when.without === undefined ? {} : { without: spell(when.without) }) };
  const spelled = <T extends { readonly flags: readonly string[]; readonly when?: FlagCondition }>(list: readonly T[]): T[] =>
    list.map((x) => ({ ...x, flags: spell(x.flags), ...(x.when === undefined ? {} : { when: spellWhen(x.when) }) }));
  const managed = POLICY.managed.filter((m) => !m.flags.some((f) => VLLM_ONLY_NAMES.has(f) && shapes.known.includes(f))).map((m) => ({ ...m, flags: widen(m.flags) }));
  const choices: FlagChoice[] = shapes.choices.map((c) => ({ ...c, instead: `give one of ${shown(c.values)}` }));
  return {
    ...POLICY,
    judge,
    known: all,
    managed,
    aliases: [...(POLICY.aliases ?? []), ...shapes.aliases],
    choices: spelled(choices),
    boolean: spell(shapes.boolean),
    many: spell(shapes.many),
    json: spell([...shapes.json, ...POLICY.json]),
    model: spell(POLICY.model),
    singleNode: spelled(POLICY.singleNode),
    worldSize: spelled(POLICY.worldSize),
    dividesTensorParallel: spelled(POLICY.dividesTensorParallel),
    flagFiles: spell(POLICY.flagFiles),
    apiKey: { ...POLICY.apiKey, flags: spell(POLICY.apiKey.flags) },
  };
}

/** The table launcher judges by without an image: sglang serve's parser at SGLANG_TABLE_VERSION (./parser-table.json). */
const SGLANG_TABLE: ArgparseDump = shippedDump(TABLE_JSON);

/** The SGLang source the table was reconstructed from (or the release an image's dump gave it). */
export const SGLANG_TABLE_VERSION = SGLANG_TABLE.engine_version;

/** SGLang's flags as launcher's table knows them, made at their first use (a command that judges none never pays for them). */
export const sglangFlags: () => EngineFlags = lazy(() => sglangFlagsFrom(SGLANG_TABLE, { by: "table", engine: "SGLang", version: SGLANG_TABLE_VERSION }, PLUGIN_CHOICES));

/** Spellings of `flags` among the table's options, with the prefixes argparse takes for each (the adapter's model and memory flags). */
export const sglangSpellings = (flags: readonly string[]): string[] => [...new Set(withPrefixes(flags, sglangFlags().known ?? []))];

/**
 * `flags` (an image's) with the key flag's spellings only the image has refused: the plan, made
 * before any image is read, moves the key out of the command line by the table's spellings, so
 * under another one (`--api-k`, a unique prefix) the key would stay in SGLang's argv.
 */
export function refuseImageOnlySglangKeySpellings(flags: EngineFlags): EngineFlags {
  const extra = flags.apiKey.flags.filter((f) => !sglangFlags().apiKey.flags.includes(f));
  if (extra.length === 0) return flags;
  const why = "it is a spelling of --api-key that launcher's plan does not know, so the key would stay in the engine's command line";
  return { ...flags, managed: [...flags.managed, { flags: extra, why, instead: "write --api-key (launcher then passes the key in the engine's env, never in its arguments)" }] };
}
