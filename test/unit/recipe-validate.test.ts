import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDiagnostic, type Diagnostic } from "../../src/config/diagnostic.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

const FILE = "recipes/bad/recipe.toml";

function check(text: string, gpusPerNode?: number): { errors: string[]; warnings: string[]; all: Diagnostic[] } {
  const r = resolveRecipe("bad", memorySource({ [FILE]: text }), gpusPerNode === undefined ? {} : { gpusPerNode });
  const lines = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: lines("error"), warnings: lines("warning"), all: r.diagnostics };
}

const replaceArgs = (args: string): string => BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);

test("a clean recipe has no findings", () => {
  assert.deepEqual(check(BASE).all, []);
});

test("TOML syntax errors carry the parser's position", () => {
  const { errors } = check('name = "x"\nmodel = [1,\n');
  assert.equal(errors.length, 1);
  assert.match(errors[0] ?? "", /^recipes\/bad\/recipe\.toml:3:1: error: TOML syntax: /);
});

test("an unknown key suggests the nearest known one, at the key's line", () => {
  const { errors } = check(BASE.replace("tensor_parallel_size = 2", "tensor_paralel_size = 2"));
  const unknown = errors.find((e) => e.includes("unknown key"));
  assert.match(unknown ?? "", /recipe\.toml:7:1: error: unknown key "tensor_paralel_size"/);
  assert.match(unknown ?? "", /did you mean "tensor_parallel_size"\?/);
});

test("a wrong type names the key and both types", () => {
  const { errors } = check(BASE.replace("required_nodes = 2", 'required_nodes = "2"'));
  assert.ok(errors.some((e) => /:6:18: error: required_nodes must be a number, not a string/.test(e)), errors.join("\n"));
});

test("a missing required key is an error", () => {
  const { errors } = check(BASE.replace('model = "org/model"\n', ""));
  assert.ok(errors.some((e) => e.includes('missing required key "model"')), errors.join("\n"));
});

test("a [table] header that swallowed args says so", () => {
  const text = `name = "x"\ndocker_image = "i"\nmodel = "m"\n[env]\nA = "1"\nargs = ["--trust-remote-code"]\n`;
  const { errors } = check(text);
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:6:1: error: "args" is inside the \[env\] table \(line 4\): the table header above it swallowed/);
});

test("args swallowed by [[extra_mounts]] is caught too", () => {
  const text = `name = "x"\ndocker_image = "i"\nmodel = "m"\n[[extra_mounts]]\nhost = "/a"\ncontainer = "/b"\nargs = ["--x"]\n`;
  const { errors } = check(text);
  assert.match(errors.join("\n"), /"args" is inside the \[\[extra_mounts\]\] table/);
});

test("unbalanced quotes in an args element point at that element", () => {
  const { errors } = check(replaceArgs(`    "--speculative-config", """\n'{"method":"dspark"}""",`));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:12:29: error: args\[1\]: unbalanced single quote/);
});

test("JSON-shaped values that don't parse name the flag", () => {
  const { errors } = check(replaceArgs(`    "--compilation-config", "'{\\"cudagraph_mode\\": FULL}'",`));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /error: --compilation-config: value is not valid JSON/);
});

test("every launcher-managed flag is refused with the field to use instead", () => {
  const cases: [string, RegExp][] = [
    ['"--host", "0.0.0.0"', /--host is managed by launcher/],
    ['"--port", "8001"', /--port is managed by launcher[\s\S]*api_port/],
    ['"--nnodes", "2"', /--nnodes is managed[\s\S]*required_nodes/],
    ['"--node-rank", "0"', /--node-rank is managed/],
    ['"--master-addr", "10.0.0.1"', /--master-addr is managed[\s\S]*fabric_ip/],
    ['"--master-port", "29501"', /--master-port is managed[\s\S]*master_port/],
    ['"--headless"', /--headless is managed/],
    ['"--tensor-parallel-size", "2"', /--tensor-parallel-size is managed[\s\S]*tensor_parallel_size/],
    ['"-tp", "2"', /-tp is managed[\s\S]*tensor_parallel_size/],
    ['"--pipeline-parallel-size", "1"', /--pipeline-parallel-size is managed[\s\S]*pipeline_parallel_size/],
    ['"-pp", "1"', /-pp is managed[\s\S]*pipeline_parallel_size/],
    ['"--tensor_parallel_size=2"', /--tensor_parallel_size is managed/],
  ];
  for (const [arg, pattern] of cases) {
    const { errors } = check(replaceArgs(`    ${arg},`));
    assert.equal(errors.length, 1, `${arg}: ${errors.join("\n")}`);
    assert.match(errors[0] ?? "", pattern, arg);
  }
});

