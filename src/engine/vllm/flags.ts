import type { EngineFlags, FlagChoice, FlagsJudge, ManagedFlag } from "../adapter.js";
import { optionShapes, shippedDump, type ArgparseDump } from "../argparse-dump.js";
import { withPrefixes } from "./abbrev.js";
import TABLE_JSON from "./parser-table.json" with { type: "json" };
import { lazy } from "../../config/lazy.js";

/*
 * vLLM's command line as its argument parser defines it, in the release VLLM_TABLE_VERSION names
 * (./options.ts). Sources (vllm-project/vllm, main of August-September 2026):
 * - vllm/engine/arg_utils.py: EngineArgs.add_cli_args, _compute_kwargs (bool fields get
 *   argparse.BooleanOptionalAction, so `--x` and `--no-x` take no value; list fields get
 *   nargs="+"; dataclass fields are parsed with TypeAdapter.validate_json, dict fields with
 *   json.loads, dict-or-str fields (union_dict_and_str) with json.loads only when the value is
 *   `{...}`); the aliases `-n`, `-r`, `-tp`, `-pp`, `-dcp`, `-pcp`, `-dp`, `-dpn`, `-dpr`,
 *   `-dpl`, `-dpa`, `-dpp`, `-dpb`, `-dph`, `-dpe`, `-dpm`, `-ep`, `-q`, and the JSON shorthands
 *   `-cc` (--compilation-config), `-ac` (--attention-config), `-sc` (--speculative-config),
 *   `-dc` (--diffusion-config).
 * - vllm/entrypoints/launchers/cli_args.py (vllm/entrypoints/openai/cli_args.py until mid-2026):
 *   make_arg_parser (`--headless`, `--api-server-count`/`-asc`, `--config`, `--grpc`) and
 *   FrontendArgs (`--uds`: "If set, host and port arguments are ignored"; `--api-key` is
 *   list[str], so nargs="+"; `--chat-template` is a plain str; `--default-chat-template-kwargs`
 *   and `--allowed-origins/-methods/-headers` are json.loads).
 * - vllm/utils/argparse_utils.py: FlexibleArgumentParser turns `_` into `-` in a `--` flag's
 *   name up to the first `.`, moves `--model X` to the front as the positional model, turns
 *   `-O3`, `-O=3` and `-O 3` (a level of 0 to 3) into `--optimization-level 3` (`-O` is no JSON
 *   shorthand: `-O '{...}'` stays `-O`, which no option has), and subclasses
 *   argparse.ArgumentParser; vllm/entrypoints/cli/serve.py subparser_init makes the `serve`
 *   parser with add_parser and no allow_abbrev, so argparse's default (True) holds: a unique
 *   prefix (`--nnode`) is taken for the whole flag.
 */

/** Why a flag vLLM removed is refused (where the parser judging the args lacks it). */
const REMOVED = "vLLM removed it (its parser has --enable-log-requests, off by default, instead)";

/** Flags launcher writes itself on every rank (mp backend) or the head (Ray), and those it refuses. */
const MANAGED: readonly ManagedFlag[] = [
  { flags: ["--host"], instead: "launcher serves the API on the head's address it reaches it at; set api_bind in the cluster file to choose another" },
  { flags: ["--port"], instead: "set api_port in the cluster file or pass --port to launcher" },
  { flags: ["--uds"], instead: "launcher and its gateway reach the engine over TCP at api_port (vLLM ignores --host/--port with --uds); remove it" },
  { flags: ["--nnodes", "-n"], instead: "set required_nodes in the recipe" },
  { flags: ["--node-rank", "-r"], instead: "launcher gives each node its rank from the cluster file's order; remove it" },
  { flags: ["--master-addr"], instead: "launcher uses the head's fabric_ip from the cluster file; remove it" },
  { flags: ["--master-port"], instead: "set master_port in the cluster file" },
  { flags: ["--headless"], instead: "launcher adds it to every rank above 0; remove it" },
  { flags: ["--tensor-parallel-size", "-tp"], instead: "set tensor_parallel_size in the recipe" },
  { flags: ["--pipeline-parallel-size", "-pp"], instead: "set pipeline_parallel_size in the recipe" },
  ...refused(),
];

/**
 * Flags launcher refuses though it does not write them. Every rank gets the recipe's args, so a
 * flag that says which rank or node this is would be copied to all of them; and launcher waits
 * for the engine's HTTP API (GET /health), so a flag that starts none makes readiness impossible.
 */
