import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { BOOT_PHASES } from "../../src/contract/deployment.js";
import { readLogLines } from "../../src/boot/explain.js";
import { advanceBoot, INITIAL_BOOT, type BootState } from "../../src/engine/boot-log.js";
import { engineAdapter } from "../../src/engine/registry.js";
import { launcher, launcherContainers, launcherProcess, ok, practiceSuite, variant, within } from "./practice-cluster.js";

// Boot logs as vLLM writes them (issues 10 and 28), on the practice cluster: the practice engine
// prints vLLM's current shapes (docker-images/practice-engine/serve, lib/log.js, faults.js) and `up`
// reads them through the same parser as `explain` (src/engine/boot-log.ts). Each shape's reading is
// unit-tested line by line (test/unit/boot-log-vllm-today.test.ts); here each is read in a real boot,
// by up and by explain of the saved log, on one node where one suffices.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-vllm-logs-");

async function downAll(): Promise<void> {
  ok(await launcher(["down", "--all", "--grace", "1"]), "down --all");
}

const vllm = engineAdapter("vllm") ?? assert.fail("launcher has no vllm adapter");

/** Each node's states, line by line, as up's parser reads its part of a `launcher logs` text. */
function statesByNode(log: string): Map<string, BootState[]> {
  const nodes = new Map<string, BootState[]>();
  for (const line of readLogLines(vllm, log)) {
    const states = nodes.get(line.node) ?? [];
    states.push(advanceBoot(vllm, states.at(-1) ?? INITIAL_BOOT, line.raw));
    nodes.set(line.node, states);
  }
  return nodes;
}

/** The phases in the order given never go back (by the boot's order). */
function neverBack(phases: readonly string[], what: string): void {
  const at = phases.map((p) => BOOT_PHASES.indexOf(p as (typeof BOOT_PHASES)[number]));
  assert.ok(at.every((i) => i >= 0) && at.every((i, k) => k === 0 || i >= (at[k - 1] as number)), `${what}: ${phases.join(" -> ")}`);
}

/** `launcher explain --json` of a saved log. */
async function explain(log: string, file: string): Promise<{ code: number | null; e: { failed: boolean; ready: boolean; phase: string; cause: string | null; hint: string | null; phases: { phase: string }[] } }> {
  const saved = path.join(dir, file);
  writeFileSync(saved, log);
  const r = await launcher(["explain", saved, "--json"]);
  return { code: r.code, e: JSON.parse(r.stdout) as Awaited<ReturnType<typeof explain>>["e"] };
}

/**
 * A 1-node boot that fails: up's exit code and stderr, and the boot's log as a user saves it while
 * it runs (`launcher logs NAME --follow`), before up's rollback removes the container. The recipe's
 * phase delay gives the follow time to start before the fault.
 */
async function failedSoloBoot(recipe: string, name: string): Promise<{ code: number | null; stderr: string; log: string }> {
  const up = launcherProcess(["up", recipe, "--timeout", "40s"]);
  let stderr = "";
  up.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const upDone = new Promise<number | null>((resolve) => up.on("close", resolve));
  let follow: ReturnType<typeof launcherProcess> | undefined;
  try {
    await within(20_000, "the container exists", async () => (launcherContainers(HOSTS).length === 1 ? true : undefined));
    follow = launcherProcess(["logs", name, "--follow", "--tail", "1000"]);
    let log = "";
    follow.stdout.on("data", (d: Buffer) => (log += d.toString()));
    const followDone = new Promise<number | null>((resolve) => follow?.on("close", resolve));
    const code = (await within(60_000, "up ended", async () => up.exitCode ?? undefined)).value;
    await upDone;
    // The rollback removed the container: `docker logs --follow` ends with it (and if it lingers,
    // what it printed is complete: the boot is over).
    await within(20_000, "logs --follow ended after the rollback", async () => follow?.exitCode ?? follow?.signalCode ?? undefined).catch(() => follow?.kill("SIGKILL"));
    await followDone;
    return { code, stderr, log };
  } finally {
    if (follow !== undefined && follow.exitCode === null) follow.kill("SIGKILL");
    if (up.exitCode === null) up.kill("SIGTERM");
    await upDone;
  }
}

