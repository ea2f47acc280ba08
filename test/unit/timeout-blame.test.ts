import assert from "node:assert/strict";
import { test } from "node:test";
import { timeoutBlame } from "../../src/deploy/blame.js";
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
// The mp backend, as the practice engine prints it (docker-images/practice-engine/serve, lib/rendezvous.js).
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
