// Regenerates launcher's table of vLLM's flags (src/engine/vllm/parser-table.json), which judges a
// recipe's args where no image's own parser was read, from vLLM's own parser:
//   node --import tsx scripts/vllm-parser-table.ts --image IMAGE     a vLLM image on this machine's docker
//   node --import tsx scripts/vllm-parser-table.ts --source DIR      a vLLM source tree (its Python deps installed)
//   node --import tsx scripts/vllm-parser-table.ts --dump FILE       what the dump program printed elsewhere
// Each runs (or read the output of) the dump program launcher runs in an image in up's preflight
// (src/engine/vllm/parser-dump.ts); --out writes elsewhere. Review the diff before committing it.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { formatArgparseDump, readArgparseDump } from "../src/engine/argparse-dump.js";
import { VLLM_PARSER_COMMAND } from "../src/engine/vllm/parser-dump.js";

const { values } = parseArgs({ options: { image: { type: "string" }, source: { type: "string" }, dump: { type: "string" }, out: { type: "string", default: "src/engine/vllm/parser-table.json" } } });
const given = (["image", "source", "dump"] as const).filter((k) => values[k] !== undefined);
if (given.length !== 1) {
  process.stderr.write("usage: node --import tsx scripts/vllm-parser-table.ts (--image IMAGE | --source DIR | --dump FILE) [--out FILE]\n");
  process.exit(2);
}
const [python, ...program] = VLLM_PARSER_COMMAND as [string, ...string[]];

/** The dump program's output, and where it came from (the table file says so). */
function run(): { output: string; source: string } {
  if (values.dump !== undefined) return { output: readFileSync(values.dump, "utf8"), source: `the parser dump ${path.basename(values.dump)}` };
  const [cmd, args, env, source] =
    values.image !== undefined
      ? ["docker", ["run", "--rm", "--network", "none", "--entrypoint", python, "--", values.image, ...program], process.env, `image ${values.image}`]
      : [python, program, { ...process.env, PYTHONPATH: path.resolve(values.source ?? ".") }, `the vLLM tree ${path.basename(path.resolve(values.source ?? "."))}`];
  const r = spawnSync(cmd, args, { env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, timeout: 600_000 });
  if (r.status !== 0) {
    process.stderr.write(`${cmd} ${args.slice(0, 6).join(" ")} ... exited ${r.status ?? r.signal}:\n${(r.stderr ?? "").split("\n").slice(-15).join("\n")}\n`);
    process.exit(1);
  }
  return { output: r.stdout, source };
}

const { output, source } = run();
const read = readArgparseDump(output);
if (!read.ok) {
  process.stderr.write(`${read.problem}\n`);
  process.exit(1);
}
const day = new Date().toISOString().slice(0, 10);
writeFileSync(values.out, formatArgparseDump(read.dump, `vllm serve's parser of vLLM ${read.dump.engine_version}, dumped from ${source} on ${day} by scripts/vllm-parser-table.ts`));
process.stdout.write(`${values.out}: vLLM ${read.dump.engine_version}, ${read.dump.actions.length} actions (Python ${read.dump.python ?? "?"})\n`);