const solo = (name: string, env: string): string => variant(dir, name, "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\n${env}`);

describe("vLLM's boot log on the practice cluster", { concurrency: false }, () => {
  test("--uvicorn-log-level warning hides uvicorn's line: up polls /health past the init line and is ready; today's rendezvous lines put each rank at the rendezvous, and the headless node's phases never go back", async () => {
    const recipe = variant(dir, "quiet-uvicorn", "practice-2x", `args = ["--uvicorn-log-level", "warning"]\n`);
    try {
      const r = await launcher(["up", recipe, "--timeout", "40s"], 90_000);
      assert.equal(r.code, 0, r.stderr);
      const logs = ok(await launcher(["logs", "quiet-uvicorn", "--node", "n1"]), "logs");
      assert.match(logs.stdout, /Starting vLLM server on http:/);
      assert.doesNotMatch(logs.stdout, /Application startup complete/);

      // vLLM's rendezvous lines today (the practice engine prints them as vllm/v1/executor/
      // multiproc_executor.py and vllm/distributed/parallel_state.py do): up's parser puts every
      // rank at the rendezvous, and a headless node, which logs its config before its start line
      // (vllm/entrypoints/cli/serve.py run_headless), never goes back a phase, in up's progress,
      // in up's parser over the log and in explain.
      const all = ok(await launcher(["logs", "quiet-uvicorn", "--tail", "1000"]), "logs of both").stdout;
      assert.match(all, /^\[n1\] \(EngineCore_DP0 pid=\d+\) INFO [\d: -]+ \[multiproc_executor\.py:\d+\] DP group leader: node_rank=0, /m);
      assert.match(all, /^\[n1\] \(Worker_TP0 pid=\d+\) INFO [\d: -]+ \[parallel_state\.py:\d+\] world_size=2 rank=0 local_rank=0 distributed_init_method=tcp:\/\/[\d.]+:\d+ backend=nccl$/m);
      assert.match(all, /^\[n2\] \(Worker_TP1 pid=\d+\) INFO [\d: -]+ \[parallel_state\.py:\d+\] world_size=2 rank=1 local_rank=0 distributed_init_method=tcp:\/\/[\d.]+:\d+ backend=nccl$/m);
      const n2 = all.split("\n").filter((l) => l.startsWith("[n2]"));
      const resolved = n2.findIndex((l) => /Resolved architecture: /.test(l));
      assert.ok(resolved >= 0 && n2.findIndex((l) => /Launching vLLM \(v[^)]+\) headless multiproc executor/.test(l)) > resolved, n2.join("\n"));
      const read = statesByNode(all);
      assert.deepEqual([...read.keys()].sort(), ["n1", "n2"]);
      for (const [node, states] of read) {
        assert.equal(states.at(-1)?.atRendezvous, true, `${node} at the rendezvous`);
        neverBack(states.map((x) => x.phase), `${node}'s phases as up's parser reads its log`);
      }
      assert.equal(read.get("n2")?.at(-1)?.headless, true);
      for (const node of ["n1", "n2"]) {
        const shown = [...r.stderr.matchAll(new RegExp(`^ *(?:\\[ *[\\d.]+s\\] )?${node} +(${BOOT_PHASES.join("|")})\\b`, "gm"))].map((m) => m[1] as string);
        assert.ok(shown.length > 0, r.stderr);
        neverBack(shown, `${node}'s phases as up showed them`);
      }
      const x = await explain(n2.join("\n"), "headless.log");
      assert.equal(x.e.failed, false);
      neverBack(x.e.phases.map((p) => p.phase), "n2's phases as explain reads them");
      assert.equal(new Set(x.e.phases.map((p) => p.phase)).size, x.e.phases.length, "explain shows each phase once");
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
  test("a local worker killed with exit code -9 (no traceback): up and explain name it as the node's own failure, with the OOM-killer hint", async () => {
    const recipe = solo("worker-killed", `PRACTICE_FAULT = "worker_exit"\nPRACTICE_PHASE_DELAY_MS = "900"\n`);
    try {
      const r = await failedSoloBoot(recipe, "worker-killed");
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n1 \(rank 0\): boot of worker-killed failed/);
      assert.match(r.stderr, /^ {2}\| cause: Worker proc VllmWorker-0 died unexpectedly \(exit code: -9\), shutting down executor\.$/m);
      assert.match(r.stderr, /^ {2}\| hint: worker VllmWorker-0 was killed \(SIGKILL, exit code -9\) .*OOM killer/m);
      assert.match(r.log, /^\[n1\] .*Worker proc VllmWorker-0 died unexpectedly \(exit code: -9\)/m, r.log);
      const { code, e } = await explain(r.log, "worker-killed.log");
      assert.equal(code, 1);
      assert.equal(e.failed, true);
      assert.equal(e.phase, "loading");
      assert.equal(e.cause, "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.");
      assert.equal(e.hint, /^ {2}\| hint: (.*)$/m.exec(r.stderr)?.[1]);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await downAll();
    }
  });

  test("a pydantic ValidationError: up and explain give the value error under it as the cause", async () => {
    const recipe = solo("invalid-config", `PRACTICE_FAULT = "invalid_config"\nPRACTICE_PHASE_DELAY_MS = "2000"\n`);
    try {
      const r = await failedSoloBoot(recipe, "invalid-config");
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /n1 \(rank 0\): boot of invalid-config failed/);
      assert.match(r.stderr, /^ {2}\| cause: ParallelConfig: num_redundant_experts should be used with EPLB\.16\.$/m);
      assert.match(r.log, /^\[n1\] .*pydantic_core\._pydantic_core\.ValidationError: 1 validation error for ParallelConfig$/m, r.log);
      const { code, e } = await explain(r.log, "invalid-config.log");
      assert.equal(code, 1);
      assert.equal(e.failed, true);
      assert.equal(e.cause, "ParallelConfig: num_redundant_experts should be used with EPLB.16.");
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      await downAll();
    }
  });

  test("the Rust frontend's ready line makes up ready; the engine core dying after serving is a failure explain names", async () => {
    const recipe = solo("rust-crash", `VLLM_USE_RUST_FRONTEND = "1"\nPRACTICE_FAULT = "crash_after_ready"\nPRACTICE_CRASH_AFTER_MS = "3000"\n`);
    try {
      const r = await launcher(["up", recipe, "--timeout", "40s"], 90_000);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /n1 +serving/);
      await within(20_000, "the engine died after serving", async () => (launcherContainers(HOSTS).some((c) => /:exited/.test(c)) ? true : undefined));
      const status = JSON.parse(ok(await launcher(["status", "--json"]), "status").stdout) as { deployments: { deployment: string; status: string; missing: string[] }[] };
      const gone = status.deployments.find((d) => d.deployment === "rust-crash");
      assert.notEqual(gone?.status, "serving", JSON.stringify(status));
      assert.match(gone?.missing.join() ?? "", /rank 0 on n1 \(exited/);
      const log = ok(await launcher(["logs", "rust-crash", "--tail", "1000"]), "logs").stdout;
      assert.match(log, /^\[n1\] \(RustFrontend pid=\d+\) INFO [\d: -]+ \[server\/src\/lib\.rs:\d+\] starting OpenAI server bind_address=/m, log);
      assert.doesNotMatch(log, /Starting vLLM server|Application startup complete/);
      assert.match(log, /^\[n1\] .*Engine core proc EngineCore_DP0 died unexpectedly, shutting down client\.$/m);
      const { code, e } = await explain(log, "rust-crash.log");
      assert.equal(code, 1);
      assert.equal(e.ready, true);
      assert.equal(e.phase, "serving");
      assert.equal(e.failed, true);
      assert.equal(e.cause, "RuntimeError: CUDA error: an illegal memory access was encountered");
      assert.match(e.hint ?? "", /^the engine core process \(EngineCore_DP0\) died/);
    } finally {
      await downAll();
    }
  });
});
