import { stripVTControlCharacters } from "node:util";
import type { BootPhase, LogLine } from "../adapter.js";
import { NOT_FABRIC_ADDRESS_PATTERN } from "../../contract/pod-start.js";
import { RPC_NOT_REACHED_PATTERN } from "./at-start.js";

/*
 * How llama.cpp's two programs write their logs, read in ggml-org/llama.cpp (master of 2026):
 * - llama-server (tools/server/server.cpp, common/log.cpp): plain lines, each a function name
 *   and the message ("main: loading model", or through SRV_INF "srv  %12.*s: ", which right-aligns
 *   the function in 12 columns: "srv    load_model: loading model '...'"); llama.cpp's own
 *   loader lines ("print_info: file size   = 4.58 GiB (4.89 BPW)", "llama_kv_cache: size = ...").
 *   --log-timestamps / --log-prefix put "0.00.123.456 I " before a line (common/log.cpp
 *   common_log_entry::print), which launcher never sets but reads.
 * - rpc-server (tools/rpc/rpc-server.cpp, ggml/src/ggml-rpc/ggml-rpc.cpp
 *   ggml_backend_rpc_start_server): "Starting RPC server vMAJOR.MINOR.PATCH", "  endpoint       :
 *   HOST:PORT", "  local cache    : ...", "Devices:", one line per device, then "  transport      :
 *   TCP" right before it binds its socket (socket_t::create_server) and accepts its client, all on
 *   stdout, flushed only after "Accepted client connection".
 * Every pattern meets untrusted container output: anchored, or starting with a literal, linear in
 * the line (test/unit/log-linear.test.ts).
 */

// common/log.cpp with --log-timestamps and --log-prefix: "%d.%02d.%03d.%03d " then the level's letter.
const LOG_PREFIX = /^(\d+\.\d\d\.\d\d\d\.\d\d\d) (?:[IWEDT] )?/;

/** A line as a terminal shows it (colours dropped, the last drawing of a "\r" line), and its message. */
export function readLlamacppLine(raw: string): LogLine {
  const parts = stripVTControlCharacters(raw).split("\r").filter((p) => p.trim() !== "");
  const text = parts[parts.length - 1] ?? "";
  const p = LOG_PREFIX.exec(text);
  const body = (p === null ? text : text.slice(p[0].length)).trim();
  return { text, body, ...(p?.[1] === undefined ? {} : { time: p[1] }) };
}

// The function before ": " is `main` in builds up to 2026, `srv  llama_server` after
// tools/server/server.cpp moved main's body into llama_server() (SRV_INF). The server's lines are
// not anchored: each starts with a literal, and one a wrapper prefixed (a `tee`, a log shipper)
// still reads.
const SERVER_FN = String.raw`(?:main|srv +\w+)`;

/** server.cpp: "server is listening on http://HOST:PORT" (a router's line starts "router server"). */
export const READY = new RegExp(`${SERVER_FN}: server is listening on http`);

