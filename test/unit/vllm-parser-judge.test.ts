import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { decodeArgparseDump, formatArgparseDump, readArgparseDump, DUMP_SENTINEL, type ArgparseAction, type ArgparseDump } from "../../src/engine/argparse-dump.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { vllmImage } from "../../src/engine/vllm/image.js";
import { VLLM_PARSER_COMMAND } from "../../src/engine/vllm/parser-dump.js";
import { vllmFlags, vllmTableUtilization } from "../../src/engine/vllm/flags.js";
import { fitDeployment } from "../../src/memory/fit.js";
import { matchOption } from "../../src/recipe/args.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

// The image's own vLLM parser as the judge of a recipe's args (issue 28). The dumps here are made
// from launcher's table (src/engine/vllm/parser-table.json, vLLM 0.25.1) the way two vLLM versions
// and a fork differ: stand-ins for dumps read from real images, which this machine does not have.

const TABLE_FILE = "src/engine/vllm/parser-table.json";
const table = (): ArgparseDump => {
  const r = decodeArgparseDump(readFileSync(TABLE_FILE, "utf8"));
  assert.ok(r.ok, r.ok ? "" : r.problem);
  return r.dump;
};
const action = (strings: string[], extra: Partial<ArgparseAction> = {}): ArgparseAction => ({
  option_strings: strings, dest: (strings[0] ?? "x").replace(/^-+/, "").replace(/-/g, "_"), action: "_StoreAction", nargs: null, const: null, default: null, type: ["str"], choices: null, ...extra,
});
/** `base` without the actions having any of `drop`, with `add`, as vLLM `version` prints it. */
function variant(base: ArgparseDump, version: string, drop: readonly string[], add: readonly ArgparseAction[] = []): ArgparseDump {
  const kept = base.actions.filter((a) => !a.option_strings.some((s) => drop.includes(s)));
  return { ...base, engine_version: version, actions: [...kept, ...add] };
}
// Early 2026: no -sc/-dc shorthands, no --moe-backend; the newest: --moe-backend with upstream's
// choices; a fork: the same with its own kernel b12x.
const EARLY = variant(table(), "0.14.0", ["-sc", "-dc", "-dpm", "--moe-backend"]);
const NEWEST = variant(table(), "0.31.0", ["--moe-backend"], [action(["--moe-backend"], { choices: ["auto", "triton", "flashinfer_cutlass"] })]);
const FORK = variant(table(), "0.31.0+fork", ["--moe-backend"], [action(["--moe-backend"], { choices: ["auto", "triton", "flashinfer_cutlass", "b12x"] })]);

