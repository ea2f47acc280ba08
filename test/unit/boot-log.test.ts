import assert from "node:assert/strict";
import { test } from "node:test";
import { advanceBoot, describeFigures, INITIAL_BOOT, splitTimestamp } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";

const feed = (lines: string[]) => lines.reduce((s, l) => advanceBoot(vllm, s, l), INITIAL_BOOT);

test("boot phases and figures come from vLLM's own lines, old and new spellings", () => {
  const s = feed([
    "(APIServer pid=45) INFO 12-02 13:50:01 [utils.py:326] non-default args: {'model': 'm'}",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:13 [gpu_model_runner.py:2600] Model loading took 84.12 GiB memory and 312.45 seconds",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [kv_cache_utils.py:1087] GPU KV cache size: 1,250,000 tokens",
    "(EngineCore_DP0 pid=123) INFO 12-02 13:55:20 [kv_cache_utils.py:1091] Maximum concurrency for 524,288 tokens per request: 2.38x",
  ]);
  assert.equal(s.phase, "kv-cache");
  assert.deepEqual(s.figures, { model_gib: "84.12", load_seconds: "312.45", kv_tokens: "1250000", max_concurrency: "2.38" });
  assert.equal(describeFigures(s.figures), "model 84.12 GiB in 312.45 s, KV 1,250,000 tokens, 2.38x concurrency");
  assert.equal(feed(["Model loading took 60.5 GiB and 100.2 seconds"]).figures.model_gib, "60.5");
  const ready = feed(["(APIServer pid=45) INFO 12-02 14:00:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000", "(APIServer pid=45) INFO:     Application startup complete."]);
  assert.equal(ready.phase, "serving");
  assert.equal(ready.ready, true);
});

test("the cause is the first exception, not the wrapper that follows it", () => {
  const s = feed([
    "Traceback (most recent call last):",
    '  File "/x.py", line 1, in <module>',
    "(EngineCore_DP0 pid=1) ImportError: /b12x/_C.abi3.so: undefined symbol: _ZN3c10",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
  ]);
  assert.match(s.fatal ?? "", /Engine core initialization failed/);
  assert.equal(s.cause, "ImportError: /b12x/_C.abi3.so: undefined symbol: _ZN3c10");
  const oom = feed(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]);
  assert.match(oom.fatal ?? "", /CUDA out of memory/);
  assert.match(oom.cause ?? "", /^torch\.OutOfMemoryError/);
});

test("docker's timestamps are split off the line", () => {
  assert.deepEqual(splitTimestamp("2026-12-02T13:50:01.123456789Z hello world"), { time: "2026-12-02T13:50:01.123456789Z", text: "hello world" });
  assert.deepEqual(splitTimestamp("no stamp"), { text: "no stamp" });
});
