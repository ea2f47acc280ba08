/**
 * One key style across every `--json` answer: snake_case, a unit in the key's tail (`_kib`, `_gib`,
 * `_ms`, `_seconds`), as vLLM's result keys and status's `recipe_hash` are. The commands that run
 * without a cluster are run here, in this process, on a store of their own filled with one of each
 * record; the shapes of the commands that need nodes are walked through the encoders those commands
 * print with. Each walk must see keys: an answer that printed nothing would prove nothing.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { Command } from "commander";
import { jsonAnswer, type Output } from "../../src/app/output.js";
import { errorJson, RemoteError } from "../../src/config/errors.js";
import { Store, storeDir } from "../../src/store/store.js";
import { parseMeminfo, type Meminfo } from "../../src/memory/meminfo.js";
import { Trace } from "../../src/remote/trace.js";
import { readProbe } from "../../src/nodes/doctor.js";
import { registerValidate } from "../../src/cli/validate.js";
import { registerPlan } from "../../src/cli/plan.js";
import { registerDiff } from "../../src/cli/diff.js";
import { registerSchema } from "../../src/cli/schema.js";
import { registerExplain } from "../../src/cli/explain.js";
import { registerHistory } from "../../src/cli/history.js";
import { registerLanes } from "../../src/cli/lanes.js";
import { registerCluster } from "../../src/cli/cluster.js";
import { registerCompare } from "../../src/cli/compare.js";
import { doctorNodeJson } from "../../src/cli/doctor.js";
import { removedJson } from "../../src/cli/down.js";
import { evalRun, series } from "./compare-fixture.js";

type Register = (program: Command, io: Output) => void;

const SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/**
 * Objects whose keys, and their objects' keys, are data, not names launcher chose: environment
 * variables (plan's `env`; doctor's `env` is each node's), doctor's `peers` (fabric IPs) and the
 * user's own `--chat-template-kwargs` in eval's `request_options`. Their values are still walked. (`status --json`'s `memory` and its daemon boots' `nodes` are keyed by
 * node name too; status needs nodes and is not run here.)
 */
const DATA_MAPS: ReadonlySet<string> = new Set(["env", "peers", "chat_template_kwargs"]);

/** Every key of a JSON value with its path; keys of a data map are not names and are left out. */
function keysOf(value: unknown, at = "$", out: { path: string; key: string }[] = []): { path: string; key: string }[] {
  if (Array.isArray(value)) value.forEach((v) => keysOf(v, `${at}[]`, out));
  else if (typeof value === "object" && value !== null) {
    const dataMap = at.split(".").some((part) => DATA_MAPS.has(part));
    for (const [k, v] of Object.entries(value)) {
      if (!dataMap) out.push({ path: `${at}.${k}`, key: k });
      keysOf(v, `${at}.${dataMap ? "*" : k}`, out);
    }
  }
  return out;
}

/** The paths of keys not in snake_case; asserts that the walk saw at least `least` keys. */
function offStyle(value: unknown, least: number): string[] {
  const keys = keysOf(value);
  assert.ok(keys.length >= least, `saw ${keys.length} keys, expected at least ${least}: ${JSON.stringify(value).slice(0, 300)}`);
  return [...new Set(keys.filter((k) => !SNAKE.test(k.key)).map((k) => k.path))];
}

/** What a command printed with --json (or, when it failed, its error as --json prints it), run in this process. */
async function answerOf(register: Register, argv: readonly string[]): Promise<unknown> {
  const answers: unknown[] = [];
  const warnings: string[] = [];
  const io: Output = { out: () => undefined, err: () => undefined, warn: (t) => warnings.push(t), json: (v) => answers.push(jsonAnswer(v, warnings)), diagnostics: () => undefined };
  const program = new Command().exitOverride().configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  register(program, io);
  const before = process.exitCode;
  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (e) {
    answers.push(errorJson(e));
  } finally {
    // A command that answers "failed" (explain of a failed boot) sets the exit status: not this test's.
    process.exitCode = before;
  }
  assert.equal(answers.length, 1, `${argv.join(" ")} printed ${answers.length} JSON answers`);
  return answers[0];
}

