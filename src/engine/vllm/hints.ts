/**
 * What vLLM's own failure lines tell the user to do, with the figures the line gives. One module:
 * `launcher explain` and `up`'s failure message both read their hint from here (through the
 * adapter's `hintFor`), so the two never word the same cause differently.
 *
 * Every shape below is checked in vLLM's (or torch's / NCCL's) source; the file is named at each.
 */

/** What a rule found in a line: the whole match, then its parts (a regex's groups). */
type Found = readonly (string | undefined)[];

interface Rule {
  /** A regex (linear in the line: see log-shapes.ts), or a finder for a shape no regex reads in linear time. */
  readonly pattern: RegExp | ((line: string) => Found | undefined);
  /** The hint, from the matching line and (for figures printed earlier) every line of the log. */
  readonly say: (m: Found, lines: readonly string[]) => string;
}

const num = (s: string | undefined): number => Number((s ?? "").replace(/,/g, ""));
const GIB: Readonly<Record<string, number>> = { GiB: 1, MiB: 1 / 1024, KiB: 1 / (1024 * 1024), bytes: 1 / 1024 ** 3 };
const gib = (value: string | undefined, unit: string | undefined): number => num(value) * (GIB[unit ?? "GiB"] ?? 1);
const two = (n: number): string => n.toFixed(2);
/** A --gpu-memory-utilization step, rounded the safe way (up for "lower by", down for "at most"). */
const up2 = (n: number): string => (Math.ceil(n * 100) / 100).toFixed(2);
const down2 = (n: number): string => (Math.floor(n * 100) / 100).toFixed(2);

const DOCTOR = "`launcher doctor`";