function refused(): ManagedFlag[] {
  const perRank = (what: string): string => `${what}, but launcher gives every node the same args`;
  return [
    // arg_utils.py: -dpn "Data parallel rank of this instance. When set, enables external load
    // balancer mode"; -dpr "Starting data parallel rank for secondary nodes"; -dpl "Number of
    // data parallel replicas to run on this node"; --device-ids "Comma-separated physical GPU
    // device IDs or UUIDs" of this node.
    { flags: ["--data-parallel-rank", "-dpn"], why: perRank("it is one data parallel rank's own (external load balancing)"), instead: "remove it; give data parallel as --data-parallel-size, which launcher runs as one deployment" },
    { flags: ["--data-parallel-start-rank", "-dpr"], why: perRank("it is one node's first data parallel rank"), instead: "remove it; give data parallel as --data-parallel-size" },
    { flags: ["--data-parallel-size-local", "-dpl"], why: perRank("it is one node's count of data parallel ranks"), instead: "remove it; vLLM spreads --data-parallel-size over the nodes" },
    { flags: ["--device-ids"], why: perRank("it names one node's GPUs"), instead: "remove it; launcher gives each rank its node's GPUs" },
    // serve.py ServeSubcommand.cmd: with -dpm, run_dp_supervisor starts one API server per local
    // data parallel rank on ports of its own, its health aggregated on a supervisor port.
    { flags: ["--data-parallel-multi-port-external-lb", "-dpm"], why: "it runs a node-local supervisor with one API server per data parallel rank, each on its own port, where launcher waits for one API at api_port", instead: "remove it" },
    // serve.py ServeSubcommand.cmd: `if args.grpc: ... serve_grpc(args); return`, before any
    // HTTP server: no /health and no /v1.
    // vllm/entrypoints/launchers/api_server.py serve_http passes ssl_keyfile/ssl_certfile to
    // uvicorn, which then serves HTTPS only.
    { flags: ["--ssl-keyfile", "--ssl-certfile"], why: "vLLM then serves HTTPS only, and launcher's readiness check, drain and gateway speak plain HTTP to the engine", instead: "remove it; put TLS in front of launcher's gateway (launcher serve) instead" },
    { flags: ["--grpc"], why: "vLLM then serves gRPC and no HTTP API, so launcher's readiness check (GET /health) and its gateway could never reach it", instead: "remove it" },
    // vllm/engine/arg_utils.py AsyncEngineArgs: enable_log_requests (BooleanOptionalAction, off by
    // default) took the place of --disable-log-requests; vLLM 0.17.1's `vllm serve --help` lists
    // `--enable-log-requests, --no-enable-log-requests` and no --disable-log-requests.
    { flags: ["--disable-log-requests"], why: REMOVED, instead: "remove it: requests are not logged unless --enable-log-requests is given" },
  ];
}

/**
 * argparse_utils.py FlexibleArgumentParser.parse_args: `-O3` / `-Odecode` / `-O=3` become
 * `--optimization-level <rest>`, and `-O` followed by 0, 1, 2 or 3 becomes `--optimization-level`;
 * vLLM's docs, "Optimization Levels": `-O0` to `-O3`. Any
 * other value fails (`-O '{...}'` stays `-O`, an option vLLM does not have).
 */
const OPTIMIZATION_LEVEL: FlagChoice = {
  flags: ["--optimization-level", "-O"],
  values: ["0", "1", "2", "3"],
  instead: "give a level of 0 to 3 (-O3); the JSON shorthand for --compilation-config is -cc '{...}'",
};

/**
 * What launcher decides of vLLM's flags whatever its version says: the managed and refused flags,
 * the model, the sizes and the backend. The shapes (which flags take no value, several, JSON, one of
 * a few) come from a parser dump: the image's own, or the table's (./parser-table.json).
 */
