import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { UserError } from "../../src/config/errors.js";
import { readBoot } from "../../src/engine/boot-log.js";
import { readEngineSample } from "../../src/engine/engine-metrics.js";
import { sumGauge } from "../../src/engine/metrics-text.js";
import { llamacpp } from "../../src/engine/llamacpp/adapter.js";
import { readOptionRow } from "../../src/engine/llamacpp/options.js";
import { planDeployment, startSteps } from "../../src/plan/plan.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { memorySource } from "../support/memory-source.js";

const FILE = "recipes/l/recipe.toml";
const TWO = `engine = "llamacpp"
name = "l"
docker_image = "llama:local"
model = "/models/m-00001-of-00003.gguf"
required_nodes = 2
pipeline_parallel_size = 2
args = ["--alias", "qwen", "-ngl", "99", "--ctx-size", "32768"]
`;

function resolved(text: string): { recipe?: Recipe; errors: string[]; warnings: string[] } {
  const r = resolveRecipe("l", memorySource({ [FILE]: text }));
  const of = (s: string): string[] => r.diagnostics.filter((d) => d.severity === s).map(formatDiagnostic);
  return { ...(r.recipe === undefined ? {} : { recipe: r.recipe }), errors: of("error"), warnings: of("warning") };
}

const cluster = (file: string): Cluster => {
  const c = parseCluster(file, readFileSync(file, "utf8")).cluster;
  assert.ok(c, file);
  return c;
};

test("the option table's rows: spellings, on/off options, values, choices", () => {
  assert.deepEqual(readOptionRow("-ngl, --gpu-layers, --n-gpu-layers N"), { names: ["-ngl", "--gpu-layers", "--n-gpu-layers"], takesValue: true, arity: 1 });
  assert.deepEqual(readOptionRow("-kvo, --kv-offload, -nkvo, --no-kv-offload"), { names: ["-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"], takesValue: false, arity: 0 });
  assert.deepEqual(readOptionRow("--rope-scaling {none,linear,yarn}").choices, ["none", "linear", "yarn"]);
  assert.equal(readOptionRow("-ot, --override-tensor <tensor name pattern>=<buffer type>,...").arity, 1);
  assert.equal(readOptionRow("--control-vector-layer-range START END").arity, 2);
});

test("a 2-node llama.cpp recipe validates clean, and plans rpc-server on the worker's fabric address and llama-server --rpc on the head, workers first", () => {
  const r = resolved(TWO);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.warnings, []);
  assert.ok(r.recipe);
  const c = cluster("examples/clusters/spark-2x.toml");
  const p = planDeployment(r.recipe, c);
  assert.ok(p.ok, JSON.stringify(p));
  const [head, worker] = p.plan.nodes;
  assert.ok(head && worker);
  assert.deepEqual(p.plan.start_order, [worker.node, head.node], "the workers start first");
  assert.deepEqual(startSteps(p.plan), [[worker.node], [head.node]], "the head's docker run waits for the workers'");
  assert.equal(p.plan.served_model, "qwen", "--alias names the model to clients");
  const after = (argv: readonly string[], flag: string): string | undefined => argv[argv.indexOf(flag) + 1];
  const workerIp = c.nodes.find((n) => n.name === worker.node)?.fabric_ip;
  assert.ok(workerIp);
  assert.equal(after(worker.argv, "--entrypoint"), "/app/rpc-server");
  assert.deepEqual(worker.argv.slice(worker.argv.indexOf("llama:local") + 1), ["--host", workerIp, "--port", String(c.master_port)]);
  assert.ok(!worker.argv.includes("0.0.0.0"), "never every address: the RPC protocol has no authentication");
  assert.equal(after(head.argv, "--entrypoint"), "/app/llama-server");
  assert.equal(after(head.argv, "--model"), "/models/m-00001-of-00003.gguf");
  assert.equal(after(head.argv, "--rpc"), `${workerIp}:${c.master_port}`);
  assert.equal(after(head.argv, "--port"), String(p.plan.api_port));
  assert.ok(head.argv.includes("--metrics"), "launcher passes --metrics: drain reads llamacpp:requests_processing");
  for (const n of p.plan.nodes) {
    assert.equal(n.env.VLLM_HOST_IP, undefined, "no vLLM env");
    assert.equal(n.env.NCCL_SOCKET_IFNAME, undefined, "llama.cpp's RPC is plain TCP: no NCCL env");
  }
});