/** The known causes' own shapes, most specific first. */
const RULES: readonly Rule[] = [
  // Ray's ActorDiedError for an actor whose node died (ray python/ray/exceptions.py, GCS's
  // GenNodeDiedCause in src/ray/gcs/gcs_actor_manager.cc), as log-shapes.ts refineVllmCause words it:
  // the node went away, so whatever else the head logged after it (NCCL errors) follows from that.
  {
    pattern: /^(\w+) on ([\w.:-]+): The actor is dead because its node has died/,
    say: (m) =>
      `Ray lost the node at ${m[2] as string} (its ${m[1] as string} actor died with it): that node, or its \`ray start\` container, ended or lost the head; \`launcher logs\` shows the node's last lines, and \`journalctl -k\` on it a kill by the kernel's OOM killer`,
  },
  // vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory: "To serve at least one request
  // with the models's max seq len (N), (X GiB KV cache is needed, which is larger than the available
  // KV cache memory (Y GiB). Based on the available memory, the estimated maximum model length is E."
  // (older builds spell it "models's", newer "model's"; the estimate is left out when it is 0).
  {
    pattern: /max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \((-?[\d.]+) GiB\)\.(?: Based on the available memory, the estimated maximum model length is (\d+)\.)?/,
    say: (m) =>
      m[4] !== undefined
        ? `KV cache too small: one request of ${m[1]} tokens needs ${m[2]} GiB of KV cache but only ${m[3]} GiB is left; vLLM estimates the longest that fits at ${m[4]} tokens: set --max-model-len ${m[4]} (or less) in the recipe's args, or raise --gpu-memory-utilization`
        : `KV cache too small: one request of ${m[1]} tokens needs ${m[2]} GiB of KV cache but only ${m[3]} GiB is left: lower --max-model-len in the recipe's args, or raise --gpu-memory-utilization`,
  },
  // Same function: "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`".
  // How far short it is, vllm/v1/worker/gpu_worker.py (determine_available_memory) printed before:
  // "Available KV cache memory: -X GiB" (requested memory minus weights, activations and the rest).
  {
    pattern: /No available memory for the cache blocks/,
    say: (_m, lines) => {
      const short = firstMatch(/Available KV cache memory: -([\d.]+) GiB/, lines)?.[1];
      return `no memory is left for the KV cache: the weights and activations take the whole --gpu-memory-utilization budget${short === undefined ? "" : ` and ${short} GiB more`}; raise --gpu-memory-utilization (or give --kv-cache-memory), or spread the model over more nodes (tensor_parallel_size)`;
    },
  },
  // vllm/v1/worker/utils.py, request_memory: "Free memory on device cuda:0 (F/T GiB) on startup is
  // less than desired GPU memory utilization (U, R GiB)" (older builds leave the device out).
  {
    pattern: /Free memory on device(?: \S+)? \(([\d.]+)\/([\d.]+) GiB\) on startup is less than desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)/,
    say: (m) =>
      `only ${m[1]} of ${m[2]} GiB was free when the engine started, and --gpu-memory-utilization ${m[3]} asks for ${m[4]} GiB: lower it to at most ${down2(num(m[1]) / num(m[2]))}, or free the memory first (another deployment's container, or the page cache on unified memory: \`sync; echo 3 > /proc/sys/vm/drop_caches\` as root)`,
  },
  // vllm/config/model.py, _get_and_verify_max_len: "User-specified max_model_len (N) is greater than
  // the derived max_model_len (max_position_embeddings=D or model_max_length=None in model's config.json)".
  {
    pattern: /User-specified max_model_len \((\d+)\) is greater than the derived max_model_len \((\w+)=([\d.]+)/,
    say: (m) =>
      `--max-model-len ${m[1]} is longer than the model supports (${m[2]}=${String(Math.trunc(num(m[3])))} in its config.json): lower --max-model-len to ${String(Math.trunc(num(m[3])))} or less (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the recipe's env only with RoPE scaling that really extends it)`,
  },
  // torch, c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate X GiB. GPU 0 has
  // a total capacity of T GiB of which F GiB is free." (format_size: bytes, KiB, MiB or GiB).
  {
    pattern: /CUDA out of memory\. Tried to allocate ([\d.]+) (GiB|MiB|KiB|bytes)\. GPU \d+ has a total capacity of ([\d.]+) (GiB|MiB) of which ([\d.]+) (GiB|MiB|KiB|bytes) is free/,
    say: (m) => {
      const short = Math.max(0, gib(m[1], m[2]) - gib(m[5], m[6]));
      const total = gib(m[3], m[4]);
      return `out of GPU memory: an allocation of ${m[1]} ${m[2]} found only ${m[5]} ${m[6]} free of ${m[3]} ${m[4]} (${two(short)} GiB short): lower --gpu-memory-utilization by at least ${up2(total > 0 ? short / total : 0)} so more stays outside vLLM's budget, or lower --max-num-seqs / --max-model-len; if it happened while loading the weights, the model does not fit these nodes (more nodes or a smaller quantization)`;
    },
  },
  // A CUDA runtime call that failed with cudaErrorMemoryAllocation (torch's C10_CUDA_CHECK prints
  // "CUDA error: out of memory"); no figures. Common on unified memory, where the page cache and
  // every other process draw on the same pool.
  {
    pattern: /CUDA error: out of memory/,
    say: () =>
      "a CUDA call ran out of memory; on unified memory (DGX Spark) the page cache and other processes share the GPU's pool: lower --gpu-memory-utilization (0.05 at a time), drop the page cache on the node (`sync; echo 3 > /proc/sys/vm/drop_caches` as root) and check that nothing else holds memory",
  },
  // NCCL, src/misc/ibvwrap.cc: "Call to ibv_modify_qp failed with 61 No data available ... local GID
  // index N": the RDMA queue pair could not be moved to RTR, in practice a RoCE GID index that is
  // wrong on one node (it differs between Sparks).
  {
    pattern: /ibv_modify_qp/,
    say: () =>
      `NCCL could not connect the RDMA queue pairs (ibv_modify_qp): usually the RoCE GID index (NCCL_IB_GID_INDEX) is wrong on one node; run ${DOCTOR} to read each node's GID index and fix gid_index in the cluster file`,
  },
  // vllm/distributed/device_communicators/pynccl_wrapper.py, NCCL_CHECK: "RuntimeError: NCCL error:
  // <ncclGetErrorString>"; torch's ProcessGroupNCCL says "NCCL error in: ...".
  {
    pattern: /NCCL error/,
    say: () =>
      `NCCL failed between the nodes: run ${DOCTOR} to check every node's fabric (interface, RoCE HCAs and GID index, MTU, peers); NCCL_DEBUG=INFO in the recipe's env shows which step failed`,
  },
  // The dynamic loader's words through Python's ImportError ("<file>.so: undefined symbol: <name>");
  // vLLM logs its own kernels' ImportError from vllm/platforms/interface.py (import_kernels).
  {
    pattern: undefinedSymbol,
    say: (m) =>
      `${m[1]} was compiled against another torch (or for another GPU architecture) than the one in the image (undefined symbol ${m[2]}): rebuild the image so that this extension is built against the image's own torch and CUDA, for this GPU`,
  },
  // torch / the CUDA driver: "CUDA-capable device(s) is/are busy or unavailable".
  {
    pattern: /CUDA-capable device\(s\) is\/are busy or unavailable/,
    say: () => "the GPU is held by another process (a container of another deployment?): `launcher status` lists what runs; `nvidia-smi` on the node shows who holds it",
  },
  // vllm/v1/executor/multiproc_executor.py `start_worker_monitor` (log-shapes.ts WORKER_KILLED): a
  // worker of this node ended by a signal (or with no code), so with no exception of its own. After
  // every rule above: a worker that raised (an NCCL error) gets this line too, with exit code 1.
  // Exit code -N is signal N (Python's multiprocessing `Process.exitcode`); -9 is SIGKILL, which
  // nothing in vLLM sends: on unified memory (DGX Spark), the kernel's OOM killer (mm/oom_kill.c logs
  // "Out of memory: Killed process").
  {
    pattern: /Worker proc (\S+) died unexpectedly \(exit code: (-\d+|None)\)/,
    say: (m) =>
      m[2] === "-9"
        ? `worker ${m[1] as string} was killed (SIGKILL, exit code -9) with no error of its own: on unified memory (DGX Spark) that is almost always the kernel's OOM killer (\`journalctl -k | grep -i "out of memory"\` on the node shows it): lower --gpu-memory-utilization (0.05 at a time) or --max-model-len, and drop the page cache on the node (\`sync; echo 3 > /proc/sys/vm/drop_caches\` as root)`
        : `worker ${m[1] as string} of this node died with no Python error of its own (exit code ${m[2] as string}${m[2] === "None" ? "" : `: signal ${(m[2] as string).slice(1)}`}): a crash in native code or a kill; \`journalctl -k\` on the node shows what the kernel saw`,
  },
  // vllm/v1/engine/core_client.py `start_engine_core_monitor` (log-shapes.ts ENGINE_CORE_DIED): last,
  // since the engine core's own reason, when the log has it, is what a rule above reads.
  {
    pattern: /Engine core proc(?:ess)? (\S+) died unexpectedly/,
    say: (m) =>
      `the engine core process (${m[1] as string}) died: its reason is in the lines before it (\`launcher logs\`); if none is there, it was killed, on unified memory (DGX Spark) most often by the kernel's OOM killer (\`journalctl -k\` on the node): lower --gpu-memory-utilization`,
  },
];

