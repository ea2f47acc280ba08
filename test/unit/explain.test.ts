import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { explainLog, failureHint, formatExplanation } from "../../src/boot/explain.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { cliArgs } from "../built-cli.js";

const run = (args: string[], input?: string) => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
    ...(input === undefined ? {} : { input }),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const dir = mkdtempSync(path.join(tmpdir(), "launcher-explain-"));
after(() => rmSync(dir, { recursive: true, force: true }));

// vLLM's formatter puts the whole header on every line of a logger.exception traceback
// (vllm/logger.py, NewLineFormatter): the worker's exception reaches the log only this way.
const header = (proc: string, level: string, time: string, src: string) => (l: string) => `(${proc}) ${level} 12-02 ${time} [${src}] ${l}`;
const core = header("EngineCore_DP0 pid=123", "ERROR", "13:55:21", "core.py:708");
const api = "(APIServer pid=45)";
const BOOT_START: [string, string, string] = [
  `${api} INFO 12-02 13:50:01 [utils.py:326] non-default args: {'model': 'm'}`,
  "(EngineCore_DP0 pid=123) INFO 12-02 13:50:05 [model.py:1] Using max model len 262144",
  "(EngineCore_DP0 pid=123) INFO 12-02 13:55:13 [gpu_model_runner.py:2600] Model loading took 84.12 GiB memory and 312.45 seconds",
];
// vllm/entrypoints/cli/serve.py -> vllm/v1/engine/utils.py (wait_for_engine_startup): the API server's wrapper.
const WRAPPER = `${api} RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}`;

// vllm/v1/core/kv_cache_utils.py, _check_enough_kv_cache_memory (raised in the engine core, logged through logger.exception).
const KV_TOO_SMALL = [
  ...BOOT_START,
  "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [gpu_worker.py:1] Available KV cache memory: 8.04 GiB",
  ...[
    "EngineCore failed to start.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 716, in check_enough_kv_cache_memory',
    "    raise ValueError(",
    "ValueError: To serve at least one request with the models's max seq len (262144), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (8.04 GiB). Based on the available memory, the estimated maximum model length is 87840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
  ].map(core),
  WRAPPER,
];

test("KV cache too small: failed in kv-cache, the ValueError is the cause, the hint gives vLLM's estimated max model length", () => {
  const e = explainLog(vllm, KV_TOO_SMALL.join("\n"));
  assert.equal(e.failed, true);
  assert.equal(e.ready, false);
  assert.equal(e.phase, "kv-cache");
  assert.match(e.cause ?? "", /ValueError: To serve at least one request/);
  assert.match(e.hint ?? "", /set --max-model-len 87840 \(or less\)/);
  assert.deepEqual(e.figures, { model_gib: 84.12, load_seconds: 312.45, kv_gib: 8.04 });
  // The traceback's frames come with the cause.
  assert.ok(e.context.some((l) => l.includes("check_enough_kv_cache_memory")), e.context.join("\n"));
  assert.ok(e.context.includes(WRAPPER));
  // Times from vLLM's own header when docker's are absent: starting 13:50:01 -> loading 13:50:05.
  assert.deepEqual(
    e.phases.map((p) => [p.phase, p.at, p.seconds]),
    [
      ["starting", "12-02 13:50:01", 4],
      ["loading", "12-02 13:50:05", 315],
      ["kv-cache", "12-02 13:55:20", 1],
    ],
  );
});

test("the same hint words in up's failure message and in explain", () => {
  const e = explainLog(vllm, KV_TOO_SMALL.join("\n"));
  assert.equal(failureHint(vllm, e.cause ?? undefined, KV_TOO_SMALL.slice(-8)), e.hint);
});

