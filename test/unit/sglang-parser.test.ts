import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { argparseDumpOf, readArgparseDump, type ArgparseDump } from "../../src/engine/argparse-dump.js";
import { sglang } from "../../src/engine/sglang/adapter.js";
import { SGLANG_DUMP_FIRST_LINE, SGLANG_PARSER_COMMAND } from "../../src/engine/sglang/parser-dump.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";

// SGLang's args judged by the image's own parser (issue 31): the dump program of
// src/engine/sglang/parser-dump.ts, and the practice engine's SGLang persona, which answers it
// from its own option table as a real image answers from server_args.py.

const require = createRequire(import.meta.url);
const persona = require("../../docker-images/practice-engine/lib/sglang/args.js") as { describeSglangParser: (version: string) => unknown };
const entry = require("../../docker-images/practice-engine/lib/sglang/entry.js") as { DUMP_FIRST_LINE: string };

const personaDump = (): ArgparseDump => {
  const r = argparseDumpOf(persona.describeSglangParser("0.5.5"));
  assert.ok(r.ok, r.ok ? "" : r.problem);
  return r.dump;
};

const FILE = "recipes/s/recipe.toml";
const recipe = (args: string): string =>
  `engine = "sglang"\nname = "s"\ndocker_image = "img:local"\nmodel = "org/model"\nrequired_nodes = 2\ntensor_parallel_size = 2\nargs = [${args}]\n`;

/** The recipe's errors and warnings, judged by the image's parser (`dump`) or, without one, by launcher's table. */
function judge(args: string, dump?: ArgparseDump): { errors: string[]; warnings: string[] } {
  const judged = dump === undefined ? undefined : sglang.flagsFrom?.(dump, "practice-engine:local");
  if (dump !== undefined) assert.ok(judged, "the SGLang adapter reads an image's parser");
  const r = resolveRecipe("s", memorySource({ [FILE]: recipe(args) }), judged === undefined ? {} : { flagsFor: () => judged.flags });
  const of = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: of("error"), warnings: of("warning") };
}

test("the practice persona answers the dump program that SGLang's image answers, known by one first line", () => {
  assert.equal(SGLANG_PARSER_COMMAND[0], "python3");
  assert.equal(String(SGLANG_PARSER_COMMAND[2]).split("\n")[0], SGLANG_DUMP_FIRST_LINE);
  assert.equal(entry.DUMP_FIRST_LINE, SGLANG_DUMP_FIRST_LINE);
  assert.ok(sglang.image.parserCommand !== undefined, "up's preflight runs it in the image");
});

test("an image's parser refuses a misspelt or unknown SGLang flag at validate, at its line, naming the flag it is near", () => {
  const { errors } = judge(`"--mem-fraction-statc", "0.5", "--enable-quantum-decoding"`, personaDump());
  assert.equal(errors.length, 2, errors.join("\n"));
  assert.match(errors[0] ?? "", /^recipes\/s\/recipe\.toml:7:\d+: error: --mem-fraction-statc is not a flag of SGLang 0\.5\.5 in image practice-engine:local: its parser stops with "unrecognized arguments"/);
  assert.match(errors[0] ?? "", /did you mean --mem-fraction-static\?/);
  assert.match(errors[1] ?? "", /--enable-quantum-decoding is not a flag of SGLang 0\.5\.5/);
  // The same args under launcher's table (no image): left to the image's parser at up.
  assert.deepEqual(judge(`"--mem-fraction-statc", "0.5"`).errors, []);
});