const FILE = "recipes/fork/recipe.toml";
const RECIPE = BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n  "--served-model-name", "m",\n  "-sc", '{"method": "mtp", "num_speculative_tokens": 2}',\n  "--moe-backend", "b12x",\n]`);
const judgeBy = (dump: ArgparseDump, image: string): string[] => {
  const judged = vllm.flagsFrom?.(dump, image);
  assert.ok(judged);
  const r = resolveRecipe("fork", memorySource({ [FILE]: RECIPE }), { flagsFor: () => judged.flags });
  return r.diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
};

test("the same recipe passes against the fork's parser and fails against two vLLM versions, at the flag's line", () => {
  assert.deepEqual(judgeBy(FORK, "fork:1"), []);
  const early = judgeBy(EARLY, "early:1");
  assert.equal(early.length, 2, early.join("\n"));
  assert.match(early[0] ?? "", /^recipes\/fork\/recipe\.toml:13:3: error: -sc is not a flag of vLLM 0\.14\.0 in image early:1: its parser stops with "unrecognized arguments"/);
  assert.match(early[1] ?? "", /^recipes\/fork\/recipe\.toml:14:3: error: --moe-backend is not a flag of vLLM 0\.14\.0 in image early:1/);
  const newest = judgeBy(NEWEST, "newest:1");
  assert.equal(newest.length, 1, newest.join("\n"));
  assert.match(newest[0] ?? "", /^recipes\/fork\/recipe\.toml:14:20: error: --moe-backend b12x: takes one of auto, triton, flashinfer_cutlass/);
});

test("judged by the table, a flag the table lacks is a warning that says the image decides", () => {
  const r = resolveRecipe("fork", memorySource({ [FILE]: RECIPE.replace('"--moe-backend", "b12x"', '"--moe-kernel", "b12x"') }));
  const warnings = r.diagnostics.filter((d) => d.severity === "warning").map(formatDiagnostic);
  assert.deepEqual(r.diagnostics.filter((d) => d.severity === "error"), []);
  assert.match(warnings.join("\n"), /--moe-kernel is not a flag of launcher's table of vLLM 0\.25\.1; the image's own parser judges it when up runs/);
});

test("each spelling of a flag is read by the judge's options: a prefix unique in one parser is ambiguous in another", () => {
  const known = ["--served-model-name", "--api-key", "--enable-lora", "--enable-log-requests", "-dp", "-dpn", "-n", "--compilation-config", "-cc"];
  assert.deepEqual(matchOption("--served-model", known), { kind: "known", option: "--served-model-name" });
  assert.deepEqual(matchOption("--served_model", known), { kind: "known", option: "--served-model-name" });
  assert.deepEqual(matchOption("--enable-lo", known), { kind: "ambiguous", candidates: ["--enable-lora", "--enable-log-requests"] });
  assert.deepEqual(matchOption("-dp", known), { kind: "known", option: "-dp" }, "an exact match wins over -dpn");
  assert.deepEqual(matchOption("-n2", known), { kind: "known", option: "-n" }, "a value attached to a one-letter option");
  assert.deepEqual(matchOption("-cc.mode", known), { kind: "known", option: "-cc" }, "vLLM's dotted form is its flag's");
  assert.deepEqual(matchOption("--compilation.mode", known), { kind: "known", option: "--compilation-config" });
  assert.deepEqual(matchOption("--api-kye", known), { kind: "unknown", nearest: "--api-key" });
  // The key flag is understood under a prefix only the image's options make unique.
  const withKeyFile = vllm.flagsFrom?.(variant(table(), "0.31.0", [], [action(["--api-key-file"])]), "k:1");
  assert.ok(withKeyFile);
  assert.ok(vllmFlags().apiKey.flags.includes("--api-ke"));
  assert.ok(!withKeyFile.flags.apiKey.flags.includes("--api-ke"), "--api-ke is ambiguous once the image has --api-key-file");
});

test("defaults and floors come from the image's parser: the memory default, and --nnodes for multi-node mp", () => {
  assert.equal(vllmTableUtilization(), 0.92);
  const lower = variant(table(), "0.31.0", ["--gpu-memory-utilization"], [action(["--gpu-memory-utilization"], { type: ["float"], default: 0.85 })]);
  assert.equal(vllm.flagsFrom?.(lower, "x")?.defaultUtilization, 0.85);
  const recipe = { engine: "vllm", args: [], tensor_parallel_size: 1, pipeline_parallel_size: 1, shm_size: "1g" } as const;
  const ask = fitDeployment(recipe, [], 0.85).ask;
  assert.deepEqual(ask, { kind: "utilization", fraction: 0.85, source: "--gpu-memory-utilization 0.85 (the engine's default)" });
  const noNnodes = variant(table(), "0.11.1", ["--nnodes"]);
  const use = { backend: "mp" } as const;
  assert.match(vllmImage.problems("old:1", { entrypoint: ["vllm", "serve"], version: "0.11.1", parser: noNnodes }, use).join("\n"), /has vLLM 0\.11\.1, whose vllm serve has no --nnodes \(its own parser says so\)/);
  assert.deepEqual(vllmImage.problems("rc:1", { entrypoint: ["vllm", "serve"], version: "0.11.1rc3", parser: table() }, use), [], "the parser has --nnodes: a release candidate that has it is fine");
  assert.match(vllmImage.problems("rc:1", { entrypoint: ["vllm", "serve"], version: "0.11.1rc3" }, use).join("\n"), /older than 0\.11\.1/, "without a parser, a release candidate is older than its release");
});

test("a dump is read after its sentinel from untrusted output, bounded, never quoting what it refuses", () => {
  const json = JSON.stringify(table());
  const ok = readArgparseDump(`INFO 12-05 01:00:00 [__init__.py:216] Automatically detected platform cpu.\n${DUMP_SENTINEL}\n${json}\nstderr: a warning\n`);
  assert.ok(ok.ok && ok.dump.actions.length > 200);
  assert.deepEqual(readArgparseDump("Traceback (most recent call last):\nImportError: no vllm\n"), { ok: false, problem: "the dump program printed no parser description" });
  assert.deepEqual(readArgparseDump(`${DUMP_SENTINEL}\n{"format": 1, "actions": "$(rm -rf /)"}`), { ok: false, problem: "the parser description does not have format 1 (at engine_version: invalid_type)" });
  assert.equal(readArgparseDump(`${DUMP_SENTINEL}\n${"x".repeat(5 * 1024 * 1024)}`).ok, false);
});

test("the table file is a dump as the regeneration script writes it (one action a line)", () => {
  const text = readFileSync(TABLE_FILE, "utf8");
  const dump = table();
  assert.equal(formatArgparseDump(dump, dump.source ?? ""), text);
  assert.equal(dump.engine_version, vllmFlags().judge?.version);
});

// The dump program run by CPython itself against a stand-in `vllm` package (not vLLM: its
// make_arg_parser adds options of each kind the way vllm/engine/arg_utils.py does), so that
// what the real program prints is what readArgparseDump and the classification read.
test("the dump program, run by Python over a stand-in vllm package, prints what launcher reads", (t) => {
  if (spawnSync("python3", ["--version"]).status !== 0) return t.skip("python3 is not installed (scripts/install-deps installs it)");
  const root = mkdtempSync(path.join(tmpdir(), "launcher-dump-"));
  try {
    for (const d of ["vllm/entrypoints/openai", "vllm/utils"]) mkdirSync(path.join(root, d), { recursive: true });
    writeFileSync(path.join(root, "vllm/__init__.py"), '__version__ = "0.99.0"\nprint("INFO stand-in vllm imported")\n');
    writeFileSync(path.join(root, "vllm/entrypoints/__init__.py"), "");
    writeFileSync(path.join(root, "vllm/entrypoints/openai/__init__.py"), "");
    writeFileSync(path.join(root, "vllm/utils/__init__.py"), "import argparse\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n    pass\n");
    writeFileSync(
      path.join(root, "vllm/entrypoints/openai/cli_args.py"),
      [
        "import argparse, json",
        "def optional_type(return_type):",
        "    def _optional_type(val):",
        "        return None if val in ('', 'None') else return_type(val)",
        "    return _optional_type",
        "def union_dict_and_str(val):",
        "    return json.loads(val) if val.startswith('{') else val",
        "def make_arg_parser(p):",
        "    p.add_argument('model_tag', nargs='?')",
        "    p.add_argument('--headless', action='store_true')",
        "    p.add_argument('--enable-prefix-caching', action=argparse.BooleanOptionalAction)",
        "    p.add_argument('--served-model-name', nargs='+', type=str)",
        "    p.add_argument('--speculative-config', '-sc', type=optional_type(json.loads))",
        "    p.add_argument('--hf-overrides', type=union_dict_and_str)",
        "    p.add_argument('--gpu-memory-utilization', type=float, default=0.92)",
        "    p.add_argument('--moe-backend', choices=['triton', 'b12x'], default=float('nan'))",
        "    p.add_argument('--nnodes', '-n', type=int, default=1)",
        "    return p",
      ].join("\n"),
    );
    const [python, ...args] = VLLM_PARSER_COMMAND as [string, ...string[]];
    const r = spawnSync(python, args, { env: { ...process.env, PYTHONPATH: root }, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const read = readArgparseDump(r.stdout);
    assert.ok(read.ok, read.ok ? "" : read.problem);
    assert.equal(read.dump.engine_version, "0.99.0");
    const judged = vllm.flagsFrom?.(read.dump, "standin:1");
    assert.ok(judged);
    const f = judged.flags;
    assert.ok(f.boolean.includes("--headless") && f.boolean.includes("--no-enable-prefix-caching"));
    assert.ok(!(f.known ?? []).includes("--no-headless"), "store_true has no --no- twin");
    assert.ok(f.many.includes("--served-model-name") && f.json.includes("-sc") && f.jsonWhenBraced.includes("--hf-overrides"));
    assert.deepEqual(f.choices?.find((c) => c.flags.includes("--moe-backend"))?.values, ["triton", "b12x"]);
    assert.equal(judged.defaultUtilization, 0.92);
    assert.ok(read.dump.actions.some((a) => a.option_strings.includes("--moe-backend") && a.default === "nan"), "a default JSON cannot hold is its repr()");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("diff compares an alias or a prefix as its flag: -sc and --speculative-config are one flag", async () => {
  const { diffRecipes } = await import("../../src/recipe/diff.js");
  const read = (args: string): NonNullable<ReturnType<typeof resolveRecipe>["recipe"]> => {
    const r = resolveRecipe("fork", memorySource({ [FILE]: BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`) }));
    assert.ok(r.recipe, r.diagnostics.map(formatDiagnostic).join("\n"));
    return r.recipe;
  };
  const a = read(`  "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}',`);
  const b = read(`  "-sc", '{"num_speculative_tokens": 3, "method": "mtp"}',`);
  assert.deepEqual(diffRecipes(a, b).filter((c) => c.section === "args"), [{ section: "args", key: "--speculative-config.num_speculative_tokens", a: "2", b: "3" }]);
});

