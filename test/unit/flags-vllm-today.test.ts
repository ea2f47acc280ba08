import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { vllmFlags } from "../../src/engine/vllm/flags.js";
import { VLLM_TABLE_VERSION } from "../../src/engine/vllm/flags.js";
import { planDeployment } from "../../src/plan/plan.js";
import { planJson, planText } from "../../src/plan/render.js";
import { flagsOfWords } from "../../src/recipe/args.js";
import { diffRecipes, formatChanges } from "../../src/recipe/diff.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

// Issue 28: vLLM's command line as its parser reads it today (the table's release is
// VLLM_TABLE_VERSION): vllm/utils/argparse_utils.py FlexibleArgumentParser (-O, allow_abbrev),
// vllm/engine/arg_utils.py (JSON shorthands, on/off flags, per-rank flags), serve.py (--grpc).
// Each case passed before and fails now, or the reverse; the line:column is the word's.

const FILE = "recipes/r/recipe.toml";

function check(args: string): { errors: string[]; warnings: string[] } {
  const text = BASE.replace(`"--enable-prefix-caching",`, `"--enable-prefix-caching",\n    ${args},`);
  const r = resolveRecipe("r", memorySource({ [FILE]: text }));
  const lines = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: lines("error"), warnings: lines("warning") };
}

/** The one error a recipe gets, which must be at line 15 (the added args line), column `col`. */
function oneError(args: string, col: number): string {
  const { errors } = check(args);
  assert.equal(errors.length, 1, `${args}:\n${errors.join("\n")}`);
  const e = errors[0] ?? "";
  assert.ok(e.startsWith(`${FILE}:15:${col}: error: `), `${args}: ${e}`);
  return e;
}

test("the table names the vLLM release it describes", () => {
  assert.match(VLLM_TABLE_VERSION, /^\d+\.\d+\.\d+$/);
});

test("-O is --optimization-level (0 to 3) in every spelling, not JSON: a JSON value is refused at the value", () => {
  for (const ok of ['"-O3"', '"-O=3"', '"-O", "3"', '"-O 0"', '"--optimization-level", "2"', '"--optimization_level=1"']) {
    assert.deepEqual(check(ok).errors, [], ok);
  }
  // Before: -O was a JSON flag, so both passed as valid JSON.
  assert.match(oneError(`"-O", '{"level":3}'`, 11), /-O \{"level":3\}: takes one of 0, 1, 2, 3[\s\S]*-cc/);
  assert.match(oneError('"-O", "5"', 11), /-O 5: takes one of 0, 1, 2, 3/);
  assert.match(oneError('"-O", "--enforce-eager"', 5), /-O takes one of 0, 1, 2, 3, and none follows it/);
  assert.match(oneError(`"""-O'{"level":3}'"""`, 5), /-O \{"level":3\}: takes one of/);
  // -O3 and -O 3 are the same flag with the same value: given twice, and no difference in diff.
  assert.match(check('"-O3", "-O", "3"').warnings.join("\n"), /-O is given twice/);
});

test("-cc, -ac, -sc and -dc are JSON shorthands: their value must parse", () => {
  for (const flag of ["-cc", "-ac", "-sc", "-dc", "--diffusion-config"]) {
    assert.deepEqual(check(`"${flag}", '{"a": 1}'`).errors, [], flag);
    // Before: not JSON flags, so a broken value passed.
    assert.match(oneError(`"${flag}", "'{a: 1}'"`, 9 + flag.length), new RegExp(`${flag}: value is not valid JSON`), flag);
  }
});

test("diff compares -cc key by key and -O as a level", () => {
  const recipe = (args: string) => {
    const r = resolveRecipe("r", memorySource({ [FILE]: `name = "r"\ndocker_image = "img:local"\nmodel = "org/m"\nargs = [${args}]\n` }));
    assert.ok(r.recipe, JSON.stringify(r.diagnostics));
    return r.recipe;
  };
  const diff = (a: string, b: string): string[] => formatChanges(diffRecipes(recipe(a), recipe(b)));
  assert.deepEqual(diff(`"-cc", '{"mode":3,"cudagraph_mode":"FULL"}'`, `"-cc", '{"cudagraph_mode":"PIECEWISE","mode":3}'`), ['~ args --compilation-config.cudagraph_mode: "FULL" -> "PIECEWISE"']);
  assert.deepEqual(diff(`"-cc", '{"mode":3}'`, `"--compilation-config", '{"mode": 3}'`), [], "an alias is its flag");
  assert.deepEqual(diff('"-O3"', '"-O", "3"'), []);
  assert.deepEqual(diff('"-O3"', '"-O=2"'), ["~ args --optimization-level: 3 -> 2"]);
  assert.deepEqual(diff('"-O3"', '"--optimization-level", "3"'), []);
});