test("an image's parser keeps launcher's policy: managed flags by every prefix, vLLM's spellings, the key's prefixes, choices and on/off prefixes", () => {
  const dump = personaDump();
  const cases: [string, RegExp][] = [
    [`"--tp", "2"`, /--tp is managed by launcher .*tensor_parallel_size/s],
    [`"--tensor-parallel", "2"`, /--tensor-parallel abbreviates --tensor-parallel-size, which launcher manages/],
    [`"--node-r", "1"`, /--node-r abbreviates --node-rank, which launcher manages/],
    [`"--max-model-len", "4096"`, /--max-model-len: SGLang has no --max-model-len \(vLLM's\).*--context-length/s],
    [`"--dtype", "fp9"`, /--dtype fp9: takes one of auto, half, float16, bfloat16, float, float32/],
    [`"--enable-metrics"`, /--enable-metrics is managed by launcher/],
  ];
  for (const [args, re] of cases) {
    const { errors } = judge(args, dump);
    assert.ok(errors.some((e) => re.test(e)), `${args}:\n${errors.join("\n")}`);
  }
  // A unique prefix of an on/off flag is that flag: it takes no value, so the next flag is read as one.
  assert.deepEqual(judge(`"--trust-remote", "--mem-fraction-static", "0.5", "--served-model-name", "m"`, dump).errors, []);
  // A spelling of --api-key only the image has (a fork's `-k`): launcher's plan, made by its table,
  // would leave the key in SGLang's argv. The key's prefixes (`--api-k`) are the table's own.
  const keyed: ArgparseDump = { ...dump, actions: dump.actions.map((a) => (a.dest === "api_key" ? { ...a, option_strings: [...a.option_strings, "-k"] } : a)) };
  assert.ok(judge(`"-k", "secret"`, keyed).errors.some((e) => /-k: it is a spelling of --api-key that launcher's plan does not know/.test(e)));
  assert.deepEqual(judge(`"--api-k", "secret"`, dump).errors, []);
  // A vLLM spelling that an image's parser has (a fork that took it) is its flag, not refused.
  const fork: ArgparseDump = { ...dump, actions: [...dump.actions, { option_strings: ["--max-model-len"], dest: "max_model_len", action: "_StoreAction", nargs: null, const: null, default: null, type: ["int"], choices: null }] };
  assert.deepEqual(judge(`"--max-model-len", "4096"`, fork).errors, []);
});

test("the dump program, run by Python over a stand-in sglang package, prints what launcher reads", (t) => {
  if (spawnSync("python3", ["--version"]).status !== 0) return t.skip("python3 is not installed (scripts/install-deps installs it)");
  const root = mkdtempSync(path.join(tmpdir(), "launcher-sglang-dump-"));
  try {
    mkdirSync(path.join(root, "sglang/srt"), { recursive: true });
    writeFileSync(path.join(root, "sglang/__init__.py"), '__version__ = "0.5.99"\nprint("[2026-01-01 00:00:00] stand-in sglang imported")\n');
    writeFileSync(path.join(root, "sglang/srt/__init__.py"), "");
    // No sglang/srt/plugins.py: an older SGLang without plugins is no error.
    writeFileSync(
      path.join(root, "sglang/srt/server_args.py"),
      [
        "import argparse, json",
        "class ServerArgs:",
        "    @staticmethod",
        "    def add_cli_args(p):",
        "        p.add_argument('--model-path', '--model', type=str, required=True)",
        "        p.add_argument('--mem-fraction-static', type=float, default=None)",
        "        p.add_argument('--tp-size', '--tensor-parallel-size', type=int, default=1)",
        "        p.add_argument('--trust-remote-code', action='store_true')",
        "        p.add_argument('--cuda-graph-bs', type=int, nargs='+')",
        "        p.add_argument('--dtype', type=str, default='auto', choices=['auto', 'half', 'bfloat16'])",
        "        p.add_argument('--json-model-override-args', type=str, default='{}')",
        "        p.add_argument('--model-loader-extra-config', type=json.loads, default={})",
      ].join("\n"),
    );
    const [python, ...args] = SGLANG_PARSER_COMMAND as [string, ...string[]];
    const r = spawnSync(python, args, { env: { ...process.env, PYTHONPATH: root }, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const read = readArgparseDump(r.stdout);
    assert.ok(read.ok, read.ok ? "" : read.problem);
    assert.equal(read.dump.engine_version, "0.5.99");
    assert.equal(read.dump.allow_abbrev, true);
    const judged = sglang.flagsFrom?.(read.dump, "standin:1");
    assert.ok(judged);
    const f = judged.flags;
    assert.deepEqual(f.judge, { by: "image", engine: "SGLang", version: "0.5.99", image: "standin:1" });
    assert.ok((f.known ?? []).includes("--mem-fraction-static") && (f.known ?? []).includes("--model"));
    assert.ok(f.boolean.includes("--trust-remote-code") && f.many.includes("--cuda-graph-bs"));
    assert.ok(f.json.includes("--model-loader-extra-config") && f.json.includes("--json-model-override-args"));
    assert.deepEqual(f.choices?.find((c) => c.flags.includes("--dtype"))?.values, ["auto", "half", "bfloat16"]);
    // SGLang's default share is None in its parser (computed at start): no default is taken from it.
    assert.equal(judged.defaultUtilization, undefined);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a variant that names no engine holds its parent's engine's flags: an SGLang parent's variant is judged as SGLang", () => {
  const files = {
    [FILE]: recipe(`"--context-length", "4096"`),
    "recipes/v/recipe.toml": `extends = "s"\nargs = ["--context-length", "8192", "--max-model-len", "8192", "--trust-remote-code", "--mem-fraction-static", "0.5"]\n`,
  };
  const r = resolveRecipe("v", memorySource(files));
  const shown = r.diagnostics.map(formatDiagnostic);
  // vLLM's spelling refused at the variant's line; SGLang's own flags neither refused nor warned about as vLLM's.
  assert.ok(shown.some((d) => /^recipes\/v\/recipe\.toml:2:\d+: error: --max-model-len: SGLang has no --max-model-len/.test(d)), shown.join("\n"));
  assert.deepEqual(shown.filter((d) => /vLLM 0\.\d+/.test(d)), [], "not read by vLLM's table");
  assert.equal(shown.filter((d) => / error: /.test(d)).length, 1, shown.join("\n"));
});
