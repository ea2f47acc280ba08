import assert from "node:assert/strict";
import { test } from "node:test";
import { timeoutBlame } from "../../src/boot/blame.js";
import { advanceBoot, INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";

// A boot that times out names the rank that never joined (issue 25: a Ray worker that never
// registered was reported as "n1 (rank 0) timed out ... the other ranks got further (n2 starting)").

const boot = (lines: readonly string[]): BootState => lines.reduce((s, l) => advanceBoot(vllm, s, l), INITIAL_BOOT);

// What `ray start` prints (ray-project/ray python/ray/scripts/scripts.py start(); the practice
// engine's stand-in docker-images/practice-engine/bin/ray prints the same).
const RAY_HEAD_UP = ["Local node IP: 10.232.0.11", "--------------------", "Ray runtime started.", "--------------------"];
const RAY_WORKER_NOT_JOINED = ["Local node IP: 10.232.0.12"];
const RAY_WORKER_JOINED = ["Local node IP: 10.232.0.13", "--------------------", "Ray runtime started.", "--------------------", "--block"];
// The mp backend, as the practice engine prints it (docker-images/practice-engine/serve, lib/rendezvous.js;
// not vLLM's words, see RENDEZVOUS in src/engine/vllm/log-shapes.ts).
const UP_TO_MAX_LEN = ["(APIServer pid=1) INFO non-default args: {}", "(APIServer pid=1) INFO Resolved architecture: PracticeForCausalLM", "(APIServer pid=1) INFO Using max model len 32768"];
const HEAD_WAITING = [...UP_TO_MAX_LEN, "(EngineCore_DP0 pid=1) INFO waiting for 1 headless worker(s) on 10.232.0.11:29501"];
const WORKER_CONNECTING = [...UP_TO_MAX_LEN, "(EngineCore_DP0 pid=1) INFO connecting to master at 10.232.0.11:29501 as rank 1 of 2"];
const WORKER_CONNECTED = [...WORKER_CONNECTING, "(EngineCore_DP0 pid=1) INFO connected to master at 10.232.0.11:29501, waiting for all workers"];

test("timeout blame: a Ray worker that never registered with the head is named, not the head waiting for it", () => {
  const t = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(RAY_HEAD_UP) },
    { node: "n2", rank: 1, state: boot(RAY_WORKER_NOT_JOINED) },
  ], 10);
  assert.equal(`${t?.blamed.node} ${t?.blamed.rank}`, "n2 1");
  assert.equal(t?.message, "never joined the other ranks: timed out after 10 s (phase starting) while n1 waited at the rendezvous");
});

test("timeout blame: of three Ray nodes the one that did not join is named, the one that joined is not", () => {
  const t = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(RAY_HEAD_UP) },
    { node: "n2", rank: 1, state: boot(RAY_WORKER_JOINED) },
    { node: "n3", rank: 2, state: boot(RAY_WORKER_NOT_JOINED) },
  ], 10);
  assert.equal(t?.blamed.node, "n3");
  assert.match(t?.message ?? "", /^never joined .* while n1, n2 waited at the rendezvous$/);
});

test("timeout blame: an mp worker that is still connecting never joined; one connected that waits is not blamed", () => {
  const notCome = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(HEAD_WAITING) },
    { node: "n2", rank: 1, state: boot(WORKER_CONNECTING) },
  ], 30);
  assert.equal(notCome?.blamed.node, "n2");
  assert.match(notCome?.message ?? "", /^never joined the other ranks: timed out after 30 s \(phase loading\) while n1 waited at the rendezvous$/);
  // Two workers missing: the one least far is named, the other said too.
  const two = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(HEAD_WAITING) },
    { node: "n2", rank: 1, state: boot(WORKER_CONNECTING) },
    { node: "n3", rank: 2, state: boot(UP_TO_MAX_LEN.slice(0, 1)) },
    { node: "n4", rank: 3, state: boot(WORKER_CONNECTED) },
  ], 30);
  assert.equal(two?.blamed.node, "n3");
  assert.match(two?.message ?? "", /while n1, n4 waited at the rendezvous; n2 never joined either$/);
});

