import { stripVTControlCharacters } from "node:util";
import { NOT_FABRIC_ADDRESS_PATTERN } from "../../contract/pod-start.js";
import type { BootPhase, LineTime, LogLine } from "../adapter.js";
import { TORCH_PEER_LOSS } from "../torch-peer-loss.js";

/**
 * How SGLang writes its log, as read in sgl-project/sglang: one home for every line shape launcher
 * reads from it. Every pattern meets untrusted container output: anchored or led by a literal, with
 * no `.*` between two literals (the rule of ../vllm/log-shapes.ts; test/unit/log-linear.test.ts).
 */

// python/sglang/srt/utils/common.py configure_logger: format "[%(asctime)s{prefix}] %(message)s"
// with datefmt "%Y-%m-%d %H:%M:%S", the prefix naming the scheduler's ranks (" TP0", " DP0 TP0",
// " PP0 TP1", " TP0 EP0"), none for the HTTP server's own process. Python's logging writes a
// multi-line message (a traceback) with the header on its first line only.
const HEADER = /^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: ([A-Z]{2,4}\d+(?: [A-Z]{2,4}\d+){0,5}))?\] /;
// Uvicorn's own records through the same handler: "INFO:     Uvicorn running on ..." (uvicorn's
// default formatter "%(levelprefix)s %(message)s", the level padded to 9 characters).
const LEVEL = /^(DEBUG|INFO|WARNING|ERROR|CRITICAL): +/;

/** One raw line as a terminal shows it (colours dropped, of a tqdm bar's redraws the last), split into its header and message. */
export function readSglangLine(raw: string): LogLine {
  const parts = stripVTControlCharacters(raw).split("\r").filter((p) => p.trim() !== "");
  const text = parts[parts.length - 1] ?? "";
  const h = HEADER.exec(text);
  const afterHeader = h ? text.slice(h[0].length) : text;
  const l = LEVEL.exec(afterHeader);
  const body = (l ? afterHeader.slice(l[0].length) : afterHeader).trim();
  // No `proc`: a traceback's lines carry no header, and its exception line must read as the same
  // process's (src/engine/boot-log.ts causeContext and refineCause keep to one process's lines).
  return {
    text,
    body,
    ...(l?.[1] === undefined ? {} : { level: l[1] }),
    ...(h?.[1] === undefined ? {} : { time: h[1] }),
  };
}

/** The header's time ("%Y-%m-%d %H:%M:%S", the container's clock, UTC in SGLang's images). */
export function sglangLineTime(line: LogLine): LineTime | undefined {
  if (line.time === undefined) return undefined;
  const [y, mo, d, h, mi, s] = line.time.split(/[- :]/).map(Number) as [number, number, number, number, number, number];
  return { text: line.time, ms: Date.UTC(y, mo - 1, d, h, mi, s) };
}

// A Python exception line: the last line of a traceback (as ../vllm/log-shapes.ts EXCEPTION).
export const EXCEPTION = /^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Exit)(?:: .*)?$/;

// python/sglang/srt/managers/scheduler.py run_scheduler_process: `logger.error(f"Scheduler hit an
// exception: {traceback}")`, then SIGQUIT to the parent; the data parallel controller, detokenizer
// and tokenizer managers write the same words with their own names. The traceback follows on the
// next lines, its exception line last: that is the cause, so the line itself is only a wrapper.
const HIT_AN_EXCEPTION = /^\w+ hit an exception/;
// python/sglang/srt/entrypoints/engine.py: the parent's SIGQUIT handler, "Received sigquit from a
// child process. It usually means the child failed." before it kills its process tree.
const SIGQUIT = /^Received sigquit from a child process/;
export const BIND_FAILED = /^\[Errno \d+\] error while attempting to bind on address /;

/**
 * Lines that end the boot, also while the container runs: a scheduler's death is followed by the
 * process tree's exit (SIGQUIT to the parent, whose handler calls kill_process_tree; a child that
 * dies silently is caught by engine.py's SubprocessWatchdog), but its lines come first.
 */
export const FATAL: readonly RegExp[] = [
  HIT_AN_EXCEPTION,
  SIGQUIT,
  // torch's CUDA error text (c10/cuda/CUDAException): a kernel assert poisons the CUDA context.
  /^(?:RuntimeError: )?CUDA error: device-side assert triggered/,
  // argparse's ArgumentParser.error: "PROG: error: MESSAGE" (exit 2). PROG is the script's name
  // (launch_server.py) where the parser is built without one, "sglang serve" where it is named
  // (python/sglang/srt/server_args.py prepare_server_args: argparse.ArgumentParser(prog="sglang
  // serve"), sgl-project/sglang 59ef3b15 and d0b96898).
  /^[\w.-]+(?: [\w.-]+)?: error: /,
  // uvicorn's bind failure, logged at ERROR before it exits 1 (uvicorn/server.py startup
  // `logger.error(exc)`; asyncio's create_server words it "[Errno 98] error while attempting to bind
  // on address ('HOST', PORT): address already in use"): rank 0's API, or a worker's dummy health
  // server (./command.ts).
  BIND_FAILED,
  // A Kubernetes export's pod whose address is not its node's fabric address (../../contract/pod-start.ts):
  // its start ends before SGLang runs.
  NOT_FABRIC_ADDRESS_PATTERN,
];