const GIB_KIB = 1024 * 1024;
const MEMINFO = ["MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem", "SReclaimable"].map((k, i) => `${k}: ${[125 * GIB_KIB, 100 * GIB_KIB, 118 * GIB_KIB, 1000, 6 * GIB_KIB, 2000, 3000][i]} kB`).join("\n");
const meminfo = (): Meminfo => {
  const r = parseMeminfo(MEMINFO);
  assert.ok(r.ok);
  return r.meminfo;
};

let dir = "";
const saved: Record<string, string | undefined> = {};
const ENV = ["XDG_STATE_HOME", "XDG_CONFIG_HOME", "LAUNCHER_CLUSTER", "LAUNCHER_DAEMON"] as const;
const CLUSTER = "examples/clusters/spark-2x.toml";
const LOG = (): string => path.join(dir, "boot.log");

before(() => {
  dir = mkdtempSync(path.join(tmpdir(), "launcher-json-keys-"));
  for (const k of ENV) saved[k] = process.env[k];
  process.env.XDG_STATE_HOME = path.join(dir, "state");
  process.env.XDG_CONFIG_HOME = path.join(dir, "config");
  delete process.env.LAUNCHER_CLUSTER;
  process.env.LAUNCHER_DAEMON = "none";
  mkdirSync(storeDir(process.env, dir), { recursive: true });
  const store = new Store(path.join(storeDir(process.env, dir), "launcher.db"));
  try {
    const at = "2026-12-03T09:00:00.000Z";
    // plan's memory fit: doctor's reading of each node and the weights' size the last up read.
    store.saveMemory("spark-2x", new Map([["spark1", meminfo()], ["spark2", meminfo()]]), at);
    store.saveWeights("spark-2x", "deepseek-ai/DeepSeek-V4-Flash-Vision-Exp", new Map([["spark1", 80 * 1024 ** 3], ["spark2", 80 * 1024 ** 3]]), at);
    // history: a boot with a phase, its memory low point, a restart and a memory trip.
    const boot = { deployment: "chat", recipe: "chat", recipe_hash: "h", lane: "chat", cluster: "spark-2x", served_model: "m", endpoint: "http://spark1:8000", nodes: ["spark1"], started_at: at, engine_version: "0.11.1" };
    const id = store.beginBoot(boot);
    store.bootPhase(id, "spark1", "loading", at, { model_gib: "84.1" });
    store.memoryPeak(id, "spark1", "loading", 10 * GIB_KIB, 120 * GIB_KIB);
    store.endBoot(id, "failed", at, { node: "spark1", error: "out of memory" });
    const restart = store.beginRestart({ cluster: "spark-2x", deployment: "chat", lane: "chat", attempt: 1, reason: "exited", message: "rank 0 exited", node: "spark1", rank: 0, cause: "OOM", started_at: at });
    store.endRestart(restart, "failed", at, "again");
    store.saveMemoryTrip({ cluster: "spark-2x", deployment: "chat", node: "spark1", phase: "serving", culprit: "deployment", message: "below the floor", detail: ["x"], at });
    store.saveOutage({ cluster: "spark-2x", node: "spark2", kind: "vanished", since: at, deployments: [{ deployment: "chat", ranks: [1] }], memory: { availableKiB: 10 * GIB_KIB, totalKiB: 120 * GIB_KIB, at } });
    store.endOutage("spark-2x", "spark2", "vanished", at);
    // lanes: one lane switching, with one swap.
    store.setLane({ name: "chat", cluster: "spark-2x", deployment: "chat", recipe: "chat", served_model: "m", state: "switching", switching_to: "chat2", since: at });
    const swap = store.beginSwap({ lane: "chat", mode: "overlap", from_deployment: "chat", from_recipe: "chat", to_deployment: "chat2", to_recipe: "chat2", started_at: at });
    store.endSwap(swap, "failed", at, "boot failed");
    // compare: two bench series and an eval run each.
    for (const r of series("slow", { rate: 50, ttftMs: 50, noise: 0.03 }, 2, 1)) store.saveBenchRun(r);
    for (const r of series("fast", { rate: 60, ttftMs: 40, noise: 0.03 }, 2, 2)) store.saveBenchRun(r);
    store.saveEvalRun({ ...evalRun("slow-eval", 20, (i) => i < 15), subject: { target: "chat", deployment: "slow", recipe: "slow" } });
    store.saveEvalRun({ ...evalRun("fast-eval", 20, (i) => i < 16), subject: { target: "chat", deployment: "fast", recipe: "fast" } });
  } finally {
    store.close();
  }
  // vLLM's own header on each line (vllm/logger.py): explain reads phases, figures and the cause from it.
  const line = (time: string, src: string, text: string): string => `(EngineCore_DP0 pid=123) INFO 12-02 ${time} [${src}] ${text}`;
  writeFileSync(
    LOG(),
    [
      "(APIServer pid=45) INFO 12-02 13:50:01 [utils.py:326] non-default args: {'model': 'm'}",
      line("13:50:05", "model.py:1", "Using max model len 262144"),
      line("13:55:13", "gpu_model_runner.py:2600", "Model loading took 84.12 GiB memory and 312.45 seconds"),
      line("13:55:20", "gpu_worker.py:1", "Available KV cache memory: 8.04 GiB"),
    ].join("\n") + "\n",
  );
});

