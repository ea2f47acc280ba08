import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, launcherContainers, ok, practiceSuite, variant } from "./practice-cluster.js";

// Boot logs as vLLM writes them (issue 10), on the practice cluster: the practice engine prints
// vLLM's current shapes (docker-images/practice-engine/lib/log.js, faults.js) and `up` reads them
// through the same parser as `explain` (src/engine/boot-log.ts).
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-vllm-logs-");

async function downAll(): Promise<void> {
  ok(await launcher(["down", "--all", "--grace", "1"]), "down --all");
}

describe("vLLM's boot log on the practice cluster", { concurrency: false }, () => {
  test("--uvicorn-log-level warning hides uvicorn's line: up polls /health past the init line and is ready", async () => {
    const recipe = variant(dir, "quiet-uvicorn", "practice-2x", `args = ["--uvicorn-log-level", "warning"]\n`);
    try {
      const r = await launcher(["up", recipe, "--timeout", "40s"], 90_000);
      assert.equal(r.code, 0, r.stderr);
      const logs = ok(await launcher(["logs", "quiet-uvicorn", "--node", "n1"]), "logs");
      assert.match(logs.stdout, /Starting vLLM server on http:/);
      assert.doesNotMatch(logs.stdout, /Application startup complete/);
    } finally {
      await downAll();
    }
  });

  test("a worker failing on the headless node: up names that node and the worker's exception, and the plugin warning", async () => {
    const recipe = variant(
      dir,
      "worker-import",
      "practice-2x",
      // The worker's record comes 300 ms after the wrapper that kills `vllm serve`: docker stores a
      // process's stdout and another's stderr in either order, and up must still name the record's
      // exception (it failed CI when up stopped reading at the first fatal line). VLLM_LOGGING_PREFIX
      // puts its text before every logger line's level (vllm/logger.py _FORMAT): the cause is still
      // the message alone. The head, which lost its headless node, says so in today's form (NCCL's
      // remote error in its own worker's collective): a lost peer, so the worker's cause is named.
      `[env]\nPRACTICE_FAULT = "engine_core_init"\nPRACTICE_FAULT_RANK = "1"\nPRACTICE_FAILED_PLUGIN = "dspark_vision"\nPRACTICE_RECORD_LAG_MS = "300"\nVLLM_LOGGING_PREFIX = "[spark] "\n`,
    );
    try {
      const r = await launcher(["up", recipe, "--timeout", "40s"], 90_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n2 \(rank 1\): boot of worker-import failed/);
      assert.match(r.stderr, /^  \| cause: ImportError: \/usr\/local\/lib\/python3\.12\/dist-packages\/b12x\/_C\.abi3\.so: undefined symbol: _ZN3c104cuda9SetDeviceEi$/m);
      assert.doesNotMatch(r.stderr, /^  \| cause: .*WorkerProc initialization failed/m);
      assert.match(r.stderr, /^  \| warning: Failed to load plugin dspark_vision \(ModuleNotFoundError: No module named 'dspark_vision'\)/m);
      assert.match(r.stderr, /^  \| \(Worker_TP1 pid=\d+\) \[spark\] ERROR /m);
      assert.match(r.stderr, /rolled back: removed 2 containers/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await downAll();
    }
  });

  test("older builds' coloured prefixes: CUDA error: out of memory on the head is fatal and the cause", async () => {
    const recipe = variant(dir, "cuda-oom", "practice-2x", `[env]\nPRACTICE_FAULT = "cuda_oom"\nPRACTICE_LOG_STYLE = "v0.11"\n`);
    try {
      const r = await launcher(["up", recipe, "--timeout", "40s"], 90_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n1 \(rank 0\): boot of cuda-oom failed: the engine failed/);
      assert.match(r.stderr, /^  \| cause: RuntimeError: CUDA error: out of memory$/m);
      assert.doesNotMatch(r.stderr, /\x1b/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await downAll();
    }
  });
});