const POLICY: Omit<EngineFlags, "boolean" | "many" | "json" | "jsonWhenBraced" | "choices" | "known" | "judge"> = {
  managed: MANAGED,
  // CPython argparse _get_option_tuples: a single-dash word whose first two characters are an
  // option (`-n2`) is that option with the rest as its value; `-O` by the preprocessing above.
  attached: ["-n", "-r", "-q", "-O"],
  // serve.py ServeSubcommand.cmd: `elif args.api_server_count < 1: run_headless(args)`: no API server.
  refusedValues: [{ flags: ["--api-server-count", "-asc"], refuses: (v) => /^\s*[+-]?\d[\d_]*\s*$/.test(v) && Number(v.replace(/_/g, "")) < 1, why: "fewer than 1 API server runs the engine headless, with no HTTP API launcher's readiness check could reach", instead: "remove it, or give 1 or more" }],
  // The positional model: FlexibleArgumentParser.parse_args moves `--model X` to the front, so
  // beside the model launcher puts there vLLM sees two positionals and stops.
  model: ["--model"],
  // A headless rank refuses API servers (vllm/entrypoints/cli/serve.py ServeSubcommand.cmd:
  // "--api-server-count=N cannot be used with --headless"); every rank gets the recipe's args.
  singleNode: [{ flags: ["--api-server-count", "-asc"], instead: "headless worker ranks refuse it; run the API servers of a multi-node deployment with the default count" }],
  // vllm/config/parallel.py: world_size = PP x TP x PCP ("PCP expands the process world size"),
  // and data parallel runs that many copies (world_size_across_dp); DCP reuses the TP ranks.
  worldSize: [
    { key: "data_parallel_size", flags: ["--data-parallel-size", "-dp"] },
    { key: "prefill_context_parallel_size", flags: ["--prefill-context-parallel-size", "-pcp"] },
  ],
  // DCP shards the KV cache across the TP ranks it reuses (vllm/config/parallel.py,
  // docs/serving/context_parallel_deployment.md): its groups split the TP ranks evenly.
  dividesTensorParallel: [{ key: "decode_context_parallel_size", flags: ["--decode-context-parallel-size", "-dcp"] }],
  // vllm/config/parallel.py ParallelConfig.distributed_executor_backend ("mp", "ray", ...).
  backend: ["--distributed-executor-backend"],
  // cli_args.py make_arg_parser `--config` (a YAML file); argparse_utils.py _pull_args_from_config
  // inserts its keys as flags inside the container, where launcher does not look.
  flagFiles: ["--config"],
  // vllm/entrypoints/openai/api_server.py build_app: `args.api_key or [envs.VLLM_API_KEY]`
  // (the flag wins), checked as `Authorization: Bearer KEY` on /v1 routes.
  apiKey: { flags: ["--api-key"], env: "VLLM_API_KEY" },
};

/*
 * vllm/engine/arg_utils.py _compute_kwargs: a dataclass field is parsed by `parse_dataclass`
 * (TypeAdapter.validate_json), a dict field by json.loads (wrapped by parse_type/optional_type,
 * whose closures the dump program unwraps to `loads`), a dict-or-str field by union_dict_and_str,
 * which calls json.loads only on `{...}`.
 */
const JSON_TYPES = { always: ["parse_dataclass", "loads"], braced: ["union_dict_and_str"] } as const;
// arg_utils.py: --mm-processor-device's choices add the platform's device type only where the
// platform is detected, which a dump without a GPU is not: they say nothing of the Spark.
const PLATFORM_CHOICES = ["--mm-processor-device"];
// The word FlexibleArgumentParser turns into --optimization-level before argparse sees it.
const PREPROCESSED = ["-O"];

// vllm/engine/arg_utils.py: vLLM's own help action, which prints and exits: no API either.
const HELP: ManagedFlag = { flags: ["--help", "-h"], why: "vLLM then prints its help and exits, with no API to wait for", instead: "remove it; launcher validate --image IMAGE checks the args by the image's own parser" };

/**
 * vLLM's flags as a parser dump describes them, with every prefix argparse takes for each. Each
 * flag of launcher's policy also goes by every other option string of its action in the dump (an
 * alias only a fork has: `-k` for --api-key is the key all the same).
 */
export function vllmFlagsFrom(dump: ArgparseDump, judge: FlagsJudge): EngineFlags {
  const shapes = optionShapes(dump, JSON_TYPES, PLATFORM_CHOICES);
  // `-O` is the level only where the parser has --optimization-level (older vLLM: --compilation-config's alias).
  const level = shapes.known.includes(OPTIMIZATION_LEVEL.flags[0] as string);
  const all = [...new Set([...shapes.known, ...(level ? PREPROCESSED : []), ...POLICY.managed.flatMap((m) => m.flags)])];
  const widen = (flags: readonly string[]): string[] => [...new Set([...flags, ...shapes.aliases.filter((g) => g.some((s) => flags.includes(s))).flat()])];
  const spell = (flags: readonly string[]): string[] => spellings(widen(flags), all);
  const spelled = <T extends { readonly flags: readonly string[] }>(list: readonly T[]): T[] => list.map((x) => ({ ...x, flags: spell(x.flags) }));
  // A flag vLLM removed is refused only by a parser without it (an older image still takes it).
  const managed = [...POLICY.managed, HELP].filter((m) => !(m.why === REMOVED && m.flags.some((f) => shapes.known.includes(f)))).map((m) => ({ ...m, flags: widen(m.flags) }));
  const isLevel = (c: { flags: readonly string[] }): boolean => c.flags.includes(OPTIMIZATION_LEVEL.flags[0] as string);
  const choices: FlagChoice[] = [...shapes.choices.filter((c) => !(level && isLevel(c))).map((c) => ({ ...c, instead: `give one of ${shown(c.values)}` })), ...(level ? [OPTIMIZATION_LEVEL] : [])];
  return {
    ...POLICY,
    managed,
    attached: POLICY.attached?.filter((a) => level || a !== "-O") ?? [],
    judge,
    known: all,
    aliases: [...shapes.aliases, ...(level ? [OPTIMIZATION_LEVEL.flags] : [])],
    choices: spelled(choices),
    boolean: spell(shapes.boolean),
    many: spell(shapes.many),
    json: spell(shapes.json),
    jsonWhenBraced: spell(shapes.jsonWhenBraced),
    singleNode: spelled(POLICY.singleNode),
    refusedValues: spelled(POLICY.refusedValues ?? []),
    worldSize: spelled(POLICY.worldSize),
    dividesTensorParallel: spelled(POLICY.dividesTensorParallel),
    backend: spell(POLICY.backend),
    flagFiles: spell(POLICY.flagFiles),
    apiKey: { ...POLICY.apiKey, flags: spell(POLICY.apiKey.flags) },
  };
}