test("--distributed-executor-backend must agree with distributed_backend", () => {
  const { errors } = check(replaceArgs('    "--distributed-executor-backend", "ray",'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:12:5: error: --distributed-executor-backend ray disagrees with distributed_backend = "mp"/);
});

test("TP x PP must equal nodes x GPUs per node", () => {
  const { errors } = check(BASE.replace("tensor_parallel_size = 2", "tensor_parallel_size = 4"));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:7:24: error: tensor_parallel_size x pipeline_parallel_size = 4 x 1 = 4, but required_nodes x GPUs per node = 2 x 1 = 2/);
  assert.deepEqual(check(BASE.replace("tensor_parallel_size = 2", "tensor_parallel_size = 4"), 2).errors, []);
});

test("decode context parallel size must divide TP", () => {
  const { errors } = check(replaceArgs('    "--decode-context-parallel-size", "3",'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /--decode-context-parallel-size 3 does not divide tensor_parallel_size 2/);
  assert.deepEqual(check(replaceArgs('    "--decode-context-parallel-size", "2",')).errors, []);
});

test("shm_size must be a Docker size", () => {
  const { errors } = check(BASE.replace('shm_size = "32gb"', 'shm_size = "32 gigs"'));
  assert.equal(errors.length, 1);
  assert.match(errors[0] ?? "", /:10:12: error: shm_size "32 gigs" is not a Docker size/);
  for (const ok of ["32gb", "32g", "1024m", "2GiB", "1073741824"]) {
    assert.deepEqual(check(BASE.replace('shm_size = "32gb"', `shm_size = "${ok}"`)).errors, [], ok);
  }
});

test("a mount's container path must be absolute", () => {
  const { errors } = check(`${BASE}\n[[extra_mounts]]\nhost = "~/cache"\ncontainer = "root/.cache"\n`);
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /error: extra_mounts\[0\]\.container "root\/.cache" is not a container path: it is not an absolute path/);
});

test("env values must be strings", () => {
  const { errors } = check(BASE.replace('HF_HUB_OFFLINE = "1"', "HF_HUB_OFFLINE = 1"));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /:17:18: error: env\.HF_HUB_OFFLINE: env values must be strings/);
});

test("fabric env is launcher-managed", () => {
  const { errors } = check(`${BASE}NCCL_SOCKET_IFNAME = "eth0"\n`);
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /env NCCL_SOCKET_IFNAME is managed by launcher/);
});

test("entrypoint is a string or an array of strings", () => {
  assert.match(check(`entrypoint = 3\n${BASE}`).errors.join("\n"), /:1:14: error: entrypoint: entrypoint must be a string or an array of strings/);
  assert.match(check(`entrypoint = ["vllm", 1]\n${BASE}`).errors.join("\n"), /entrypoint/);
  assert.deepEqual(check(`entrypoint = ["vllm", "serve"]\n${BASE}`).errors, []);
  assert.deepEqual(check(`entrypoint = "vllm serve"\n${BASE}`).errors, []);
});

test("all problems of a file are reported together", () => {
  const text = BASE.replace("tensor_parallel_size = 2", "tensor_paralel_size = 2")
    .replace('shm_size = "32gb"', 'shm_size = "lots"')
    .replace('"--enable-prefix-caching",', '"--enable-prefix-caching", "--port", "1",');
  const { errors } = check(text);
  assert.ok(errors.length >= 3, errors.join("\n"));
  assert.ok(errors.some((e) => e.includes("unknown key")));
  assert.ok(errors.some((e) => e.includes("shm_size")));
  assert.ok(errors.some((e) => e.includes("--port is managed")));
});

test("a stray word in args is an error, as vLLM's parser stops on it", () => {
  const r = check(replaceArgs('    "--a", "1", "2",'));
  assert.equal(r.errors.length, 1, r.errors.join("\n"));
  assert.match(r.errors[0] ?? "", /args: "2" is not a flag nor a flag's value/);
});