export const BOOT_PHASES: readonly BootPhase[] = [
  // server.cpp: `SRV_INF("%s", "loading model\n")` once the HTTP server listens (and answers
  // /health with 503 "Loading model", server-http.cpp, until is_ready).
  { phase: "loading", pattern: new RegExp(`${SERVER_FN}: loading model`) },
  // src/llama-model.cpp print_info: "file size   = %.2f GiB (%.2f BPW)".
  { phase: "loading", pattern: /print_info: file size += ([\d.]+) GiB/, figures: { model_gib: 1 } },
  // src/llama-kv-cache.cpp: "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): ..."
  // (llama_kv_cache_unified before the class was renamed).
  { phase: "kv-cache", pattern: /llama_kv_cache(?:_unified)?: +size = +[\d.]+ MiB \( *(\d+) cells/, figures: { kv_tokens: 1 } },
  // common/common.cpp common_init_from_params: "warming up the model with an empty run - please wait ...".
  { phase: "warmup", pattern: /common_init_from_params: warming up the model/ },
  // server.cpp: "model loaded" once is_ready is set: /health answers 200 from now on.
  { phase: "warmup", pattern: new RegExp(`${SERVER_FN}: model loaded`), sets: ["pastInit"] },
  { phase: "serving", pattern: READY },
  // A worker: rpc-server's banner, then its transport line (before it binds; older builds print
  // none). Both go to stdout, which on a pipe (a detached container) is fully buffered until the
  // fflush after "Accepted client connection" (ggml-rpc.cpp ggml_backend_rpc_start_server): they
  // arrive once the head connects, so whether a worker listens is asked of its port, never of
  // its log (EngineAdapter.headAwaitsWorkersPort).
  { phase: "loading", pattern: /^Starting RPC server v(\d+\.\d+\.\d+)/, figures: { rpc_protocol: 1 }, sets: ["headless"] },
  { phase: "serving", pattern: /^transport +: / },
];


// A line that may be a boot's root cause: the loader's and the allocator's own errors, argument
// errors, a GGML_ABORT ("%s:%d: %s", ggml/src/ggml.c ggml_abort: file, line, message).
export const EXCEPTION = new RegExp(
  [
    String.raw`^gguf_init_from_file\w*: failed to `,
    String.raw`^llama_model_load: error loading model: `,
    String.raw`^ggml_backend_cuda_buffer_type_alloc_buffer: allocating `,
    String.raw`^llama_init_from_model: failed to `,
    String.raw`^error: invalid argument: `,
    String.raw`^error while handling argument `,
    String.raw`^error: unknown argument: `,
    String.raw`^CUDA error: `,
    String.raw`^\S+:\d+: (?:Failed to connect to |RPC handshake failed|Remote RPC server crashed|GGML_ASSERT)`,
    String.raw`^RPC server version mismatch`,
    String.raw`^Failed to create server socket`,
    String.raw`^Failed to create backend for device`,
    String.raw`^No devices found`,
    String.raw`^terminate called after throwing`,
  ].join("|"),
);

/** Lines that end a boot: the server gives up, or a program aborts. */
export const FATAL: readonly RegExp[] = [
  new RegExp(`^${SERVER_FN}: exiting due to`),
  /^srv +\w+: couldn't bind HTTP server socket/,
  /^main: couldn't bind HTTP server socket/,
  /^error: invalid argument: /,
  /^error: unknown argument: /,
  /^\S+:\d+: (?:Failed to connect to |RPC handshake failed|Remote RPC server crashed|GGML_ASSERT)/,
  /^Failed to create server socket/,
  /^No devices found/,
  /^Invalid parameters/,
  /^CUDA error: /,
  // A Kubernetes export's own lines (./at-start.ts): a worker that never accepted, a pod whose
  // address is not its node's fabric address.
  RPC_NOT_REACHED_PATTERN,
  NOT_FABRIC_ADDRESS_PATTERN,
];

/** Lines that only repeat that the model load failed, after the loader said why. */
export const WRAPPERS: readonly RegExp[] = [/^llama_model_load_from_file_impl: failed to load model/, /^common_init_from_params: failed to /, /^srv +load_model: failed to load model/];

/**
 * A worker's rpc-server went away under the head (ggml-rpc.cpp RPC_STATUS_ASSERT: "Remote RPC
 * server crashed or returned malformed response"), or was not there (rpc_dispatcher::start:
 * "Failed to connect to HOST:PORT"): the head failed because a worker did.
 */
export const PEER_LOSS: readonly RegExp[] = [/Remote RPC server crashed/, /Failed to connect to \S+/];

/** The worker's address a lost peer's cause names ("Failed to connect to 10.0.0.2:50052"). */
export function llamacppPeerAddress(cause: string): string | undefined {
  const m = /Failed to connect to ([\d.]+):\d+/.exec(cause);
  return m?.[1];
}

/** The address a worker's own banner gives ("  endpoint       : 10.0.0.2:50052"). */
export function llamacppNodeAddress(text: string): string | undefined {
  return /^ *endpoint +: ([\d.]+):\d+$/.exec(text)?.[1];
}

// rpc-server.cpp warns for any host but 127.0.0.1 ("Never expose the RPC server to an open
// network!"): launcher binds the fabric address on purpose, so that warning explains nothing.
export const WARNINGS: readonly RegExp[] = [/^llama_params_fit_impl: cannot fulfill margin/, /^srv +load_model: the slot context \(\d+\) exceeds the training context/];
