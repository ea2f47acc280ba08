import assert from "node:assert/strict";
import { test } from "node:test";
import { advanceBoot, INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { vllmHint } from "../../src/engine/vllm/hints.js";
import { refineVllmCause } from "../../src/engine/vllm/log-shapes.js";

// Failure lines in the form vLLM writes them today (/work/notes/vllm28-research.md section 2), and
// the older forms still read.
const feed = (lines: readonly string[], from: BootState = INITIAL_BOOT): BootState => lines.reduce((s, l) => advanceBoot(vllm, s, l), from);

const READY = [
  "(APIServer pid=1) INFO 12-01 23:00:00 [launcher.py:46] Starting vLLM server on http://0.0.0.0:8000",
  "(APIServer pid=1) INFO:     Application startup complete.",
];

test("a local worker killed (exit code -9, no traceback) is the node's own failure, with the OOM killer's hint", () => {
  // vllm/v1/executor/multiproc_executor.py start_worker_monitor, today's form.
  const killed = "(EngineCore_DP0 pid=246) ERROR 12-01 23:08:01 [multiproc_executor.py:275] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.";
  const s = feed([killed]);
  assert.match(s.fatal ?? "", /^Worker proc VllmWorker-0 died unexpectedly \(exit code: -9\)/);
  assert.equal(s.cause, s.fatal);
  assert.equal(s.causeIsPeerLoss, undefined);
  const hint = vllmHint(s.cause, s.lastLines) ?? "";
  assert.match(hint, /OOM killer/);
  assert.match(hint, /unified memory/);
  assert.match(hint, /--gpu-memory-utilization/);
  // Another signal: named, and no OOM claim.
  const segv = feed([killed.replace("-9", "-11")]);
  assert.equal(segv.causeIsPeerLoss, undefined);
  assert.match(vllmHint(segv.cause, segv.lastLines) ?? "", /exit code -11: signal 11/);
  assert.doesNotMatch(vllmHint(segv.cause, segv.lastLines) ?? "", /OOM killer/);
  // A worker that raised first (exit code 1): its own error's hint, not a kill's.
  const nccl = feed([
    "(Worker_TP0 pid=400) ERROR 12-01 23:08:00 [multiproc_executor.py:870] RuntimeError: NCCL error: remote process exited or there was a network error",
    killed.replace("-9", "1"),
  ]);
  assert.match(nccl.cause ?? "", /NCCL error/);
  assert.match(vllmHint(nccl.cause, nccl.lastLines) ?? "", /^NCCL failed between the nodes/);
  // `None` has been seen too.
  assert.match(feed([killed.replace("-9", "None")]).fatal ?? "", /exit code: None/);
  // The older form (no exit code) and the Ray executor's rank, which may be another node's, stay a lost peer.
  const old = feed(["(EngineCore_DP0 pid=1) ERROR 05-19 12:00:00 [multiproc_executor.py:154] Worker proc VllmWorker-1 died unexpectedly, shutting down executor."]);
  assert.equal(old.causeIsPeerLoss, true);
  const ray = feed(["(EngineCore_DP0 pid=1) ERROR 05-19 12:00:00 [ray_executor_v2.py:464] RayWorkerProc rank=[3] died unexpectedly, shutting down executor."]);
  assert.equal(ray.causeIsPeerLoss, true);
});

test("engine core death is a failure, also after the API came up; a cause before it stays the cause", () => {
  // vllm/v1/engine/core_client.py start_engine_core_monitor ("proc" in the source).
  const died = "(APIServer pid=1) ERROR 12-01 23:08:02 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.";
  const served = feed(READY);
  assert.equal(served.ready, true);
  const after = feed([died], served);
  assert.match(after.fatal ?? "", /^Engine core proc EngineCore_DP0 died unexpectedly/);
  assert.equal(after.cause, after.fatal);
  // It only says another process died first (and some shutdowns print it): a rank with a reason of its own is blamed first.
  assert.equal(after.causeIsPeerLoss, true);
  assert.match(vllmHint(after.cause, after.lastLines) ?? "", /engine core process \(EngineCore_DP0\) died/);
  assert.match(feed([died.replace("proc", "process")]).fatal ?? "", /Engine core process/);
  // The killed worker before it is the reason, and its hint wins.
  const both = feed([
    ...READY,
    "(EngineCore_DP0 pid=246) ERROR 12-01 23:08:01 [multiproc_executor.py:275] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
    died,
  ]);
  assert.match(both.cause ?? "", /^Worker proc VllmWorker-0/);
  assert.match(vllmHint(both.cause, both.lastLines) ?? "", /OOM killer/);
});

test("a pydantic ValidationError's cause is its Value error line, not the exception line", () => {
  // Raised in the API server building the config (issue text quoted in the research notes, 2.7).
  const s = feed([
    "(APIServer pid=1) Traceback (most recent call last):",
    "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig",
    "(APIServer pid=1)   Value error, num_redundant_experts should be used with EPLB.16. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
    "(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error",
  ]);
  assert.equal(s.cause, "ParallelConfig: num_redundant_experts should be used with EPLB.16.");
  assert.match(s.causeLines?.[s.causeLines.length - 1] ?? "", /Value error, num_redundant_experts/);
  // A field error: the field's line, then its message.
  const field = feed(["pydantic_core._pydantic_core.ValidationError: 1 validation error for EPLBConfig", "window_size", "  Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]"]);
  assert.equal(field.cause, "EPLBConfig.window_size: Input should be greater than 0");
  // Another process's lines in between do not count; a ValidationError with no message line stays as it is.
  const mixed = feed([
    "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 2 validation errors for ModelConfig",
    "(EngineCore_DP0 pid=2) INFO 12-01 23:00:00 [core.py:1] something else",
    "(APIServer pid=1)   Value error, bad [type=value_error, input_value=1, input_type=int]",
  ]);
  assert.equal(mixed.cause, "ModelConfig: bad");
  const bare = feed(["pydantic_core._pydantic_core.ValidationError: 1 validation error for X", "a", "b", "  Value error, late [type=value_error]"]);
  assert.equal(bare.cause, "pydantic_core._pydantic_core.ValidationError: 1 validation error for X");
  assert.equal(refineVllmCause("ValueError: x", ["Value error, y [type=value_error]"]), undefined);
});

test("the headless start order: a phase never goes back, the headless line still marks the node", () => {
  // vllm/entrypoints/cli/serve.py run_headless: create_engine_config (ModelConfig logs the
  // architecture) before "Launching vLLM (v%s) headless multiproc executor ...".
  const s = feed([
    "INFO 12-01 23:00:00 [model.py:680] Resolved architecture: Qwen3ForCausalLM",
    "INFO 12-01 23:00:01 [serve.py:230] Launching vLLM (v0.11.1) headless multiproc executor, with head node address 10.0.0.1:29501 for torch.distributed process group.",
  ]);
  assert.equal(s.phase, "loading");
  assert.equal(s.headless, true);
});

test("rendezvous: the rank's world_size line and the head's DP group leader line", () => {
  // vllm/distributed/parallel_state.py init_distributed_environment (INFO, just before init_process_group).
  const rank = feed(["(Worker pid=374) INFO 04-16 11:16:30 [parallel_state.py:1400] world_size=4 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:35187 backend=nccl"]);
  assert.equal(rank.atRendezvous, true);
  // vllm/v1/executor/multiproc_executor.py _init_executor, the head's engine core.
  const head = feed(["(EngineCore_DP0 pid=246) INFO 03-01 11:11:18 [multiproc_executor.py:134] DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1, mq_connect_ip=172.18.0.4 (local), world_size=2, local_world_size=2"]);
  assert.equal(head.atRendezvous, true);
  assert.equal(feed(["(EngineCore_DP0 pid=246) INFO 03-01 11:11:18 [core.py:1] the DP group leader: node_rank=0"]).atRendezvous, undefined);
});

test("the Rust frontend's ready line (its shape inferred from rust/src/cmd/src/logging.rs) is serving", () => {
  const s = feed(["(RustFrontend pid=42) INFO 12-04 23:10:00 [server/src/lib.rs:87] starting OpenAI server bind_address=0.0.0.0:8000 model=qwen3-32b"]);
  assert.equal(s.phase, "serving");
  assert.equal(s.pastInit, true);
  assert.equal(feed(["(RustFrontend pid=42) INFO 12-04 23:10:00 [server/src/lib.rs:87] not starting OpenAI server"]).pastInit, undefined);
});

test("a Ray ActorDiedError whose node died is a lost peer, named by the actor's class and node ip", () => {
  // ray python/ray/exceptions.py ActorDiedError, GCS's GenNodeDiedCause, logged by the head's engine core.
  const h = "(EngineCore_DP0 pid=246) ERROR 12-01 23:08:02 [core.py:1] ";
  const lines = [
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "\tclass_name: RayWorkerProc",
    "\tactor_id: 5b1f0c0e0a1e2d3c4b5a6978",
    "\tpid: 1234",
    "\tname: vllm_Worker_abc_TP1",
    "\tnamespace: 0f2e",
    "\tip: 10.0.0.2",
    "The actor is dead because its node has died. Node Id: 7a6b5c",
  ].map((l) => `${h}${l}`);
  const s = feed(lines);
  assert.equal(s.cause, "RayWorkerProc on 10.0.0.2: The actor is dead because its node has died. Node Id: 7a6b5c");
  assert.equal(s.causeIsPeerLoss, true);
  assert.match(s.fatal ?? "", /its node has died/);
  // Until the reason comes, and when the actor's own process died, it stays the node's own cause.
  assert.equal(feed(lines.slice(0, 7)).causeIsPeerLoss, undefined);
  const own = feed([...lines.slice(0, 7), `${h}The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR`]);
  assert.equal(own.cause, "RayWorkerProc on 10.0.0.2: The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR");
  assert.equal(own.causeIsPeerLoss, undefined);
});

test("a Ray node's death names the node's address; `ray start`'s own line says each node's address", () => {
  // ray python/ray/exceptions.py ActorDiedError (GCS's GenNodeDiedCause): the `ip:` of the actor's node.
  const h = "(EngineCore_DP0 pid=246) ERROR 12-01 23:08:02 [core.py:1] ";
  const s = feed([
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "\tclass_name: RayWorkerProc",
    "\tip: 10.0.0.2",
    "The actor is dead because its node has died. Node Id: 7a6b5c",
  ].map((l) => `${h}${l}`));
  assert.equal(s.peerAddress, "10.0.0.2");
  // A lost peer that names no address (torch's TCPStore, the engine core's monitor) names none.
  assert.equal(feed([`${h}Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.`]).peerAddress, undefined);
  // A cause of the node's own names no peer, whatever ip the actor had.
  const own = feed([`${h}ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.`, `${h}\tip: 10.0.0.2`, `${h}The actor is dead because its worker process has died.`]);
  assert.equal(own.peerAddress, undefined);
  // `ray start` prints "Local node IP: <ip>" before "Ray runtime started."; the first one said counts.
  assert.equal(feed(["Local node IP: 10.0.0.2", "--------------------", "Ray runtime started.", "Local node IP: 10.0.0.9"]).address, "10.0.0.2");
  assert.equal(feed(["(APIServer pid=1) INFO 12-01 23:00:00 [x.py:1] Local node IP: 10.0.0.3"]).address, undefined, "only Ray's own line, not a logged message");
});

test("NCCL's remote error in a collective is a lost peer, though it is an exception of the rank's own", () => {
  // nccl src/init.cc ncclGetErrorString(ncclRemoteError), in torch's ProcessGroupNCCL message: what a
  // head of today's mp executor (its monitor watches its own workers only) says when a headless node died.
  const h = "(Worker_TP0 pid=400) ERROR 12-01 23:08:02 [multiproc_executor.py:820] ";
  const s = feed([
    `${h}WorkerProc hit an exception.`,
    `${h}Traceback (most recent call last):`,
    `${h}torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, remote process exited or there was a network error, NCCL version 2.27.3`,
  ]);
  assert.match(s.cause ?? "", /^torch\.distributed\.DistBackendError: NCCL error in: .*remote process exited or there was a network error/);
  assert.equal(s.causeIsPeerLoss, true);
  // Another NCCL error (a node's own fabric) stays the node's own cause.
  const own = feed([`${h}RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)`]);
  assert.equal(own.causeIsPeerLoss, undefined);
});

test("VLLM_LOGGING_PREFIX before the level: the line still splits into process, header and message", () => {
  // vllm/logger.py _FORMAT = f"{VLLM_LOGGING_PREFIX}%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s".
  const line = vllm.readLine("(EngineCore_DP0 pid=246) [spark-a] INFO 12-01 23:08:02 [gpu_worker.py:298] Available KV cache memory: 41.5 GiB");
  assert.equal(line.proc, "EngineCore_DP0 pid=246");
  assert.equal(line.level, "INFO");
  assert.equal(line.time, "12-01 23:08:02");
  assert.equal(line.body, "Available KV cache memory: 41.5 GiB");
  const bare = vllm.readLine("myprefix:ERROR 12-01 23:08:02 [core.py:1] ValueError: bad");
  assert.equal(bare.body, "ValueError: bad");
  assert.equal(feed(["vllm|WARNING 12-01 23:08:02 [core.py:1] Failed to load plugin x"]).warnings?.[0], "Failed to load plugin x");
  // Bounded: a level word far into a line is message text, not a header.
  const far = `${"x".repeat(80)} INFO 12-01 23:08:02 [a.py:1] y`;
  assert.equal(vllm.readLine(far).level, undefined);
});

test("the Ray node death's hint names the node's address", () => {
  const hint = vllmHint("RayWorkerProc on 10.0.0.2: The actor is dead because its node has died. Node Id: 7a6b5c", ["(EngineCore_DP0 pid=1) ERROR 12-01 23:08:03 [x.py:1] RuntimeError: NCCL error: remote process exited or there was a network error"]);
  assert.match(hint ?? "", /^Ray lost the node at 10\.0\.0\.2 \(its RayWorkerProc actor died with it\)/);
});