test("Free memory on device: the highest --gpu-memory-utilization that fits, from the figures vLLM prints", () => {
  // vllm/v1/worker/utils.py, request_memory.
  const line =
    "(EngineCore_DP0 pid=9) ERROR 12-02 13:50:09 [core.py:708] ValueError: Free memory on device cuda:0 (15.32/22.04 GiB) on startup is less than desired GPU memory utilization (0.88, 19.39 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.";
  const e = explainLog(vllm, [BOOT_START[0], line, WRAPPER].join("\n"));
  assert.equal(e.failed, true);
  assert.match(e.hint ?? "", /only 15\.32 of 22\.04 GiB was free .* --gpu-memory-utilization 0\.88 asks for 19\.39 GiB: lower it to at most 0\.69/);
  // Older builds leave the device out.
  assert.match(failureHint(vllm, "ValueError: Free memory on device (6.92/8.0 GiB) on startup is less than desired GPU memory utilization (0.9, 7.2 GiB).", []) ?? "", /at most 0\.86/);
});

test("no memory for the cache blocks: how far short, from the negative available KV cache memory vLLM printed", () => {
  // vllm/v1/worker/gpu_worker.py (determine_available_memory), then vllm/v1/core/kv_cache_utils.py.
  const log = [
    ...BOOT_START,
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [gpu_worker.py:298] Available KV cache memory: -3.52 GiB",
    core("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."),
    WRAPPER,
  ];
  const e = explainLog(vllm, log.join("\n"));
  assert.equal(e.failed, true);
  assert.match(e.hint ?? "", /take the whole --gpu-memory-utilization budget and 3\.52 GiB more; raise --gpu-memory-utilization/);
});

