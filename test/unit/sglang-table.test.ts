import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { decodeArgparseDump, type ArgparseDump } from "../../src/engine/argparse-dump.js";
import { sglang } from "../../src/engine/sglang/adapter.js";
import { SGLANG_TABLE_VERSION } from "../../src/engine/sglang/flags.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";

// SGLang's args judged without an image (issue 31): launcher's table of SGLang's parser
// (src/engine/sglang/parser-table.json, reconstructed from server_args.py), which knows every
// option, so a misspelt flag is caught at validate; a warning, since the image may differ.

const TABLE_FILE = "src/engine/sglang/parser-table.json";
const table = (): ArgparseDump => {
  const r = decodeArgparseDump(readFileSync(TABLE_FILE, "utf8"));
  assert.ok(r.ok, r.ok ? "" : r.problem);
  return r.dump;
};

const FILE = "recipes/s/recipe.toml";
const recipe = (args: string): string =>
  `engine = "sglang"\nname = "s"\ndocker_image = "img:local"\nmodel = "org/model"\nrequired_nodes = 2\ntensor_parallel_size = 2\nargs = [${args}]\n`;

function judge(args: string): { errors: string[]; warnings: string[] } {
  const r = resolveRecipe("s", memorySource({ [FILE]: recipe(args) }));
  const of = (sev: string): string[] => r.diagnostics.filter((d) => d.severity === sev).map(formatDiagnostic);
  return { errors: of("error"), warnings: of("warning") };
}

test("without an image, a misspelt SGLang flag is a warning at its line naming the flag it is near", () => {
  const { errors, warnings } = judge(`"--mem-fraction-static", "0.5", "--speculative-num-stesp", "3"`);
  assert.deepEqual(errors, []);
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.match(warnings[0] ?? "", /^recipes\/s\/recipe\.toml:7:\d+: warning: --speculative-num-stesp is not a flag of launcher's table of SGLang main-001067ff; the image's own parser judges it when up runs/);
  assert.match(warnings[0] ?? "", /did you mean --speculative-num-steps\?/);
  // An ambiguous prefix is said too (argparse stops on it).
  assert.match(judge(`"--speculative-draft", "m"`).warnings.join("\n"), /--speculative-draft could stand for .*ambiguous option/);
});

test("without an image, SGLang's own flags pass: values, on/off flags, several values, aliases, deprecated spellings and unique prefixes", () => {
  const args = [
    `"--mem-fraction-static", "0.8"`,
    `"--context-length", "32k"`,
    `"--speculative-algorithm", "EAGLE", "--speculative-draft-model", "org/draft", "--speculative-num-steps", "3"`,
    `"--enable-mixed-chunk"`,
    `"--cuda-graph-bs-decode", "1", "2", "4"`,
    `"--cuda-graph-max-bs", "64"`,
    `"--no-dllm-fdfo"`,
    `"--served-model-name", "m"`,
    `"--kv-cache-dtype=fp8_e4m3"`,
    `"--reasoning-parser", "qwen3"`,
    `"--attention-backend", "a-plugin-backend"`,
    `"--chunked-prefill", "4096"`,
  ].join(", ");
  assert.deepEqual(judge(args), { errors: [], warnings: [] });
  // A choice of SGLang's own is checked; one a plugin may extend is left to the image (above).
  assert.match(judge(`"--kv-cache-dtype", "fp9"`).errors.join("\n"), /--kv-cache-dtype fp9: takes one of auto, fp8_e5m2/);
});

test("launcher's policy holds under the table: managed flags, vLLM's spellings, the key, data parallel on one node", () => {
  const cases: [string, RegExp][] = [
    [`"--tp", "2"`, /--tp is managed by launcher .*tensor_parallel_size/s],
    [`"--node-r", "1"`, /--node-r abbreviates --node-rank, which launcher manages/],
    [`"--max-model-len", "4096"`, /--max-model-len: SGLang has no --max-model-len \(vLLM's\).*--context-length/s],
    [`"--dp", "2"`, /data-parallel replicas on several nodes are separate servers/],
    [`"--enable-metrics"`, /--enable-metrics is managed by launcher/],
  ];
  for (const [args, re] of cases) {
    const { errors } = judge(args);
    assert.ok(errors.some((e) => re.test(e)), `${args}:\n${errors.join("\n")}`);
  }
});

test("the table names its source: SGLang's server_args.py at a commit, and the script that regenerates it", () => {
  const t = table();
  assert.equal(t.engine_version, SGLANG_TABLE_VERSION);
  // Reconstructed from a commit of SGLang's source, or dumped from an image by the script.
  assert.match(t.source ?? "", /sgl-project\/sglang main, commit [0-9a-f]{40} \(server_args\.py|dumped from .* by scripts\/sglang-parser-table\.ts/);
  assert.match(t.source ?? "", /scripts\/sglang-parser-table\.ts/);
  assert.deepEqual(sglang.flags.judge, { by: "table", engine: "SGLang", version: SGLANG_TABLE_VERSION });
  // Hundreds of options, each spelled once.
  const strings = t.actions.flatMap((a) => a.option_strings);
  assert.ok(strings.length > 400, `${strings.length}`);
  assert.equal(new Set(strings).size, strings.length);
});

test("every option the practice engine's SGLang persona reads is in the table, with the same shape", () => {
  const require = createRequire(import.meta.url);
  const persona = require("../../docker-images/practice-engine/lib/sglang/args.js") as { describeSglangParser: (v: string) => ArgparseDump };
  const byString = new Map(table().actions.flatMap((a) => a.option_strings.map((s) => [s, a] as const)));
  for (const a of persona.describeSglangParser("0.5.5").actions) {
    for (const s of a.option_strings) {
      const real = byString.get(s);
      assert.ok(real, `${s}: the persona reads an option SGLang's table has not`);
      assert.equal(real.nargs === 0, a.nargs === 0, `${s}: on/off in one and not the other`);
      assert.ok(a.option_strings.every((o) => real.option_strings.includes(o)), `${s}: the persona's aliases ${a.option_strings.join(", ")} are not SGLang's`);
    }
  }
});