test("a flag vLLM removed is refused with what replaced it", () => {
  assert.match(oneError('"--disable-log-requests"', 5), /--disable-log-requests: vLLM removed it[\s\S]*--enable-log-requests/);
  assert.deepEqual(check('"--enable-log-requests"').errors, []);
});

test("an on/off flag given a value is refused at the value, in either spelling", () => {
  // Before: --enable-cumem-allocator was missing from the table, so `true` passed as its value.
  assert.match(oneError('"--enable-cumem-allocator", "true"', 33), /"true" follows --enable-cumem-allocator, an on\/off flag that takes no value/);
  assert.match(oneError('"--fail-on-environ-validation", "1"', 37), /follows --fail-on-environ-validation/);
  // argparse: "ignored explicit argument 'true'".
  assert.match(oneError('"--enforce-eager=true"', 5), /--enforce-eager=true: --enforce-eager is an on\/off flag and takes no value/);
  assert.match(oneError('"--no-enable-prefix-caching=1"', 5), /takes no value/);
  assert.deepEqual(check('"--enable-cumem-allocator", "--no-enforce-eager"').errors, []);
});

test("a per-rank flag is refused with the reason: every node gets the same args", () => {
  const cases: [string, RegExp][] = [
    ['"--data-parallel-rank", "0"', /--data-parallel-rank: it is one data parallel rank's own/],
    ['"-dpn", "0"', /-dpn: it is one data parallel rank's own/],
    ['"--data-parallel-start-rank", "1"', /--data-parallel-start-rank: it is one node's first data parallel rank/],
    ['"-dpr", "1"', /-dpr: it is one node's first/],
    ['"-dpl", "1"', /-dpl: it is one node's count/],
    ['"--device-ids", "0"', /--device-ids: it names one node's GPUs/],
    ['"-dpm"', /-dpm: it runs a node-local supervisor/],
    ['"--data-parallel-start", "1"', /--data-parallel-start abbreviates --data-parallel-start-rank, which launcher refuses: it is one node's first/],
  ];
  for (const [args, expected] of cases) assert.match(oneError(args, 5), expected, args);
});

test("--grpc is refused in any spelling: readiness over HTTP would be impossible", () => {
  assert.match(oneError('"--grpc"', 5), /--grpc: vLLM then serves gRPC and no HTTP API[\s\S]*GET \/health/);
  assert.match(oneError('"--grp"', 5), /--grp abbreviates --grpc, which launcher refuses/);
});

test("a managed single-letter alias with its value in the same word is refused: -n2 is -n 2", () => {
  assert.match(oneError('"-n2"', 5), /-n is managed by launcher[\s\S]*required_nodes/);
  assert.match(oneError('"-r1"', 5), /-r is managed by launcher/);
  assert.deepEqual(check('"-qfp8"').errors, []);
  assert.deepEqual(flagsOfWords(["-qfp8", "-n2"], vllmFlags()).map((f) => [f.name, f.value]), [["-q", "fp8"], ["-n", "2"]]);
});

test("a unique prefix of a flag is that flag: --served-model names the model, --api-ke is the key and never printed", () => {
  const text = BASE.replace(`"--served-model-name", "served",`, `"--served-model", "qwen3-32b", "--api-ke", "sk-test-28",`);
  const r = resolveRecipe("r", memorySource({ [FILE]: text }));
  assert.ok(r.recipe, r.diagnostics.map(formatDiagnostic).join("\n"));
  const nodes = `[[nodes]]\nname = "a1"\nhost = "h1"\nfabric_ip = "10.9.0.1"\nfabric_iface = "eth1"\n[[nodes]]\nname = "a2"\nhost = "h2"\nfabric_ip = "10.9.0.2"\nfabric_iface = "eth1"\n`;
  const cluster = parseCluster("c.toml", nodes).cluster;
  assert.ok(cluster);
  const p = planDeployment(r.recipe, cluster);
  assert.ok(p.ok, p.ok ? "" : p.diagnostics.map(formatDiagnostic).join("\n"));
  // Before: --served-model was no spelling of the served name, so the model's path was served.
  assert.equal(p.plan.served_model, "qwen3-32b");
  assert.equal(p.plan.api_key, "sk-test-28");
  assert.ok(!planText(p.plan).includes("sk-test-28"), "plan text");
  assert.ok(!JSON.stringify(planJson(p.plan)).includes("sk-test-28"), "plan JSON");
  for (const n of p.plan.nodes) assert.ok(!n.argv.some((a) => a.includes("sk-test-28") || a.startsWith("--api-ke")), n.argv.join(" "));
  // Two values are two names, as for the whole flag (nargs="+").
  assert.deepEqual(flagsOfWords(["--served-model", "a", "b", "--served_mod", "c"], vllmFlags()).map((f) => f.values), [["a", "b"], ["c"]]);
});

test("a prefix is a flag's only when no other option of vLLM starts with it", () => {
  const spelled = (name: string): boolean => vllmFlags().many.includes(name) || vllmFlags().boolean.includes(name) || vllmFlags().json.includes(name);
  // --seed and --served-model-name share --se; --ser is the served name's alone.
  assert.equal(spelled("--se"), false);
  assert.equal(spelled("--ser"), true);
  // --data-parallel-size-local starts with the whole --data-parallel-size: no prefix of it.
  assert.deepEqual(vllmFlags().worldSize[0]?.flags, ["--data-parallel-size", "-dp"]);
  // --enable-prefix-caching's --no- twin: --no-enable-p is its, --no-e is shared.
  assert.equal(vllmFlags().boolean.includes("--enable-prefix-c"), true);
  assert.equal(vllmFlags().boolean.includes("--enable-p"), false, "--enable-prompt-embeds shares it");
  // A managed flag keeps its spellings: managedFlagOf names what its prefix stands for.
  assert.equal(vllmFlags().boolean.includes("--headl"), false);
  assert.match(oneError('"--headl"', 5), /--headl abbreviates --headless, which launcher manages/);
});

test("VLLM_NIC_SELECTION_VARS and VLLM_GPU_NIC_PCIE_MAPPING: a warning naming the managed NCCL/UCX variables they override; one alone is refused", () => {
  const withEnv = (env: string) => {
    const r = resolveRecipe("r", memorySource({ [FILE]: `${BASE}${env}` }));
    const lines = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
    return { errors: lines("error"), warnings: lines("warning") };
  };
  const both = withEnv('VLLM_NIC_SELECTION_VARS = "NCCL_IB_HCA:1,UCX_NET_DEVICES:1,GLOO_X"\nVLLM_GPU_NIC_PCIE_MAPPING = "0000:01:00.0=0000:02:00.0"\n');
  assert.deepEqual(both.errors, []);
  assert.equal(both.warnings.length, 2, both.warnings.join("\n"));
  assert.match(both.warnings[0] ?? "", /recipe\.toml:18:\d+: warning: env VLLM_NIC_SELECTION_VARS: .*in front of each variable it lists: here NCCL_IB_HCA, UCX_NET_DEVICES, which launcher sets per node/);
  assert.match(both.warnings[1] ?? "", /recipe\.toml:19:\d+: warning: env VLLM_GPU_NIC_PCIE_MAPPING: .*NCCL_IB_HCA/);
  const alone = withEnv('VLLM_NIC_SELECTION_VARS = "NCCL_IB_HCA"\n');
  assert.equal(alone.errors.length, 1, alone.errors.join("\n"));
  assert.match(alone.errors[0] ?? "", /recipe\.toml:18:\d+: error: env VLLM_NIC_SELECTION_VARS is set without VLLM_GPU_NIC_PCIE_MAPPING/);
});