test("one node: llama-server alone, no --rpc", () => {
  const r = resolved(TWO.replace("required_nodes = 2", "required_nodes = 1").replace("pipeline_parallel_size = 2\n", ""));
  assert.deepEqual(r.errors, []);
  assert.ok(r.recipe);
  const p = planDeployment(r.recipe, cluster("examples/clusters/spark-2x.toml"));
  assert.ok(p.ok);
  assert.equal(p.plan.nodes.length, 1);
  assert.ok(!p.plan.nodes[0]?.argv.includes("--rpc"));
});

test("a worker without a fabric address is a user error naming the node, never an rpc-server on every address", () => {
  const r = resolved(TWO);
  assert.ok(r.recipe);
  const c = cluster("examples/clusters/spark-2x.toml");
  const bare = { ...c, nodes: c.nodes.map((n, i) => (i === 1 ? { ...n, fabric_ip: undefined } : n)) } as Cluster;
  assert.throws(() => planDeployment(r.recipe as Recipe, bare), (e: unknown) => e instanceof UserError && /spark2: no fabric_ip/.test(e.message));
});

test("flags: launcher's own and the refused ones are errors, an unknown flag is warned about by the table, a choice is checked", () => {
  const with_ = (args: string): string => TWO.replace(/^args = .*$/m, `args = [${args}]`);
  const rpc = resolved(with_('"--rpc", "10.0.0.9:50052"'));
  assert.match(rpc.errors.join("\n"), /--rpc is managed by launcher/);
  assert.match(resolved(with_('"--host", "0.0.0.0"')).errors.join("\n"), /--host is managed by launcher/);
  assert.match(resolved(with_('"--metrics"')).errors.join("\n"), /--metrics is managed by launcher/);
  assert.match(resolved(with_('"-hf", "org/repo"')).errors.join("\n"), /-hf: it downloads a model at boot/);
  assert.match(resolved(with_('"--models-dir", "/models"')).errors.join("\n"), /router/);
  assert.match(resolved(with_('"--ssl-key-file", "/k"')).errors.join("\n"), /HTTPS only/);
  assert.match(resolved(with_('"-m", "/other.gguf"')).errors.join("\n"), /launcher passes the recipe's model/);
  assert.match(resolved(with_('"--gpu-layerz", "99"')).warnings.join("\n"), /--gpu-layerz is not a flag of launcher's table of llama\.cpp/);
  // common/arg.cpp takes each option only as spelled: no argparse prefix, no value glued to a flag.
  assert.match(resolved(with_('"--alia", "qwen"')).warnings.join("\n"), /--alia is not a flag of launcher's table of llama\.cpp/);
  assert.match(resolved(with_('"-ngl99"')).warnings.join("\n"), /-ngl99 is not a flag/);
  assert.match(resolved(with_('"--por", "9000"')).warnings.join("\n"), /--por is not a flag/, "a prefix of --port is no managed flag either: llama-server would refuse it as unknown");
  assert.match(resolved(with_('"--rope-scaling", "cubic"')).errors.join("\n"), /takes one of none, linear, yarn/);
  assert.deepEqual(resolved(with_('"-fa", "on", "--no-warmup", "--chat-template-kwargs", "\'{\\"x\\": 1}\'"')).errors, []);
});

test("strict recipe: keys and env llama.cpp does not read are errors naming the engine", () => {
  const tp = resolved(TWO.replace("pipeline_parallel_size = 2", "tensor_parallel_size = 2"));
  assert.match(tp.errors.join("\n"), /tensor_parallel_size is not read by llama\.cpp: engine = "llamacpp" ignores it/);
  assert.match(resolved(TWO.replace("args =", 'distributed_backend = "ray"\nargs =')).errors.join("\n"), /distributed_backend is not read by llama\.cpp/);
  const env = resolved(`${TWO}[env]\nVLLM_USE_V1 = "1"\nLLAMA_ARG_N_PARALLEL = "2"\nNCCL_DEBUG = "INFO"\n`);
  assert.equal(env.errors.length, 1, env.errors.join("\n"));
  assert.match(env.errors[0] ?? "", /env VLLM_USE_V1 is read only by vLLM \(VLLM_\*\): engine = "llamacpp" ignores it/);
});

// llama-server's and rpc-server's lines in their order (./src/engine/llamacpp/log-shapes.ts names the source of each).
const HEAD_LOG = [
  "build: 6895 (4341dc8bc) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for aarch64-linux-gnu",
  "main: binding port with default address family",
  "main: HTTP server is listening, hostname: 10.0.0.1, port: 8000, http threads: 19",
  "main: loading model",
  "srv    load_model: loading model '/models/m-00001-of-00003.gguf'",
  "llama_model_load_from_file_impl: using device RPC0 (10.0.0.2:29501) (unknown id) - 119000 MiB free",
  "print_info: file size   = 132.39 GiB (4.87 BPW)",
  "load_tensors: offloaded 95/95 layers to GPU",
  "llama_kv_cache: size = 3072.00 MiB ( 32768 cells,  94 layers,  4/1 seqs), K (f16): 1536.00 MiB, V (f16): 1536.00 MiB",
  "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
  "main: model loaded",
  "main: server is listening on http://10.0.0.1:8000 - starting the main loop",
  "srv  update_slots: all slots are idle",
];

test("the head's log: phases and figures, past init at 'model loaded', ready at 'server is listening' (both spellings of the function)", () => {
  const s = readBoot(llamacpp, HEAD_LOG.slice(0, -2));
  assert.equal(s.phase, "warmup");
  assert.equal(s.pastInit, true);
  assert.equal(s.ready, false);
  assert.equal(s.figures.model_gib, "132.39");
  assert.equal(s.figures.kv_tokens, "32768");
  assert.equal(readBoot(llamacpp, HEAD_LOG).ready, true);
  assert.equal(readBoot(llamacpp, ["srv  llama_server: loading model", "srv  llama_server: model loaded", "srv  llama_server: server is listening on http://0.0.0.0:8000"]).ready, true);
  assert.equal(readBoot(llamacpp, ["srv  llama_server: router server is listening on http://0.0.0.0:8000"]).ready, false, "a router is no model server");
  // --log-timestamps --log-prefix: "0.00.123.456 I " before the message.
  assert.equal(readBoot(llamacpp, ["0.01.002.003 I main: server is listening on http://0.0.0.0:8000 - starting the main loop"]).ready, true);
});

test("a worker's log says only that it runs headless: whether it listens is asked of its port, which the head's start waits for", () => {
  // rpc-server's banner and transport line sit in stdout's pipe buffer until the head connects
  // (ggml-rpc.cpp flushes after "Accepted client connection"): no line of it may gate the head.
  const banner = ["Starting RPC server v3.0.0", "  endpoint       : 10.0.0.2:29501", "  local cache    : n/a", "Devices:", "  CUDA0: NVIDIA GB10 (122502 MiB, 119000 MiB free)"];
  const before = readBoot(llamacpp, banner);
  assert.equal(before.headless, true);
  assert.equal(before.address, "10.0.0.2");
  const after = readBoot(llamacpp, [...banner, "  transport      : TCP"]);
  assert.equal(after.phase, "serving");
  assert.ok(!("listening" in after), "no log line says a worker listens");
  assert.equal(llamacpp.headAwaitsWorkersPort, true);
});

test("failed boots: the loader's own line is the cause, not the lines that repeat it, with a hint", () => {
  const missing = readBoot(llamacpp, [
    "main: loading model",
    "gguf_init_from_file: failed to open GGUF file '/models/m.gguf' (No such file or directory)",
    "llama_model_load: error loading model: llama_model_loader: failed to load model from /models/m.gguf",
    "llama_model_load_from_file_impl: failed to load model",
    "srv    load_model: failed to load model, '/models/m.gguf'",
    "main: exiting due to model loading error",
  ]);
  assert.equal(missing.fatal, "main: exiting due to model loading error");
  assert.match(missing.cause ?? "", /^gguf_init_from_file: failed to open GGUF file/);
  assert.match(llamacpp.hintFor?.(missing.cause, missing.lastLines) ?? "", /GGUF file is not where/);
  const oom = readBoot(llamacpp, ["ggml_backend_cuda_buffer_type_alloc_buffer: allocating 135000.00 MiB on device 0: cudaMalloc failed: out of memory", "alloc_tensor_range: failed to allocate CUDA0 buffer of size 141557760000", "llama_model_load: error loading model: unable to allocate CUDA0 buffer", "main: exiting due to model loading error"]);
  assert.match(oom.cause ?? "", /cudaMalloc failed: out of memory/);
  assert.match(llamacpp.hintFor?.(oom.cause, oom.lastLines) ?? "", /do not fit/);
  const peer = readBoot(llamacpp, ["main: loading model", "/app/ggml/src/ggml-rpc/ggml-rpc.cpp:612: Failed to connect to 10.0.0.2:29501"]);
  assert.ok(peer.fatal);
  assert.equal(peer.causeIsPeerLoss, true);
  assert.equal(peer.peerAddress, "10.0.0.2", "the worker the head could not reach is blamed");
  assert.match(readBoot(llamacpp, ["error: invalid argument: --nope"]).fatal ?? "", /invalid argument/);
});

test("llama-server's /metrics (--metrics) read for the live view and drain", () => {
  const text = [
    "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.",
    "# TYPE llamacpp:prompt_tokens_total counter",
    "llamacpp:prompt_tokens_total 120",
    "llamacpp:tokens_predicted_total 480",
    "llamacpp:requests_processing 2",
    "llamacpp:requests_deferred 1",
  ].join("\n");
  assert.deepEqual(readEngineSample(text, llamacpp.engineMetrics ?? assert.fail()), { requestsRunning: 2, requestsWaiting: 1, promptTokens: 120, generationTokens: 480 });
  assert.equal(sumGauge(text, llamacpp.runningRequestsMetric), 2);
});

test("an image without rpc-server (llama.cpp's published images have no RPC backend): docker run's own error gets a hint", () => {
  const cause = 'docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/app/rpc-server": stat /app/rpc-server: no such file or directory: unknown.';
  assert.match(llamacpp.hintFor?.(cause, [cause]) ?? "", /no \/app\/rpc-server: .*-DGGML_RPC=ON/);
});

test("a split GGUF is named by its first part: another part is a user error at plan, with the first part's name", () => {
  const r = resolved(TWO.replace("m-00001-of-00003", "m-00002-of-00003"));
  assert.ok(r.recipe);
  assert.throws(
    () => planDeployment(r.recipe as Recipe, cluster("examples/clusters/spark-2x.toml")),
    (e: unknown) => e instanceof UserError && /part 2 of 3 of a split GGUF/.test(e.message) && /m-00001-of-00003\.gguf/.test(e.hint ?? ""),
  );
  const loaded = readBoot(llamacpp, ["llama_model_load: error loading model: illegal split file idx: 1 (file: /models/m-00002-of-00003.gguf), model must be loaded with the first split", "main: exiting due to model loading error"]);
  assert.match(llamacpp.hintFor?.(loaded.cause, loaded.lastLines) ?? "", /first part of a split GGUF/);
});