test("flags that leave no HTTP API to wait for are refused with the reason: -asc 0, TLS", () => {
  const one = (args: string): string[] => {
    const text = BASE.replace("required_nodes = 2", "required_nodes = 1").replace("tensor_parallel_size = 2", "tensor_parallel_size = 1").replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);
    return resolveRecipe("fork", memorySource({ [FILE]: text })).diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
  };
  assert.match(one('  "-asc", "0",').join("\n"), /:12:11: error: -asc 0: fewer than 1 API server runs the engine headless, with no HTTP API/);
  assert.match(one('  "--api-server-count=0",').join("\n"), /--api-server-count 0: fewer than 1 API server/);
  assert.deepEqual(one('  "-asc", "2",'), []);
  assert.match(one('  "--ssl-keyfile", "/k.pem", "--ssl-certfile", "/c.pem",').join("\n"), /--ssl-keyfile: vLLM then serves HTTPS only/);
  assert.match(one('  "--ssl-cert", "/c.pem",').join("\n"), /--ssl-cert abbreviates --ssl-cert-reqs or --ssl-certfile, which launcher refuses: vLLM then serves HTTPS only/);
});

test("a review's cases: single-dash prefixes, an image's own aliases, typed choices, removed flags an image still has, -O without levels", () => {
  const one = (args: string, dump?: ArgparseDump): string[] => {
    const text = BASE.replace("required_nodes = 2", "required_nodes = 1").replace("tensor_parallel_size = 2", "tensor_parallel_size = 1").replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`);
    const judged = dump === undefined ? undefined : vllm.flagsFrom?.(dump, "img:1")?.flags;
    const r = resolveRecipe("fork", memorySource({ [FILE]: text }), judged === undefined ? {} : { flagsFor: () => judged });
    return r.diagnostics.map(formatDiagnostic);
  };
  // CPython's _get_option_tuples matches single-dash prefixes too: `-as` is `-asc`.
  assert.match(one('  "-as", "0",').join("\n"), /-as 0: fewer than 1 API server/);
  assert.match(one('  "-h",').join("\n"), /-h: vLLM then prints its help and exits/);
  // A fork whose --api-key also answers to -k: the key flag, refused as launcher cannot carry it... as the key.
  const withK = variant(table(), "0.31.0", ["--api-key"], [action(["--api-key", "-k"], { nargs: "+" })]);
  assert.ok(vllm.flagsFrom?.(withK, "k:1")?.flags.apiKey.flags.includes("-k"));
  assert.match(one('  "-k", "sk-secret",', withK).join("\n"), /-k: it is this image's own spelling of --api-key/);
  assert.deepEqual(one('  "--api-key", "sk-secret",', withK).filter((d) => d.includes("error")), []);
  // A choice after a type that rewrites the value is the engine's to check, not launcher's.
  const lowered = variant(table(), "0.31.0", ["--moe-backend"], [action(["--moe-backend"], { type: ["<lambda>"], choices: ["flashinfer_cutlass", "b12x"] })]);
  assert.deepEqual(one('  "--moe-backend", "B12X",', lowered).filter((d) => d.includes("error")), []);
  // --disable-log-requests is refused as removed only by a parser without it.
  assert.match(one('  "--disable-log-requests",').join("\n"), /vLLM removed it/);
  const older = variant(table(), "0.11.2", [], [action(["--disable-log-requests"], { action: "_StoreTrueAction", nargs: 0, type: null })]);
  assert.deepEqual(one('  "--disable-log-requests",', older).filter((d) => d.includes("error")), []);
  // Before --optimization-level, -O was --compilation-config's alias: JSON, not a level.
  const noLevels = variant(table(), "0.10.0", ["--optimization-level", "-cc"], [action(["--compilation-config", "-O"], { type: ["parse_dataclass"] })]);
  assert.deepEqual(one(`  "-O", '{"level": 3}',`, noLevels).filter((d) => d.includes("error")), []);
  assert.match(one(`  "-O", '{"level": 3}',`).join("\n"), /takes one of 0, 1, 2, 3/);
  // Given twice under two spellings; +0 is 0 to Python's int.
  assert.match(one(`  "--speculative-config", '{"method": "mtp"}', "-sc", '{"method": "mtp"}',`).join("\n"), /-sc is given twice/);
  assert.match(one('  "-asc", "+0",').join("\n"), /-asc \+0: fewer than 1 API server/);
});

test("diff keeps a dotted key apart: -cc.mode and -cc.backend are two values", async () => {
  const { diffRecipes } = await import("../../src/recipe/diff.js");
  const read = (args: string): NonNullable<ReturnType<typeof resolveRecipe>["recipe"]> => {
    const r = resolveRecipe("fork", memorySource({ [FILE]: BASE.replace(/args = \[[\s\S]*?\n\]/, `args = [\n${args}\n]`) }));
    assert.ok(r.recipe);
    return r.recipe;
  };
  assert.deepEqual(
    diffRecipes(read('  "-cc.mode", "3",'), read('  "-cc.backend", "3",')).filter((c) => c.section === "args").map((c) => c.key).sort(),
    ["--compilation-config.backend", "--compilation-config.mode"],
  );
});

test("container output is bounded while it is read, and a dump's words that reach messages are plain", async () => {
  const { runLocal } = await import("../../src/remote/transport.js");
  const r = await runLocal("sh", ["-c", "yes | head -c 100000"], { maxChars: 1000, timeoutMs: 30_000 });
  assert.equal(r.code, 124);
  assert.ok(r.stdout.length <= 1000);
  assert.match(r.stderr, /the output passed 1000 characters; the command was stopped/);
  const hostile = { ...table(), engine_version: "0.31.0\u001b[2J\nfake: line" };
  assert.deepEqual(readArgparseDump(`${DUMP_SENTINEL}\n${JSON.stringify(hostile)}`), { ok: false, problem: "the parser description does not have format 1 (at engine_version: invalid_format)" });
  const choice = variant(table(), "0.31.0", [], [action(["--x"], { choices: ["ok", "bad\u001b[31m"] })]);
  assert.equal(readArgparseDump(`${DUMP_SENTINEL}\n${JSON.stringify(choice)}`).ok, false);
});

test("validate --image: a docker that is missing or does not answer is said so, not taken for a missing image", async () => {
  const { judgeByImage } = await import("../../src/app/image-judge.js");
  const { SshDocker } = await import("../../src/remote/docker.js");
  const { localTransport } = await import("../../src/remote/local.js");
  const t = localTransport("this machine");
  const missing = new SshDocker({ ...t, exec: (argv, o) => t.exec(["launcher-no-such-docker", ...argv.slice(1)], o) });
  assert.deepEqual(await judgeByImage("img:1", "vllm", missing), { ok: false, problem: "there is no docker command on this machine" });
  const down = new SshDocker({ ...t, exec: (argv, o) => t.exec(["sh", "-c", "echo 'Cannot connect to the Docker daemon' >&2; exit 1", ...argv.slice(1)], o) });
  const r = await judgeByImage("img:1", "vllm", down);
  assert.ok(!r.ok && /^docker on this machine does not answer: docker version failed \(exit 1\)/.test(r.problem), JSON.stringify(r));
});
