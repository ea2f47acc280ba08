/**
 * Each registered engine's boot-log reader at volume (issue 25): any lines a container prints give
 * a boot state within its bounds, never an exception. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { BOOT_PHASES } from "../../src/contract/deployment.js";
import { advanceBoot, INITIAL_BOOT, readBoot, splitTimestamp, timeMs } from "../../src/engine/boot-log.js";
import { ENGINES } from "../../src/engine/registry.js";
import { holds, reportInputsTried } from "./property.js";

const PREFIXES = ["", "(Worker_TP0 pid=7) ", "(EngineCore_DP0 pid=1) ", "(Worker (TP1)) ", "(RayWorkerWrapper pid=1, ip=10.0.0.2) ", "(APIServer pid=2)", "(x", "() ", "\x1b[0;36m(Worker_TP1 pid=8)\x1b[0;0m "];
const HEADERS = ["", "INFO 05-19 12:34:56 [core.py:283] ", "ERROR 05-19 12:34:56 [multiproc_executor.py:870] ", "WARNING 05-19 12:34:56.123 [x.py:1] ", "DEBUG 13-99 99:99:99 core.py:1] ", "\x1b[31mERROR\x1b[0m \x1b[90m05-19 12:34:56\x1b[0m [a.py:1] ",
  // SGLang's (src/engine/sglang/log-shapes.ts): a scheduler rank's, and uvicorn's through the HTTP process.
  "[2026-05-19 12:34:56 TP0] ", "[2026-05-19 12:34:56] INFO:     ",
  // llama.cpp's with --log-timestamps --log-prefix (common/log.cpp).
  "0.01.002.003 I "];
const BODIES = [
  "non-default args: {}",
  "Launching vLLM (v0.11.1) headless multiproc executor, with head node address 10.0.0.1:29501",
  "Resolved architecture: Qwen3ForCausalLM",
  "Model loading took 75.17 GiB memory and 170.412345 seconds",
  "Model loading took -1 GiB and . seconds",
  "Available KV cache memory: -2.51 GiB",
  "GPU KV cache size: 283,398 tokens",
  "GPU KV cache size: ,,, tokens",
  "Maximum concurrency for 262,144 tokens per request: 1.08x",
  "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  42%|####",
  "Graph capturing finished in 3 secs, took 0.34 GiB",
  "init engine (profile, create kv cache, warmup model) took 200.69 s (compilation: 1.48 s)",
  "Starting vLLM server on http://0.0.0.0:8000",
  "Application startup complete.",
  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
  "RuntimeError: Worker failed with error 'x', please check the stack trace above for the root cause",
  "WorkerProc initialization failed due to an exception in a background process",
  "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
  "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
  "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
  "Failed to load plugin dspark_vision",
  "Traceback (most recent call last):",
  "ValueError: bad value",
  "AssertionError",
  "Error",
  "NCCL error: unhandled system error",
  "ibv_modify_qp failed",
  "   ",
  "Load weight begin. avail mem=119.20 GB",
  "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=58.09 GB, mem usage=61.04 GB.",
  "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB",
  "Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.",
  "Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
  "Scheduler hit an exception: Traceback (most recent call last):",
  "The server is fired up and ready to roll!",
  // llama.cpp's (src/engine/llamacpp/log-shapes.ts): llama-server's and rpc-server's, which have no header.
  "main: loading model",
  "print_info: file size   = 4.58 GiB (4.89 BPW)",
  "llama_kv_cache: size =  576.00 MiB (  4096 cells,  36 layers,  1/1 seqs), K (f16):  288.00 MiB, V (f16):  288.00 MiB",
  "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
  "main: model loaded",
  "srv  llama_server: server is listening on http://0.0.0.0:8080",
  "gguf_init_from_file: failed to open GGUF file '/models/m.gguf' (No such file or directory)",
  "main: exiting due to model loading error",
  "/app/ggml/src/ggml-rpc/ggml-rpc.cpp:612: Failed to connect to 10.0.0.2:50052",
  "Starting RPC server v3.0.0",
  "  transport      : TCP",
];

const line = fc
  .tuple(
    fc.constantFrom("", "2026-05-19T12:34:56.123456789Z ", "2026-05-19T12:34:56Z ", "0001-01-01T00:00:00Z "),
    fc.constantFrom(...PREFIXES),
    fc.constantFrom(...HEADERS),
    fc.oneof(fc.constantFrom(...BODIES), fc.string({ maxLength: 80 }), fc.string({ unit: "binary", maxLength: 40 })),
    fc.constantFrom("", "\r", "\r\n", "\x1b[K", "\rprogress 50%", "\0"),
  )
  .map(([time, prefix, header, body, end]) => `${time}${prefix}${header}${body}${end}`);

for (const [name, adapter] of Object.entries(ENGINES)) {
  test(`${name}: any boot log gives a bounded boot state, never an exception`, () => {
    const phases = new Set<string>();
    let causes = 0;
    holds(`boot log: ${name} readBoot`, fc.array(line, { maxLength: 60 }), (lines) => {
      const s = readBoot(adapter, lines);
      assert.ok((BOOT_PHASES as readonly string[]).includes(s.phase), `phase ${s.phase}`);
      assert.equal(typeof s.ready, "boolean");
      assert.ok(s.lastLines.length <= 40 && s.lastLines.length <= lines.length);
      assert.ok((s.warnings?.length ?? 0) <= 5);
      assert.ok((s.causeLines?.length ?? 0) <= 12);
      for (const v of Object.values(s.figures)) assert.equal(typeof v, "string");
      if (s.causeIsPeerLoss === true) assert.ok(s.cause !== undefined);
      // One line at a time reads the same as the whole log.
      const stepwise = lines.reduce((st, l) => advanceBoot(adapter, st, splitTimestamp(l).text), INITIAL_BOOT);
      assert.deepEqual(stepwise, s);
      phases.add(s.phase);
      if (s.cause !== undefined) causes++;
    });
    // The lines reached the reader's shapes, not only its fall-through.
    assert.ok(phases.size >= 3 && causes > 0, `phases ${[...phases].join(", ")}; ${causes} causes`);
  });

  test(`${name}: any one line reads as a line`, () => {
    holds(`boot log: ${name} readLine`, fc.oneof(line, fc.string({ unit: "binary", maxLength: 200 })), (raw) => {
      const l = adapter.readLine(raw);
      assert.equal(typeof l.text, "string");
      assert.equal(typeof l.body, "string");
    }, 3);
  });
}

test("a docker timestamp reads as a time or as none", () => {
  holds("boot log: timeMs", fc.oneof(fc.string({ maxLength: 40 }), fc.date({ noInvalidDate: true }).map((d) => d.toISOString())), (t) => {
    const ms = timeMs(t);
    assert.ok(ms === undefined || Number.isFinite(ms), `${t} -> ${ms}`);
  }, 2);
});

reportInputsTried();