test("CUDA out of memory: how far short, and by how much to lower --gpu-memory-utilization", () => {
  // torch, c10/cuda/CUDACachingAllocator.cpp (format_size gives GiB / MiB).
  const h = failureHint(vllm, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 118.1 GiB memory in use.", []);
  assert.match(h ?? "", /0\.98 GiB short\): lower --gpu-memory-utilization by at least 0\.01/);
  const mib = failureHint(vllm, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 266.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 17.88 MiB is free.", []);
  assert.match(mib ?? "", /\(0\.24 GiB short\)/);
  // The CUDA runtime's own OOM (no figures), common on unified memory, is fatal and gets its hint.
  const e = explainLog(vllm, [BOOT_START[0], core("RuntimeError: CUDA error: out of memory")].join("\n"));
  assert.equal(e.failed, true);
  assert.equal(e.cause, "RuntimeError: CUDA error: out of memory");
  assert.match(e.hint ?? "", /a CUDA call ran out of memory; on unified memory/);
});

test("--max-model-len longer than the model: the pydantic error's own line gives the model's limit", () => {
  // vllm/config/model.py, _get_and_verify_max_len, raised while the API server validates its config.
  const log = [
    BOOT_START[0],
    `${api} pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig`,
    `${api}   Value error, User-specified max_model_len (65536) is greater than the derived max_model_len (max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs]`,
  ].join("\n");
  const e = explainLog(vllm, log);
  assert.equal(e.failed, true);
  // The cause is the message under the exception line (the class in front), not the exception line.
  assert.match(e.cause ?? "", /^ModelConfig: User-specified max_model_len \(65536\) is greater than the derived max_model_len/);
  assert.match(e.hint ?? "", /--max-model-len 65536 is longer than the model supports \(max_position_embeddings=32768 in its config\.json\): lower --max-model-len to 32768/);
});

test("NCCL: the ibv_modify_qp warning before the generic NCCL error names the GID index and launcher doctor", () => {
  // NCCL src/misc/ibvwrap.cc (the warning), vllm/distributed/device_communicators/pynccl_wrapper.py (NCCL_CHECK).
  const worker = header("Worker_TP0 pid=77", "ERROR", "13:51:00", "multiproc_executor.py:671");
  const log = [
    BOOT_START[0],
    "spark2:77:90 [0] misc/ibvwrap.cc:263 NCCL WARN Call to ibv_modify_qp failed with 61 No data available, on dev rocep1s0f1:1, curr state INIT, next state RTR, local GID index 5, local GID ::, remote GID ::ffff:10.10.12.11",
    ...["WorkerProc failed to start.", "Traceback (most recent call last):", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"].map(worker),
  ].join("\n");
  const e = explainLog(vllm, log);
  assert.equal(e.failed, true);
  assert.match(e.cause ?? "", /ibv_modify_qp|RuntimeError: NCCL error: unhandled system error/);
  assert.match(e.hint ?? "", /RoCE GID index \(NCCL_IB_GID_INDEX\) is wrong on one node; run `launcher doctor`/);
  assert.match(failureHint(vllm, "RuntimeError: NCCL error: remote process exited or there was a network error", []) ?? "", /run `launcher doctor` to check every node's fabric/);
});

test("undefined symbol: an extension built for another torch or architecture", () => {
  const h = failureHint(vllm, "(EngineCore_DP0 pid=1) ImportError: /usr/local/lib/python3.12/dist-packages/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", []);
  assert.match(h ?? "", /_C\.abi3\.so was compiled against another torch \(or for another GPU architecture\).*undefined symbol _ZN3c104cuda9SetDeviceEi/);
});

test("a plugin that failed to load is named next to the failure it likely explains", () => {
  // vllm/plugins/__init__.py, load_plugins_by_group: logger.exception("Failed to load plugin %s", name).
  const plug = header("APIServer pid=45", "ERROR", "13:50:02", "__init__.py:58");
  const log = [
    BOOT_START[0],
    ...["Failed to load plugin vision_plugin", "Traceback (most recent call last):", "ModuleNotFoundError: No module named 'vision_plugin'"].map(plug),
    `${api} ValueError: Model architectures ['VisionForCausalLM'] are not supported for now.`,
  ].join("\n");
  const e = explainLog(vllm, log);
  assert.equal(e.failed, true);
  // The parser keeps the plugin as a warning with its exception (src/engine/vllm/log-shapes.ts WARNINGS).
  assert.match(e.cause ?? "", /Model architectures \['VisionForCausalLM'\] are not supported/);
  assert.match(e.hint ?? "", /Failed to load plugin vision_plugin \(ModuleNotFoundError: No module named 'vision_plugin'\) \(this likely explains the failure\)/);
});

test("launcher logs output: the headless worker that failed first is named, not the head's wrapper", () => {
  const w = (l: string) => `[spark2] ${l}`;
  const h = (l: string) => `[spark1] ${l}`;
  const log = [
    h(BOOT_START[0]),
    w("(APIServer pid=7) INFO 12-02 13:50:02 [core.py:1] Launching a headless multiproc executor"),
    ...[
      "WorkerProc failed to start.",
      "Traceback (most recent call last):",
      '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 161, in init_device',
      "ImportError: /usr/local/lib/python3.12/dist-packages/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    ]
      // The worker's logger.exception: the header on every line (vllm/v1/executor/multiproc_executor.py).
      .map(header("Worker_TP1 pid=8", "ERROR", "13:50:10", "multiproc_executor.py:671"))
      .map(w),
    h("(EngineCore_DP0 pid=123) ERROR 12-02 13:50:40 [core.py:708] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause."),
    h(WRAPPER),
  ].join("\n");
  const e = explainLog(vllm, log);
  assert.equal(e.node, "spark2");
  assert.match(e.cause ?? "", /^ImportError: .*undefined symbol/);
  assert.ok(e.context.some((l) => l.includes("in init_device")), e.context.join("\n"));
  assert.match(e.hint ?? "", /compiled against another torch/);
  assert.deepEqual(
    e.nodes.map((n) => n.node),
    ["spark1", "spark2"],
  );
  assert.match(formatExplanation(e).join("\n"), /the boot failed on spark2/);
});

test("an engine that died after it served: ready, and failed (exit 1)", () => {
  const e = explainLog(
    vllm,
    [
      BOOT_START[0],
      `${api} INFO 12-02 13:56:02 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000`,
      `${api} INFO:     Application startup complete.`,
      "(EngineCore_DP0 pid=123) ERROR 12-02 14:10:00 [core.py:795] EngineCore encountered a fatal error.",
      "(EngineCore_DP0 pid=123) RuntimeError: CUDA error: an illegal memory access was encountered",
      "(EngineCore_DP0 pid=123) Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
    ].join("\n"),
  );
  assert.equal(e.ready, true);
  assert.equal(e.failed, true);
  assert.match(e.cause ?? "", /illegal memory access/);
  assert.match(formatExplanation(e).join("\n"), /the engine reached serving, then failed/);
});

test("a tqdm bar redrawn with \\r never reaches the lines shown around the cause", () => {
  // vLLM's capture bar (gpu_model_runner.py, capture_model) goes to stderr through tqdm, redrawn with "\r".
  const bar = ["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  45%|████▌     | 30/67"].join("\r");
  const e = explainLog(vllm, [BOOT_START[0], `${bar}\r`, "(EngineCore_DP0 pid=123) RuntimeError: CUDA error: out of memory", WRAPPER].join("\n"));
  assert.ok(e.context.length > 0);
  assert.ok(e.context.every((l) => !l.includes("\r")), e.context.join("\n"));
});

test("a raw log whose lines start with a bracket is not read as launcher logs output", () => {
  const e = explainLog(vllm, [BOOT_START[0], "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"].join("\n"));
  assert.equal(e.node, undefined);
  assert.equal(e.nodes.length, 1);
});

test("a boot that serves: not failed, ready, every phase with its figures; docker's times win", () => {
  const log = [
    ...BOOT_START,
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [kv_cache_utils.py:1087] GPU KV cache size: 1,250,000 tokens",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [kv_cache_utils.py:1091] Maximum concurrency for 262,144 tokens per request: 4.77x",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:56:00 [gpu_model_runner.py:3000] Graph capturing finished in 40 secs, took 0.50 GiB",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:56:01 [core.py:250] init engine (profile, create kv cache, warmup model) took 41.20 seconds",
    // --uvicorn-log-level warning hides "Application startup complete": the server's start line says enough.
    `${api} INFO 12-02 13:56:02 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000`,
  ].map((l, i) => `2026-12-02T13:5${i}:00.000000000Z ${l}`);
  const e = explainLog(vllm, log.join("\n"));
  assert.equal(e.failed, false);
  assert.equal(e.ready, true);
  assert.equal(e.hint, null);
  assert.equal(e.phases[0]?.at, "2026-12-02T13:50:00.000000000Z");
  assert.deepEqual(e.figures, { model_gib: 84.12, load_seconds: 312.45, kv_tokens: 1250000, max_concurrency: 4.77, graph_seconds: 40, init_seconds: 41.2 });
});

test("CLI: --json prints exactly the issue's object, exit 1 on a failed boot; a serving log exits 0; - reads stdin", () => {
  const file = path.join(dir, "kv.log");
  writeFileSync(file, `${KV_TOO_SMALL.join("\n")}\n`);
  const r = run(["explain", file, "--json"]);
  assert.equal(r.code, 1, r.stderr);
  const j = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.deepEqual(Object.keys(j), ["engine", "phase", "ready", "failed", "fatal", "cause", "hint", "figures", "phases", "warnings"]);
  assert.equal(j.engine, "vllm");
  assert.equal(j.failed, true);
  assert.deepEqual(j.figures, { model_gib: 84.12, load_seconds: 312.45, kv_gib: 8.04 });
  const text = run(["explain", "-"], KV_TOO_SMALL.join("\n"));
  assert.equal(text.code, 1);
  assert.match(text.stdout, /^cause: .*ValueError: To serve at least one request/m);
  assert.match(text.stdout, /^hint: KV cache too small/m);
  const ok = run(["explain", "-"], `${BOOT_START[0]}\n${api} INFO 12-02 13:56:02 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000\n`);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /the boot reached serving/);
  const bad = run(["explain", path.join(dir, "nope.log")]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /launcher: log .*nope\.log not found/);
  const engine = run(["explain", file, "--engine", "nosuch"]);
  assert.equal(engine.code, 1);
  assert.match(engine.stderr, /--engine nosuch is not an engine launcher knows\n {2}hint: engines: vllm, sglang/);
});

test("two nodes' logs in any order: the node with a cause of its own is explained, not the one that only lost its peer", () => {
  // launcher logs --follow of both nodes: the head's "died unexpectedly" (vllm/v1/executor/
  // multiproc_executor.py monitor_workers) may reach the file before the worker's own exception,
  // and vLLM's header times are whole seconds.
  const worker = header("Worker pid=77", "ERROR", "13:55:21", "gpu_worker.py:240");
  const lines = [
    `[n1] ${BOOT_START[0]}`,
    `[n2] ${worker("WorkerProc failed to start.")}`,
    `[n1] (EngineCore_DP0 pid=123) ERROR 12-02 13:55:21 [multiproc_executor.py:150] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.`,
    ...[
      "Traceback (most recent call last):",
      '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 240, in init_device',
      "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    ].map((l) => `[n2] ${worker(l)}`),
  ];
  for (const order of [lines, [lines[0] as string, ...lines.slice(2), lines[1] as string]]) {
    const e = explainLog(vllm, order.join("\n"));
    assert.equal(e.node, "n2", order.join("\n"));
    assert.match(e.cause ?? "", /ImportError: .*undefined symbol/);
  }
  // A headless worker that lost its head (torch's c10d warning) before the head's own error reached the file.
  const head = header("EngineCore_DP0 pid=123", "ERROR", "13:55:22", "core.py:795");
  const crash = [
    `[n1] ${BOOT_START[0]}`,
    "[n2] [rank1]:[W1202 13:55:21.905768298 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=99, addr=[::ffff:10.0.0.2]:38760, remote=[::ffff:10.0.0.1]:29501): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
    `[n1] ${head("EngineCore encountered a fatal error.")}`,
    `[n1] ${head("RuntimeError: CUDA error: an illegal memory access was encountered")}`,
  ];
  const crashed = explainLog(vllm, crash.join("\n"));
  assert.equal(crashed.node, "n1", crash.join("\n"));
  assert.match(crashed.cause ?? "", /CUDA error: an illegal memory access/);
  // A node whose only failure is its lost peer is still explained when nothing else failed.
  const alone = explainLog(vllm, lines.slice(0, 1).concat(lines[2] as string).join("\n"));
  assert.equal(alone.node, "n1");
  assert.match(alone.cause ?? "", /died unexpectedly/);
});

test("Ray: a node whose death the head's log tells (ActorDiedError's ip) is the node explained, by the address its own `ray start` printed", () => {
  // ray python/ray/exceptions.py ActorDiedError, logged by the head's engine core; a Ray worker's own
  // container log stops at `ray start` (its engine lines print through the head).
  const head = header("EngineCore_DP0 pid=246", "ERROR", "13:55:22", "core.py:1");
  const lines = [
    "[n1] Local node IP: 10.0.0.1",
    "[n2] Local node IP: 10.0.0.2",
    "[n2] Ray runtime started.",
    `[n1] ${BOOT_START[0]}`,
    ...[
      "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
      "\tclass_name: RayWorkerProc",
      "\tip: 10.0.0.2",
      "The actor is dead because its node has died. Node Id: 7a6b5c",
    ].map((l) => `[n1] ${head(l)}`),
  ];
  const e = explainLog(vllm, lines.join("\n"));
  assert.equal(e.node, "n2");
  assert.equal(e.reportedBy, "n1");
  assert.equal(e.cause, "RayWorkerProc on 10.0.0.2: The actor is dead because its node has died. Node Id: 7a6b5c");
  assert.match(e.hint ?? "", /^Ray lost the node at 10\.0\.0\.2/);
  const text = formatExplanation(e);
  assert.ok(text.includes("phases of n1:"), text.join("\n"));
  assert.ok(text.some((l) => /^the boot failed on n2 \(n1's log says this node died\) in phase /.test(l)), text.join("\n"));
  // The head's own log alone names no node it can find: the head is explained, as before.
  const alone = explainLog(vllm, lines.filter((l) => l.startsWith("[n1]")).join("\n"));
  assert.equal(alone.node, "n1");
  assert.equal(alone.reportedBy, undefined);
  // A node named by its address (no `ray start` line read) is found by its name too.
  const byName = explainLog(vllm, lines.map((l) => l.replace("[n2]", "[10.0.0.2]")).filter((l) => !l.includes("Local node IP: 10.0.0.2")).join("\n"));
  assert.equal(byName.node, "10.0.0.2");
});
