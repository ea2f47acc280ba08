import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { explainLog } from "../../src/boot/explain.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { cliArgs } from "../built-cli.js";

// `launcher explain` on a leader's log as `kubectl logs` prints it for a pod of `launcher export
// k8s`: the container's stdout and stderr as written (no docker timestamps), led by the export's
// start script line; with --timestamps, each line after an RFC 3339 time (kubectl logs --help:
// "Include timestamps on each line"); with --prefix, each after "[pod/NAME/CONTAINER] ".

const START = "launcher: fabric detected: LAUNCHER_FABRIC_IFACE=enp1s0f1np1 LAUNCHER_FABRIC_IP=192.168.177.11 LAUNCHER_FABRIC_HCAS=rocep1s0f1 LAUNCHER_FABRIC_GID=3 LAUNCHER_FABRIC_PORTS_UP=2";
const core = (time: string) => (l: string) => `(EngineCore_DP0 pid=123) ERROR 12-02 ${time} [core.py:708] ${l}`;
const LEADER = [
  START,
  "(APIServer pid=45) INFO 12-02 13:50:01 [utils.py:326] non-default args: {'model': 'deepseek-ai/DeepSeek-V4-Flash-Vision-Exp', 'nnodes': 2, 'node_rank': 0, 'master_addr': 'dsv4-flash-vision-0.dsv4-flash-vision.default'}",
  "(EngineCore_DP0 pid=123) INFO 12-02 13:50:05 [model.py:1] Using max model len 1048576",
  "(EngineCore_DP0 pid=123) INFO 12-02 13:55:13 [gpu_model_runner.py:2600] Model loading took 84.12 GiB memory and 312.45 seconds",
  "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [gpu_worker.py:1] Available KV cache memory: 8.04 GiB",
  ...[
    "EngineCore failed to start.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 716, in check_enough_kv_cache_memory',
    "    raise ValueError(",
    "ValueError: To serve at least one request with the models's max seq len (1048576), (96.00 GiB KV cache is needed, which is larger than the available KV cache memory (8.04 GiB). Based on the available memory, the estimated maximum model length is 87840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
  ].map(core("13:55:21")),
  "(APIServer pid=45) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}",
];

const explained = (text: string) => {
  const e = explainLog(vllm, text);
  return { failed: e.failed, phase: e.phase, cause: e.cause, hint: e.hint, figures: e.figures };
};
const EXPECTED = {
  failed: true,
  phase: "kv-cache",
  cause: LEADER.find((l) => l.includes("ValueError: To serve"))?.replace(/^.*\] /, ""),
};

test("explain reads a leader's log as kubectl logs prints it, the export's start line first", () => {
  const e = explained(`${LEADER.join("\n")}\n`);
  assert.deepEqual({ failed: e.failed, phase: e.phase, cause: e.cause }, EXPECTED);
  assert.match(e.hint ?? "", /--max-model-len 87840/);
  assert.deepEqual(e.figures, { model_gib: 84.12, load_seconds: 312.45, kv_gib: 8.04 });
});

test("explain reads kubectl logs --timestamps and --prefix alike", () => {
  const plain = explained(LEADER.join("\n"));
  const stamped = LEADER.map((l, i) => `2026-12-02T13:50:${String(i).padStart(2, "0")}.123456789Z ${l}`).join("\n");
  assert.deepEqual(explained(stamped), plain);
  const prefixed = LEADER.map((l) => `[pod/dsv4-flash-vision-0/engine] ${l}`).join("\n");
  assert.deepEqual(explained(prefixed), plain);
});

test("launcher explain - reads the kubectl logs output from stdin (exit 1: the boot failed)", () => {
  const r = spawnSync(process.execPath, [...cliArgs(), "explain", "-"], { input: LEADER.join("\n"), encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stdout, /kv-cache/);
  assert.match(r.stdout, /ValueError: To serve at least one request/);
});