test("timeout blame: with no rendezvous reached, only ranks that really got further are said to", () => {
  const tie = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(UP_TO_MAX_LEN) },
    { node: "n2", rank: 1, state: boot(UP_TO_MAX_LEN) },
  ], 12);
  assert.equal(tie?.blamed.node, "n1");
  assert.equal(tie?.message, "timed out after 12 s (phase loading); the other ranks got no further (n2 loading)");
  const behind = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot([...UP_TO_MAX_LEN, "INFO Available KV cache memory: 11.02 GiB"]) },
    { node: "n2", rank: 1, state: INITIAL_BOOT },
    { node: "n3", rank: 2, state: INITIAL_BOOT },
  ], 12);
  assert.equal(behind?.blamed.node, "n2");
  assert.equal(behind?.message, "timed out after 12 s (phase starting); the other ranks got further (n1 kv-cache); the rest got no further (n3 starting)");
  assert.equal(timeoutBlame(vllm, [], 12), undefined);
});

test("timeout blame: on Ray a worker that joined is not blamed for its log stopping at `ray start`; the slow head is", () => {
  // vLLM's worker-side lines go through the head (Ray actors log to the driver): the joined
  // worker's own log never gets past "starting" while the head loads the weights.
  const t = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot([...RAY_HEAD_UP, ...UP_TO_MAX_LEN]) },
    { node: "n2", rank: 1, state: boot(RAY_WORKER_JOINED) },
  ], 10);
  assert.equal(t?.blamed.node, "n1");
  assert.equal(t?.message, "timed out after 10 s (phase loading); the other ranks got no further (n2 joined at the rendezvous, its own log no further than starting)");
  // Three nodes, both workers joined: still the head.
  const three = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot([...RAY_HEAD_UP, ...UP_TO_MAX_LEN]) },
    { node: "n2", rank: 1, state: boot(RAY_WORKER_JOINED) },
    { node: "n3", rank: 2, state: boot(RAY_WORKER_JOINED) },
  ], 10);
  assert.equal(three?.blamed.node, "n1");
});

test("timeout blame: an mp worker ahead of the waiting head without a rendezvous line of its own did not fail to join", () => {
  const t = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot(HEAD_WAITING) },
    { node: "n2", rank: 1, state: boot([...UP_TO_MAX_LEN, "(Worker_TP0 pid=1) INFO Available KV cache memory: 11.02 GiB"]) },
  ], 30);
  assert.equal(t?.blamed.node, "n1");
  assert.equal(t?.message, "timed out after 30 s (phase loading); the other ranks got further (n2 kv-cache)");
});

// Real vLLM's mp backend across nodes: every worker process logs this just before torch's
// init_process_group waits for all ranks (vllm/distributed/parallel_state.py init_distributed_environment).
const VLLM_AT_RENDEZVOUS = (rank: number): string => `(Worker_TP0 pid=7) INFO 12-04 18:00:00 [parallel_state.py:1283] world_size=2 rank=${rank} local_rank=0 distributed_init_method=tcp://10.232.0.11:29501 backend=nccl`;

test("timeout blame: vLLM's own rendezvous line: a headless node that never got to it never joined; one that did is not blamed", () => {
  const headless = "(APIServer pid=1) INFO 12-04 18:00:00 [serve.py:216] Launching vLLM (v0.12.0) headless multiproc executor, with head node address 10.232.0.11:29501 for torch.distributed process group.";
  const missing = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot([...UP_TO_MAX_LEN, VLLM_AT_RENDEZVOUS(0)]) },
    { node: "n2", rank: 1, state: boot([headless, ...UP_TO_MAX_LEN]) },
  ], 30);
  assert.equal(missing?.blamed.node, "n2");
  assert.equal(missing?.message, "never joined the other ranks: timed out after 30 s (phase loading) while n1 waited at the rendezvous");
  const both = timeoutBlame(vllm, [
    { node: "n1", rank: 0, state: boot([...UP_TO_MAX_LEN, VLLM_AT_RENDEZVOUS(0)]) },
    { node: "n2", rank: 1, state: boot([headless, ...UP_TO_MAX_LEN, VLLM_AT_RENDEZVOUS(1)]) },
  ], 30);
  assert.equal(both?.blamed.node, "n1");
  assert.equal(both?.message, "timed out after 30 s (phase loading); the other ranks got no further (n2 loading at the rendezvous)");
});