/** Lines that only say another process failed before: never the root cause. */
export const WRAPPERS: readonly RegExp[] = [HIT_AN_EXCEPTION, SIGQUIT];

/**
 * Lines of a rank that only heard that another one died: torch.distributed's (../torch-peer-loss.ts:
 * TCPStore, c10d, NCCL, Gloo), and SGLang's own barrier after the weights load, which a rank whose
 * peer never finished loading (an OOM kill leaves no line) raises as "ValueError: TP rank N could
 * finish the model loading, but there are other ranks that didn't finish loading. It is likely due
 * to unexpected failures (e.g., OOM) or a slow node." (python/sglang/srt/model_executor/
 * model_runner.py load_model, dist.monitored_barrier over the TP group's CPU group).
 */
export const PEER_LOSS: readonly RegExp[] = [...TORCH_PEER_LOSS, /TP rank \d+ could finish the model loading, but there are other ranks that didn't finish/];

// python/sglang/srt/model_executor/model_runner.py init_torch_distributed: "Init torch
// distributed begin." on every rank, before torch's process group waits for all of them.
export const RENDEZVOUS: readonly RegExp[] = [/^Init torch distributed begin\./];

export const WARNINGS: readonly RegExp[] = [];

// python/sglang/srt/entrypoints/http_server.py _wait_and_warmup: after its warm-up request,
// "The server is fired up and ready to roll!".
export const READY = /The server is fired up and ready to roll!/;

export const BOOT_PHASES: readonly BootPhase[] = [
  // python/sglang/srt/entrypoints/engine.py _launch_subprocesses: logger.info(f"server_args={server_args.resolved_dict()}"),
  // a dict (sgl-project/sglang 001067ff); releases before it logged f"{server_args=}", the
  // dataclass's repr "server_args=ServerArgs(...)" (the same function in the v0.4 and v0.5 lines).
  { phase: "starting", pattern: /^server_args=(?:ServerArgs\(|\{)/ },
  // python/sglang/srt/model_executor/model_runner.py load_model: "Load weight begin. avail
  // mem=%.2f GB", then "Load weight end. [elapsed=%.2f s, ]type=%s, dtype=%s, avail mem=%.2f GB,
  // mem usage=%.2f GB." in releases; current main's has no dtype= and, for a quantized model,
  // the quantization config's words in its place ("elapsed=%.2f s, type=%s, [quant=..., ]avail
  // mem=...": quant_str = model_config.get_quantization_config_log_str()). GB there is 2**30 bytes (get_available_gpu_memory
  // divides by 1 << 30). The fields between type= and avail mem= hold no comma of their own but
  // the one ending them; at most a few.
  { phase: "loading", pattern: /^Load weight begin\./ },
  {
    phase: "loading",
    pattern: /^Load weight end\. (?:elapsed=([\d.]+) s, )?type=[^,]+, (?:[^,]{1,200}, ){0,4}?avail mem=[\d.]+ GB, mem usage=([\d.]+) GB/,
    figures: { load_seconds: 1, model_gib: 2 },
  },
  // python/sglang/srt/mem_cache/memory_pool.py: "KV Cache is allocated. [dtype: %s, ]#tokens: %d,
  // K size: %.2f GB, V size: %.2f GB".
  { phase: "kv-cache", pattern: /^KV Cache is allocated\. (?:dtype: [^,]+, )?#tokens: (\d+)/, figures: { kv_tokens: 1 } },
  // python/sglang/srt/model_executor/cuda_graph_runner.py: "Capture cuda graph begin. This can
  // take up to several minutes. avail mem=%.2f GB", then "Capture cuda graph end. Time elapsed:
  // %.2f s. ..." (v0.5.10 and before); nightlies since name the graph: "Capture target decode CUDA
  // graph begin. ...", "Capture target decode CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB,
  // avail mem=%.2f GB." (and "target prefill" for prefill graphs), as users' logs of them show.
  { phase: "graph-capture", pattern: /^Capture (?:cuda graph|target \w+ CUDA graph) begin\./ },
  { phase: "graph-capture", pattern: /^Capture (?:cuda graph end\. Time elapsed: |target decode CUDA graph end\. elapsed=)([\d.]+) s/, figures: { graph_seconds: 1 } },
  // Uvicorn listens: /health answers from here, 503 until the warm-up request is done
  // (http_server.py health_generate while the server is not yet warm), so it is worth polling.
  { phase: "warmup", pattern: /^Uvicorn running on /, sets: ["pastInit"] },
  { phase: "serving", pattern: READY, sets: ["pastInit"] },
];
