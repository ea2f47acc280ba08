import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { vllmFlags } from "../../src/engine/vllm/flags.js";
import { apiKeyOf, flagKey, flagsOfWords } from "../../src/recipe/args.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

// Flags as vLLM's parser reads them: vllm/engine/arg_utils.py (EngineArgs.add_cli_args),
// vllm/entrypoints/openai/cli_args.py (make_arg_parser, FrontendArgs),
// vllm/utils/argparse_utils.py (FlexibleArgumentParser), vllm/config/parallel.py (world size).

const FILE = "recipes/bad/recipe.toml";

function resolve(text: string): { errors: string[]; warnings: string[]; args?: readonly string[] } {
  const r = resolveRecipe("bad", memorySource({ [FILE]: text }));
  const lines = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: lines("error"), warnings: lines("warning"), ...(r.recipe === undefined ? {} : { args: r.recipe.args }) };
}

const withArgs = (args: string, base = BASE): string => base.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);

test("every alias vLLM defines for a managed flag is refused, and so is an abbreviation argparse would expand", () => {
  const cases: [string, RegExp][] = [
    ['"-n", "2"', /-n is managed by launcher[\s\S]*required_nodes/],
    ['"-r", "1"', /-r is managed by launcher[\s\S]*rank/],
    ['"-tp", "2"', /-tp is managed by launcher[\s\S]*tensor_parallel_size/],
    ['"-pp", "1"', /-pp is managed by launcher[\s\S]*pipeline_parallel_size/],
    ['"--node_rank", "1"', /--node_rank is managed by launcher/],
    ['"-n=2"', /-n is managed by launcher/],
    ['"--nnode", "2"', /--nnode abbreviates --nnodes, which launcher manages/],
    ['"--master", "x"', /--master abbreviates --master-addr or --master-port/],
  ];
  for (const [args, expected] of cases) {
    const { errors } = resolve(withArgs(`    ${args},`));
    assert.equal(errors.length, 1, `${args}: ${errors.join("\n")}`);
    assert.match(errors[0] ?? "", expected, args);
    assert.match(errors[0] ?? "", /recipe\.toml:12:5: error/, args);
  }
});