after(() => {
  for (const k of ENV) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Each command a user runs without a cluster, the keys its answer must at least have. */
const COMMANDS: readonly { argv: readonly string[]; register: Register; least: number; has?: readonly string[] }[] = [
  { register: registerValidate, argv: ["validate", "dsv4-flash-vision", "--json"], least: 10, has: ["$.recipes[].diagnostics[].loc.col"] },
  { register: registerPlan, argv: ["plan", "dsv4-flash-vision", "--cluster", CLUSTER, "--json"], least: 40, has: ["$.memory_fit.nodes[].need_gib", "$.memory_fit.nodes[].weights_bytes", "$.memory_fit.read_at"] },
  { register: registerDiff, argv: ["diff", "dsv4-flash-vision", "dsv41-flash-4x-dcp2", "--json"], least: 10, has: ["$.changes[].section"] },
  { register: registerExplain, argv: ["explain", "PLACEHOLDER", "--json"], least: 10, has: ["$.figures.model_gib", "$.phases[].seconds"] },
  { register: registerHistory, argv: ["history", "--json"], least: 30, has: ["$.boots[].head_phases", "$.boots[].phases[].min_available_kib", "$.restarts[].started_at", "$.memory_trips[].culprit", "$.node_outages[].memory.available_kib", "$.node_outages[].ended_at"] },
  { register: registerLanes, argv: ["lanes", "--json"], least: 15, has: ["$.lanes[].switching_to", "$.lanes[].swaps[].to_deployment"] },
  { register: registerCluster, argv: ["cluster", "list", "--json"], least: 3, has: ["$.in_use"] },
  { register: registerCluster, argv: ["cluster", "show", CLUSTER, "--json"], least: 10, has: ["$.api_port", "$.nodes[].fabric_ip"] },
  { register: registerCompare, argv: ["compare", "slow", "fast", "--json"], least: 40, has: ["$.bench[].interval.correction.family_confidence", "$.eval.test.a_only", "$.a.workload.input_len"] },
  // The error every command prints with --json when it fails.
  { register: registerPlan, argv: ["plan", "no-such-recipe", "--cluster", CLUSTER, "--json"], least: 3, has: ["$.error.message", "$.error.diagnostics"] },
];

for (const c of COMMANDS) {
  test(`${c.argv.filter((a) => a !== "PLACEHOLDER").join(" ")}: every key is snake_case`, async () => {
    const answer = await answerOf(c.register, c.argv.map((a) => (a === "PLACEHOLDER" ? LOG() : a)));
    assert.deepEqual(offStyle(answer, c.least), []);
    const paths = new Set(keysOf(answer).map((k) => k.path));
    for (const p of c.has ?? []) assert.ok(paths.has(p), `${p} not in the answer: ${[...paths].join(", ")}`);
  });
}

test("schema: every field name of the recipe and cluster files is snake_case (JSON Schema's own keywords are not ours)", async () => {
  for (const kind of ["recipe", "cluster"]) {
    const names: { path: string; key: string }[] = [];
    const walk = (v: unknown, at: string): void => {
      if (Array.isArray(v)) v.forEach((x) => walk(x, `${at}[]`));
      else if (typeof v === "object" && v !== null) {
        for (const [k, x] of Object.entries(v)) {
          if (at.endsWith(".properties")) names.push({ path: `${at}.${k}`, key: k });
          walk(x, `${at}.${k}`);
        }
      }
    };
    walk(await answerOf(registerSchema, ["schema", kind]), "$");
    assert.ok(names.length >= 5, `schema ${kind}: saw ${names.length} field names`);
    assert.deepEqual(names.filter((n) => !SNAKE.test(n.key)).map((n) => n.path), []);
  }
});

test("the answers of commands that need nodes: doctor's node, down's removed container, up --trace's spans, bench's and eval's runs, a node's error", () => {
  const node = { name: "s1", rank: 0, host: "s1", hca: [], gpus: 1 };
  const probe = { ...readProbe(node, "/root/.cache/huggingface", ["@@docker", "28.2.2", "@@meminfo", MEMINFO, "@@peers", "10.0.0.2 0"].join("\n")), ssh: true };
  const doctor = { ok: true, nodes: [doctorNodeJson(probe, "ai")], env: { s1: { NCCL_IB_HCA: "x" } }, findings: [] };
  assert.deepEqual(offStyle(doctor, 20), []);
  assert.deepEqual(doctor.nodes[0]?.memory, { total_kib: 125 * GIB_KIB, available_kib: 118 * GIB_KIB, free_kib: 100 * GIB_KIB, cached_kib: 6 * GIB_KIB + 1000 - 2000, shmem_kib: 2000, reclaimable_slab_kib: 3000 });

  const down = { removed: [removedJson({ node: "n1", container: "launcher-d-r0", deployment: "d", wasRunning: false })], unreachable: [{ node: "n2", reason: "timeout" }], complete: false };
  assert.deepEqual(offStyle(down, 6), []);
  assert.equal(down.removed[0]?.was_running, false);

  let now = 0;
  const trace = new Trace(() => now);
  const end = trace.begin("preflight", "s1");
  now = 5;
  end();
  trace.mark("ready line");
  assert.deepEqual(offStyle({ trace: trace.record() }, 6), []);

  // bench --json and eval --json print their runs as the store keeps them (src/contract/evidence.ts).
  const store = new Store(path.join(storeDir(process.env, dir), "launcher.db"));
  try {
    const runs = store.benchRuns({ series: "slow" });
    assert.deepEqual(offStyle({ series: "slow", runs }, 60), []);
    assert.deepEqual(offStyle(store.evalRuns({ id: "slow-eval" })[0], 20), []);
  } finally {
    store.close();
  }

  assert.deepEqual(offStyle(errorJson(new RemoteError("s1", "docker run failed", "its last lines", "run launcher doctor")), 5), []);
});

test("the README's JSON shapes name their keys in the same style", () => {
  // Each inline shape is a code span that starts with `{`; a key is a quoted name not after a colon
  // (a value, as in eval's example line, is not a key).
  const shapes = [...readFileSync("README.md", "utf8").matchAll(/`(\{[^`]*\})`/g)].map((m) => m[1] as string);
  const keys = shapes.flatMap((s) => [...s.matchAll(/(?<!:\s*)"([^"\\]*)"(?=\s*[:,}\]])/g)].map((m) => m[1] as string));
  assert.ok(shapes.length >= 10 && keys.length >= 100, `saw ${shapes.length} shapes, ${keys.length} keys`);
  assert.deepEqual([...new Set(keys.filter((k) => !SNAKE.test(k)))], []);
});