/** A parser's choices as a message shows them: the first few, each cut short (they are the image's words). */
const shown = (values: readonly string[]): string => `${values.slice(0, 12).map((v) => (v.length > 40 ? `${v.slice(0, 40)}...` : v)).join(", ")}${values.length > 12 ? ", ..." : ""}`;

const MANAGED_NAMES = new Set(MANAGED.flatMap((m) => m.flags));

/**
 * A flag's spellings and the prefixes argparse takes for each (`--served-model` for
 * --served-model-name), among `all` option strings. A managed flag keeps its own spellings only:
 * src/recipe/args.ts managedFlagOf names the flag a prefix of it stands for. `--model` too:
 * FlexibleArgumentParser moves it only when spelled whole.
 */
const spellings = (flags: readonly string[], all: readonly string[]): string[] =>
  flags.flatMap((f) => (MANAGED_NAMES.has(f) ? [f] : withPrefixes([f], all))).filter((f, i, every) => every.indexOf(f) === i);

/** The table launcher judges by without an image: vLLM VLLM_TABLE_VERSION's parser (./parser-table.json). */
const VLLM_TABLE: ArgparseDump = shippedDump(TABLE_JSON);

/** The vLLM release the table describes. */
export const VLLM_TABLE_VERSION = VLLM_TABLE.engine_version;

/** vLLM's flags as launcher's table knows them, made at their first use (a command that judges none never pays for them). */
export const vllmFlags: () => EngineFlags = lazy(() => vllmFlagsFrom(VLLM_TABLE, { by: "table", engine: "vLLM", version: VLLM_TABLE_VERSION }));

/** Spellings of `flags` among the table's options (the adapter's model and memory flags). */
export const vllmSpellings = (flags: readonly string[]): string[] => spellings(flags, vllmFlags().known ?? []);

/** The share of memory vLLM takes without --gpu-memory-utilization, as a dump's default gives it. */
export function defaultUtilizationOf(dump: ArgparseDump): number | undefined {
  const d = optionShapes(dump, JSON_TYPES).defaults.get("--gpu-memory-utilization");
  return typeof d === "number" && d > 0 && d <= 1 ? d : undefined;
}

/** The table's --gpu-memory-utilization default (vllm/config/cache.py CacheConfig: 0.92 in 0.25.1). */
export const vllmTableUtilization: () => number = lazy((): number => {
  const d = defaultUtilizationOf(VLLM_TABLE);
  if (d === undefined) throw new Error("src/engine/vllm/parser-table.json: --gpu-memory-utilization has no default");
  return d;
});

/**
 * `flags` (an image's) with the key flag's spellings that only the image has refused: the plan,
 * made before any image is read, moves the key out of the command line by the table's spellings,
 * so under another one the key would stay in the engine's argv and the printed plan.
 */
export function refuseImageOnlyKeySpellings(flags: EngineFlags): EngineFlags {
  const extra = flags.apiKey.flags.filter((f) => !vllmFlags().apiKey.flags.includes(f));
  if (extra.length === 0) return flags;
  const why = "it is this image's own spelling of --api-key, which launcher's plan does not know, so the key would stay in the engine's command line";
  return { ...flags, managed: [...flags.managed, { flags: extra, why, instead: "write --api-key (launcher then passes the key in the engine's env, never in its arguments)" }] };
}