test("--uds is refused: vLLM ignores --host/--port with it, so launcher could not reach the engine", () => {
  const { errors } = resolve(withArgs('    "--uds", "/tmp/vllm.sock",'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:12:5: error: --uds is managed by launcher[\s\S]*TCP/);
});

test("--api-server-count on a multi-node deployment is an error naming the line; on one node it is fine", () => {
  for (const spelling of ["--api-server-count", "-asc"]) {
    const { errors } = resolve(withArgs(`    "--served-model-name", "served",\n    "${spelling}", "2",`));
    assert.equal(errors.length, 1, errors.join("\n"));
    assert.match(errors[0] ?? "", new RegExp(`:13:5: error: ${spelling} cannot be used on a multi-node deployment \\(required_nodes = 2\\)`));
  }
  const single = BASE.replace("required_nodes = 2", "required_nodes = 1").replace("tensor_parallel_size = 2", "tensor_parallel_size = 1");
  assert.deepEqual(resolve(withArgs('    "--api-server-count", "2",', single)).errors, []);
});

test("--model in args is an error naming its line and the recipe's model line", () => {
  const { errors } = resolve(withArgs('    "--model", "org/other",'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:12:5: error: --model org\/other: launcher passes the recipe's model "org\/model" \(line 5\)/);
  assert.match(errors[0] ?? "", /set model = "org\/other"/);
});

test("data parallel and prefill context parallel sizes count in the GPUs check", () => {
  const dp = resolve(withArgs('    "--data-parallel-size", "2",'));
  assert.equal(dp.errors.length, 1, dp.errors.join("\n"));
  assert.match(dp.errors[0] ?? "", /:12:5: error: tensor_parallel_size x pipeline_parallel_size x data_parallel_size \(--data-parallel-size\) = 2 x 1 x 2 = 4, but required_nodes x GPUs per node = 2 x 1 = 2/);
  const pcp = resolve(withArgs('    "-pcp", "2",'));
  assert.match(pcp.errors[0] ?? "", /prefill_context_parallel_size \(-pcp\) = 2 x 1 x 2 = 4/);
  // TP 1 x DP 2 fills two nodes.
  const fits = BASE.replace("tensor_parallel_size = 2", "tensor_parallel_size = 1");
  assert.deepEqual(resolve(withArgs('    "-dp", "2",', fits)).errors, []);
  // Decode context parallel reuses the TP ranks: it does not count.
  assert.deepEqual(resolve(withArgs('    "-dcp", "2",')).errors, []);
});

test("an args element that is JSON as written reaches the engine unchanged", () => {
  const json = '{"rope_scaling":{"rope_type":"yarn","factor":4.0},"max_position_embeddings":131072}';
  const { errors, args } = resolve(withArgs(`    "--hf-overrides", '${json}',`));
  assert.deepEqual(errors, []);
  assert.deepEqual(args, ["--hf-overrides", json]);
});

test("an inline Jinja --chat-template is a string, not JSON that fails to parse", () => {
  const template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  // Args are shell words: a value with spaces goes inside single quotes, as JSON does.
  const { errors, args } = resolve(withArgs(`    "--chat-template", "'${template}'",`));
  assert.deepEqual(errors, []);
  assert.deepEqual(args, ["--chat-template", template]);
  // A flag vLLM reads with json.loads still must parse.
  assert.match(resolve(withArgs(`    "--speculative-config", "{% x %}",`)).errors.join("\n"), /--speculative-config: value is not valid JSON/);
  // --hf-overrides is a dict or a string: JSON only when written {...}.
  assert.deepEqual(resolve(withArgs('    "--hf-overrides", "my_module:override",')).errors, []);
});

test("a word after a flag that takes no value is an error, not that flag's value", () => {
  const { errors } = resolve(withArgs('    "--enforce-eager", "yes",'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:12:24: error: args: "yes" follows --enforce-eager, an on\/off flag that takes no value/);
  assert.deepEqual(resolve(withArgs('    "--no-enable-prefix-caching",')).errors, []);
});

test("a # comment inside a multi-line args string is an error", () => {
  const { errors } = resolve(withArgs('    """\n--max-model-len 8192 # the context we need\n""",'));
  assert.ok(errors.length >= 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /args: "#" is a comment written inside an args string/);
  assert.ok(errors.every((e) => /args: /.test(e)), errors.join("\n"));
});

test("a list flag takes every word up to the next flag", () => {
  const flags = flagsOfWords(["--served-model-name", "a", "b", "--api-key", "k1", "k2", "--enforce-eager"], vllmFlags());
  assert.deepEqual(flags.map((f) => [f.name, f.values]), [["--served-model-name", ["a", "b"]], ["--api-key", ["k1", "k2"]], ["--enforce-eager", []]]);
  const { errors } = resolve(withArgs('    "--served-model-name", "served", "alias",'));
  assert.deepEqual(errors, []);
});

test("the API key: --api-key first, then VLLM_API_KEY, as vLLM's build_app reads them", () => {
  assert.equal(apiKeyOf(["--api-key", "from-flag"], { VLLM_API_KEY: "from-env" }, vllmFlags()), "from-flag");
  assert.equal(apiKeyOf(["--api_key=k"], {}, vllmFlags()), "k");
  assert.equal(apiKeyOf(["--enforce-eager"], { VLLM_API_KEY: "from-env" }, vllmFlags()), "from-env");
  assert.equal(apiKeyOf([], { VLLM_API_KEY: "" }, vllmFlags()), undefined);
  assert.equal(apiKeyOf([], {}, vllmFlags()), undefined);
});

test("--config FILE is a warning: the engine reads flags from it that launcher cannot check", () => {
  const { errors, warnings } = resolve(withArgs('    "--config", "/etc/vllm.yaml",'));
  assert.deepEqual(errors, []);
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0] ?? "", /:12:5: warning: --config \/etc\/vllm\.yaml: the engine reads more flags from this file/);
});

test("`_` and `-` are one in a flag's name, not in the JSON key after its first dot", () => {
  assert.equal(flagKey("--max_model_len"), "--max-model-len");
  assert.equal(flagKey("--compilation_config.cudagraph_mode"), "--compilation-config.cudagraph_mode");
  assert.notEqual(flagKey("--compilation-config.cudagraph_mode"), flagKey("--compilation-config.cudagraph-mode"));
});