/** Every rule's pattern, for the test that each reads a line in linear time. */
export const HINT_PATTERNS: readonly Rule["pattern"][] = RULES.map((r) => r.pattern);

/**
 * The hint for a failed boot. The rules go most specific first, each tried on the cause and then on
 * every line: the cause may be a generic line ("NCCL error: unhandled system error") whose reason
 * is a line before it (NCCL's ibv_modify_qp warning). A plugin that failed to load is not decided
 * here: the log parser keeps it as a warning (log-shapes.ts WARNINGS), shown next to this hint.
 */
export function vllmHint(cause: string | undefined, lines: readonly string[]): string | undefined {
  const all = cause === undefined ? lines : [cause, ...lines];
  let main: string | undefined;
  for (const r of RULES) {
    const m = firstMatch(r.pattern, all);
    if (m) {
      main = r.say(m, lines);
      break;
    }
  }
  return main;
}

function firstMatch(pattern: Rule["pattern"], lines: readonly string[]): Found | undefined {
  for (const l of lines) {
    const m = typeof pattern === "function" ? pattern(l) : pattern.exec(l);
    if (m) return m;
  }
  return undefined;
}

const SYMBOL = ": undefined symbol: ";
// A path whose last name is a shared object: `.so`, then only version parts (`.so.1.2`, `.so_x`).
const SO_TAIL = /^[\w.]*$/;
const WORD = /\S+/y;

/**
 * `LIB: undefined symbol: NAME`, LIB a word that ends in a shared object's name: what the regex
 * /(\S+\.so[\w.]*): undefined symbol: (\S+)/ finds, in one pass. That regex retries the word from
 * each of its characters, and `[\w.]*` from each ".so" in it: cubic in a long word.
 */
function undefinedSymbol(line: string): Found | undefined {
  for (let at = line.indexOf(SYMBOL); at >= 0; at = line.indexOf(SYMBOL, at + 1)) {
    const lib = line.slice(wordStart(line, at), at);
    const so = lib.lastIndexOf(".so");
    WORD.lastIndex = at + SYMBOL.length;
    const name = WORD.exec(line)?.[0];
    if (so > 0 && SO_TAIL.test(lib.slice(so + 3)) && name !== undefined) return [`${lib}${SYMBOL}${name}`, lib, name];
  }
  return undefined;
}

/** Where the run of non-space characters that ends at `end` begins. */
function wordStart(line: string, end: number): number {
  let i = end;
  while (i > 0 && !/\s/.test(line[i - 1] as string)) i--;
  return i;
}
