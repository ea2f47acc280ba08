import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { judgedLines } from "../../src/app/validate.js";
import { explainLog } from "../../src/boot/explain.js";
import { culprit } from "../../src/boot/blame.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { readBoot } from "../../src/engine/boot-log.js";
import { ENGINES } from "../../src/engine/registry.js";
import { LAUNCH_FIRST_LINE, SGLANG_KEY_ENV, WORKER_HEALTH_HOST } from "../../src/engine/sglang/command.js";
import { withPrefixes } from "../../src/engine/vllm/abbrev.js";
import { planDeployment } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";
import { cliArgs } from "../built-cli.js";

const sglang = ENGINES.sglang;
const FILE = "recipes/s/recipe.toml";
const recipe = (over: string, nodes = 2, tp = 2): string =>
  `engine = "sglang"\nname = "s"\ndocker_image = "img:local"\nmodel = "org/model"\nrequired_nodes = ${nodes}\ntensor_parallel_size = ${tp}\n${over}`;

function check(text: string): { errors: string[]; warnings: string[] } {
  const r = resolveRecipe("s", memorySource({ [FILE]: text }));
  const of = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: of("error"), warnings: of("warning") };
}

test("validate: the flags launcher writes for SGLang (every spelling) are refused with what to set instead", () => {
  const cases: [string, RegExp][] = [
    ["--tp 2", /--tp is managed by launcher .*set tensor_parallel_size in the recipe/s],
    ["--tensor-parallel-size 2", /--tensor-parallel-size is managed by launcher/],
    ["--pp-size 1", /--pp-size is managed by launcher .*pipeline_parallel_size/s],
    ["--dist-init-addr 10.0.0.1:5000", /--dist-init-addr is managed by launcher .*head's fabric address/s],
    ["--nnodes 2", /--nnodes is managed by launcher .*required_nodes/s],
    ["--node-rank 1", /--node-rank is managed by launcher/],
    ["--host 0.0.0.0", /--host is managed by launcher .*api_bind/s],
    ["--port 30000", /--port is managed by launcher .*api_port/s],
    ["--use-ray", /--use-ray: launcher starts SGLang's ranks on every node itself/],
    // vLLM's spellings a recipe moved from vLLM keeps: SGLang's own flag named.
    ["--max-model-len 4096", /--max-model-len: SGLang has no --max-model-len \(vLLM's\).*write --context-length/s],
    ["--gpu-memory-utilization 0.5", /--gpu-memory-utilization: SGLang has no .*write --mem-fraction-static/s],
    ["--enable-prefix-caching", /RadixAttention/],
  ];
  for (const [flag, want] of cases) {
    const { errors } = check(recipe(`args = ["${flag}"]\n`));
    assert.equal(errors.length, 1, `${flag}: ${errors.join("\n")}`);
    assert.match(errors[0] ?? "", want, flag);
  }
});

test("validate: data parallel is one node's (SGLang refuses it across nodes without DP attention; sparkrun #284), and multiplies its GPUs", () => {
  const multi = check(recipe('args = ["--dp-size", "2"]\n', 2, 1)).errors;
  assert.ok(multi.some((e) => /--dp-size cannot be used on a multi-node deployment \(required_nodes = 2\).*one recipe with required_nodes = 1 per node/s.test(e)), multi.join("\n"));
  // One node of one GPU: tp 1 x dp 2 = 2 ranks for 1 GPU.
  const one = check(recipe('args = ["--dp-size", "2"]\n', 1, 1)).errors;
  assert.ok(one.some((e) => /tensor_parallel_size x pipeline_parallel_size x data parallel \(--dp-size\) = 1 x 1 x 2 = 2/.test(e)), one.join("\n"));
  const ep = check(recipe('args = ["--ep-size", "3"]\n')).errors;
  assert.ok(ep.some((e) => /--ep-size 3 does not divide tensor_parallel_size 2/.test(e)), ep.join("\n"));
  assert.deepEqual(check(recipe('args = ["--ep-size", "2", "--mem-fraction-static", "0.5"]\n')), { errors: [], warnings: [] });
});

test("validate: with --enable-dp-attention, data parallel divides tensor parallel (ServerArgs._handle_data_parallelism) and may span nodes", () => {
  assert.deepEqual(check(recipe('args = ["--dp-size", "2", "--enable-dp-attention"]\n')), { errors: [], warnings: [] });
  assert.deepEqual(check(recipe('args = ["--dp", "2", "--enable-dp-attention"]\n')).errors, []);
  const three = check(recipe('args = ["--dp-size", "3", "--enable-dp-attention"]\n')).errors;
  assert.equal(three.length, 1, three.join("\n"));
  assert.match(three[0] ?? "", /--dp-size 3 does not divide tensor_parallel_size 2/);
});

test("validate: env that undoes what launcher manages is refused (an init method instead of --dist-init-addr, a worker's launch that returns)", () => {
  for (const [name, flag] of [["SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE", "--dist-init-addr"], ["SGLANG_BLOCK_NONZERO_RANK_CHILDREN", "--node-rank"]] as const) {
    const { errors } = check(recipe(`[env]\n${name} = "0"\n`));
    assert.equal(errors.length, 1, `${name}: ${errors.join("\n")}`);
    assert.match(errors[0] ?? "", new RegExp(`env ${name} is SGLang's ${flag} read from the environment`));
  }
});

test("the key's every argparse spelling leaves argv: --api-key's unique prefixes come from the option list, and plan, its text and JSON never show the key", () => {
  const known = sglang.flags.known ?? [];
  assert.deepEqual([...sglang.flags.apiKey.flags].sort(), withPrefixes(["--api-key"], known).sort());
  assert.ok(sglang.flags.apiKey.flags.includes("--api-k") && sglang.flags.apiKey.flags.includes("--api"));
  const cluster = parseCluster("examples/clusters/spark-2x.toml", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;
  assert.ok(cluster);
  for (const spelling of ["--api-k", "--api", "--ap"]) {
    const r = resolveRecipe("s", memorySource({ [FILE]: recipe(`args = ["${spelling}", "sekret"]\n`) }));
    assert.deepEqual(r.diagnostics.map(formatDiagnostic), [], spelling);
    assert.ok(r.recipe);
    const p = planDeployment(r.recipe, cluster);
    assert.ok(p.ok, spelling);
    assert.ok(!p.plan.nodes.some((n) => n.argv.some((w) => w.includes("sekret"))), `${spelling}: the key is in no argument`);
    assert.equal(p.plan.nodes[0]?.env[SGLANG_KEY_ENV], "sekret");
    assert.doesNotMatch(planText(p.plan), /sekret/);
    assert.doesNotMatch(JSON.stringify(planJson(p.plan)), /sekret/);
  }
});

test("plan: every node runs the same launch with the head's --dist-init-addr, --nnodes and its rank; rank 0 serves the API with the key from its env; a worker's health server gets loopback and api_port, and no key", () => {
  const cluster = parseCluster("examples/clusters/spark-2x.toml", readFileSync("examples/clusters/spark-2x.toml", "utf8")).cluster;
  const r = resolveRecipe("s", memorySource({ [FILE]: recipe('args = ["--api-key", "sekret", "--served-model-name", "pets"]\n') })).recipe;
  assert.ok(cluster && r);
  const p = planDeployment(r, cluster);
  assert.ok(p.ok, JSON.stringify(p));
  assert.equal(p.plan.served_model, "pets");
  for (const n of p.plan.nodes) {
    const argv = n.argv;
    assert.equal(argv[argv.indexOf("--entrypoint") + 1], "python3");
    const command = argv.slice(argv.indexOf("img:local") + 1);
    if (n.rank === 0) {
      assert.equal(command[0], "-c");
      assert.equal(command[1]?.split("\n")[0], LAUNCH_FIRST_LINE);
    } else {
      // SGLang's module as it is: no program that reads a key.
      assert.deepEqual(command.slice(0, 2), ["-m", "sglang.launch_server"]);
    }
    const at = (flag: string): string | undefined => (command.includes(flag) ? command[command.indexOf(flag) + 1] : undefined);
    assert.equal(at("--model-path"), "org/model");
    assert.equal(at("--dist-init-addr"), `${p.plan.master_addr}:${p.plan.master_port}`);
    assert.equal(at("--nnodes"), "2");
    assert.equal(at("--node-rank"), String(n.rank));
    assert.equal(at("--tp-size"), "2");
    // A worker binds its dummy health server at --host/--port (engine.py launch_dummy_health_check_server).
    if (n.rank === 0) assert.ok(at("--host") !== undefined);
    else assert.equal(at("--host"), WORKER_HEALTH_HOST, `${n.node}: --host`);
    assert.equal(at("--port"), String(p.plan.api_port), `${n.node}: --port`);
    assert.equal(command.includes("--enable-metrics"), n.rank === 0);
    assert.ok(!argv.some((w) => w.includes("sekret")), "the key is in no argument");
    assert.equal(n.env[SGLANG_KEY_ENV], n.rank === 0 ? "sekret" : undefined, `${n.node}: the key on rank 0 only`);
    assert.equal(n.env.SGLANG_HOST_IP, cluster.nodes.find((c) => c.name === n.node)?.fabric_ip, "the node's own fabric address");
    assert.equal(n.env.VLLM_HOST_IP, undefined);
    for (const vllmWord of ["--tensor-parallel-size", "--headless", "--master-addr"]) assert.ok(!argv.includes(vllmWord), vllmWord);
  }
  // One node: no distributed flags at all (data-parallel replicas never get --nnodes).
  const one = resolveRecipe("s", memorySource({ [FILE]: recipe('args = ["--dp-size", "1"]\n', 1, 1) })).recipe;
  assert.ok(one);
  const p1 = planDeployment(one, cluster);
  assert.ok(p1.ok);
  for (const w of ["--nnodes", "--node-rank", "--dist-init-addr"]) assert.ok(!p1.plan.nodes[0]?.argv.includes(w), w);
});

test("validate says who judged SGLang's args: launcher's table, which an image's own parser replaces (validate --image, up's preflight)", () => {
  const judge = sglang.flags.judge;
  assert.ok(judge);
  const [line] = judgedLines([{ ref: "s", file: FILE, ok: true, diagnostics: [], args_judged_by: judge }]);
  assert.match(line ?? "", /launcher's table of SGLang .*validate --image IMAGE judges them by the image; up does it on the head/);
});

test("the practice engine's python3 knows launcher's launch program by its first line", () => {
  assert.match(readFileSync("docker-images/practice-engine/lib/sglang/entry.js", "utf8"), new RegExp(`const LAUNCH_FIRST_LINE = '${LAUNCH_FIRST_LINE.replace(/[()]/g, "\\$&")}';`));
});

// A boot as SGLang logs it (the shapes of a real log: sgl-project/sglang's scheduler, model runner
// and HTTP server lines, as quoted in users' reports).
const T = "[2026-12-05 10:00:0";
const BOOT = [
  `${T}0] server_args=ServerArgs(model_path='org/model', tp_size=2, nnodes=2, node_rank=0)`,
  `${T}1 TP0] Init torch distributed begin.`,
  `${T}2 TP0] Init torch distributed ends. mem usage=0.13 GB`,
  `${T}2 TP0] Load weight begin. avail mem=119.20 GB`,
  "Loading safetensors checkpoint shards:  50% Completed | 7/14 [00:03<00:04,  1.74it/s]\rLoading safetensors checkpoint shards: 100% Completed | 14/14 [00:07<00:00,  1.85it/s]",
  `${T}5 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=58.09 GB, mem usage=61.04 GB.`,
  `${T}5 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB`,
  `${T}5 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB`,
  `${T}8 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.`,
  `${T}9 TP0] max_total_num_tokens=46611, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072`,
  `${T}9] INFO:     Started server process [3207]`,
  `${T}9] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)`,
];

test("log: phases and figures from SGLang's lines, /health worth polling once uvicorn listens, ready on its ready line", () => {
  const s = readBoot(sglang, BOOT);
  assert.equal(s.phase, "warmup");
  assert.equal(s.pastInit, true);
  assert.equal(s.ready, false);
  assert.deepEqual(s.figures, { model_gib: "61.04", kv_tokens: "46611", graph_seconds: "7.23" });
  const ready = readBoot(sglang, [...BOOT, `${T}9] The server is fired up and ready to roll!`]);
  assert.equal(ready.ready, true);
  assert.equal(ready.phase, "serving");
  assert.ok(readBoot(sglang, BOOT.slice(0, 3)).atRendezvous, "Init torch distributed begin: the rank waits for its peers");
});

test("log: a scheduler's exception ends the boot while the process runs; the cause is its traceback's exception, with a hint", () => {
  const lines = [
    ...BOOT.slice(0, 4),
    `${T}4 TP0] Scheduler hit an exception: Traceback (most recent call last):`,
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2950, in run_scheduler_process',
    "    scheduler = Scheduler(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 119.70 GiB of which 1.02 GiB is free.",
    `${T}4] Received sigquit from a child process. It usually means the child failed.`,
  ];
  const s = readBoot(sglang, lines);
  assert.match(s.fatal ?? "", /^Scheduler hit an exception/);
  assert.match(s.cause ?? "", /^torch\.OutOfMemoryError: CUDA out of memory/);
  const e = explainLog(sglang, lines.join("\n"));
  assert.equal(e.failed, true);
  assert.match(e.cause ?? "", /^torch\.OutOfMemoryError/);
  assert.match(e.hint ?? "", /lower --mem-fraction-static/);
  const kv = explainLog(sglang, [...lines.slice(0, 7), "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."].join("\n"));
  assert.match(kv.hint ?? "", /raise it/);
  const assertLine = readBoot(sglang, [...BOOT, `${T}9 TP0] Scheduler hit an exception: Traceback (most recent call last):`, "RuntimeError: CUDA error: device-side assert triggered"]);
  assert.match(assertLine.cause ?? "", /device-side assert triggered/);
});

test("log: argparse's error is fatal and named, with what to do", () => {
  const lines = ["usage: launch_server.py [-h] --model-path MODEL_PATH ...", "launch_server.py: error: unrecognized arguments: --max-model-len 4096"];
  const e = explainLog(sglang, lines.join("\n"));
  assert.equal(e.failed, true);
  assert.equal(e.cause, "launch_server.py: error: unrecognized arguments: --max-model-len 4096");
  assert.match(e.hint ?? "", /the image's SGLang has no --max-model-len/);
});

test("log: a rank that only lost its peer is a peer loss (the other node is blamed)", () => {
  const s = readBoot(sglang, [`${T}9 TP1] Scheduler hit an exception: Traceback (most recent call last):`, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.1]:5000"]);
  assert.equal(s.causeIsPeerLoss, true);
});

test("launcher explain --engine sglang reads a saved SGLang log: the cause, the hint, exit 1", () => {
  const log = [...BOOT.slice(0, 4), `${T}4 TP0] Scheduler hit an exception: Traceback (most recent call last):`, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."].join("\n");
  const r = spawnSync(process.execPath, [...cliArgs(), "explain", "-", "--engine", "sglang"], { encoding: "utf8", input: log, env: { ...process.env, NODE_OPTIONS: "" } });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stdout, /^cause: RuntimeError: Not enough memory\. Please try to increase --mem-fraction-static\.$/m);
  assert.match(r.stdout, /^hint: the weights leave SGLang no room for its KV cache/m);
});

// The same boot in today's words (sgl-project/sglang 001067ff's engine.py and model_runner.py, the
// nightlies' graph lines as users' logs show them): the phases and figures read alike.
const BOOT_TODAY = [
  `${T}0] server_args={'model_path': 'org/model', 'tp_size': 2, 'nnodes': 2, 'node_rank': 0, 'api_key': None}`,
  `${T}1 TP0] Init torch distributed begin.`,
  `${T}2 TP0] Init torch distributed ends. mem usage=0.13 GB`,
  `${T}2 TP0] Load weight begin. avail mem=119.20 GB`,
  `${T}5 TP0] Load weight end. elapsed=3.10 s, type=Qwen3ForCausalLM, quant=fp8, avail mem=58.09 GB, mem usage=61.04 GB.`,
  `${T}5 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 46611, KV size: 2.84 GB`,
  `${T}5 TP0] Capture target decode CUDA graph begin. This can take up to several minutes. avail mem=1.45 GB`,
  `${T}8 TP0] Capture target decode CUDA graph end. elapsed=7.23 s, mem usage=0.93 GB, avail mem=0.53 GB.`,
  `${T}9] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)`,
];

test("log: today's forms (server_args as a dict, Load weight end without dtype= or with quant=, the nightlies' named CUDA graphs) read as the releases' did", () => {
  const s = readBoot(sglang, BOOT_TODAY);
  assert.equal(s.phase, "warmup");
  assert.deepEqual(s.figures, { load_seconds: "3.10", model_gib: "61.04", kv_tokens: "46611", graph_seconds: "7.23" });
  // The settings line starts the boot in both forms (the dict today, the dataclass's repr before).
  for (const line of [BOOT_TODAY[0], BOOT[0]]) {
    const body = sglang.readLine(line ?? "").body;
    assert.ok(sglang.bootPhases.some((p) => p.phase === "starting" && p.pattern.test(body)), body);
  }
  const noQuant = readBoot(sglang, [...BOOT_TODAY.slice(0, 4), `${T}5 TP0] Load weight end. elapsed=3.10 s, type=Qwen3ForCausalLM, avail mem=58.09 GB, mem usage=61.04 GB.`]);
  assert.deepEqual(noQuant.figures, { load_seconds: "3.10", model_gib: "61.04" });
});

test("log: argparse's error under today's prog (\"sglang serve\") is fatal and named", () => {
  const e = explainLog(sglang, ["usage: sglang serve [-h] --model-path MODEL_PATH ...", "sglang serve: error: unrecognized arguments: --max-model-len 4096"].join("\n"));
  assert.equal(e.failed, true);
  assert.equal(e.cause, "sglang serve: error: unrecognized arguments: --max-model-len 4096");
  assert.match(e.hint ?? "", /the image's SGLang has no --max-model-len/);
});

test("log: a port already taken (uvicorn's [Errno 98], a worker's health server too) ends the boot with what to do", () => {
  const e = explainLog(sglang, [...BOOT.slice(0, 9), `${T}9] Starting dummy health check server at 127.0.0.1:30000`, `${T}9] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use`].join("\n"));
  assert.equal(e.failed, true);
  assert.match(e.cause ?? "", /^\[Errno 98\] error while attempting to bind on address/);
  assert.match(e.hint ?? "", /port 30000 at 127\.0\.0\.1 is already in use on that node \(SGLang binds the deployment's api_port there, on a worker for its health check\).*up --port/);
  const v6 = explainLog(sglang, `${T}9] ERROR:    [Errno 98] error while attempting to bind on address ('::', 30000, 0, 0): address already in use`);
  assert.match(v6.hint ?? "", /port 30000 at :: is already in use/);
});

test("blame: a worker killed without a word (the OOM killer) and a head that only heard of it (NCCL's remote error, SGLang's load barrier, Gloo): the worker is blamed", () => {
  const lost = [
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL version 2.27.3",
    "ValueError: TP rank 0 could finish the model loading, but there are other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node.",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:41234",
    "RuntimeError: [../torch/csrc/distributed/c10d/TCPStore.cpp:125] Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
  ];
  for (const line of lost) {
    const head = readBoot(sglang, [...BOOT.slice(0, 6), `${T}6 TP0] Scheduler hit an exception: Traceback (most recent call last):`, line]);
    assert.equal(head.cause, line);
    assert.equal(head.causeIsPeerLoss, true, line);
    const worker = readBoot(sglang, BOOT.slice(0, 4));
    const blamed = culprit(
      [
        { node: "head", state: head, order: 0 },
        { node: "worker", state: worker, order: 1, silent: true },
      ],
      (r) => ({ ownCause: r.state.cause !== undefined && r.state.causeIsPeerLoss !== true, order: r.order, ...(r.silent ? { silent: true } : {}) }),
    );
    assert.equal(blamed?.node, "worker", line);
  }
});
