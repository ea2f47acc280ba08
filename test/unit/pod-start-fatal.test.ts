import assert from "node:assert/strict";
import { test } from "node:test";
import { explainLog } from "../../src/boot/explain.js";
import type { EngineAdapter } from "../../src/engine/adapter.js";
import { sglang } from "../../src/engine/sglang/adapter.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { NOT_FABRIC_ADDRESS, NOT_FABRIC_ADDRESS_TAIL } from "../../src/contract/pod-start.js";

// A Kubernetes export's pod start (src/export/fabric-start.ts) ends before the engine runs when the
// pod's address is not its node's fabric address: `launcher explain` on its `kubectl logs` names
// that line as the cause, whichever engine the pod was to run.

const line = `${NOT_FABRIC_ADDRESS} 192.168.1.21 ${NOT_FABRIC_ADDRESS_TAIL} (10.10.1.1 10.10.0.1): --node-ip-is-fabric needs each node's Kubernetes address to be one of its fabric addresses (k3s or MicroK8s --node-ip set to it); the engine is not started`;

const cases: [string, EngineAdapter][] = [
  ["vLLM", vllm],
  ["SGLang", sglang],
];

for (const [name, engine] of cases) {
  test(`${name}: explain of a pod log whose start found no fabric address names that line as the cause`, () => {
    const e = explainLog(engine, ["+ fabric check", line].join("\n"));
    assert.equal(e.failed, true);
    assert.equal(e.cause, line);
  });
}
