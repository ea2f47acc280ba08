// The one body of scripts/vllm-parser-table.ts and scripts/sglang-parser-table.ts: run an engine's
// parser dump program (the one up's preflight runs in an image) in an image, a source tree or read a
// saved dump, check it in the dump format and write it as the engine's table.
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { formatArgparseDump, readArgparseDump } from "../src/engine/argparse-dump.js";

export interface TableScript {
  /** The engine as people name it ("vLLM"), and its command as the table names it ("vllm serve"). */
  readonly engine: string;
  readonly serve: string;
  /** This script's path, for its usage line and the table's source. */
  readonly script: string;
  readonly command: readonly string[];
  readonly defaultOut: string;
  /** The PYTHONPATH of a source tree (an SGLang checkout keeps its package under python/). */
  readonly pythonPath: (tree: string) => string;
}

/** The dump program's output, and where it came from (the table file says so). */
function run(t: TableScript, values: { image?: string; source?: string; dump?: string }): { output: string; source: string } {
  if (values.dump !== undefined) return { output: readFileSync(values.dump, "utf8"), source: `the parser dump ${path.basename(values.dump)}` };
  const [python, ...program] = t.command as [string, ...string[]];
  const tree = path.resolve(values.source ?? ".");
  const [cmd, args, env, source] =
    values.image !== undefined
      ? ["docker", ["run", "--rm", "--network", "none", "--entrypoint", python, "--", values.image, ...program], process.env, `image ${values.image}`]
      : [python, program, { ...process.env, PYTHONPATH: t.pythonPath(tree) }, `the ${t.engine} tree ${path.basename(tree)}`];
  const r = spawnSync(cmd, args, { env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, timeout: 600_000 });
  if (r.status !== 0) {
    process.stderr.write(`${cmd} ${args.slice(0, 6).join(" ")} ... exited ${r.status ?? r.signal}:\n${(r.stderr ?? "").split("\n").slice(-15).join("\n")}\n`);
    process.exit(1);
  }
  return { output: r.stdout, source };
}

export function regenerateParserTable(t: TableScript): void {
  const { values } = parseArgs({ options: { image: { type: "string" }, source: { type: "string" }, dump: { type: "string" }, out: { type: "string", default: t.defaultOut } } });
  const given = (["image", "source", "dump"] as const).filter((k) => values[k] !== undefined);
  if (given.length !== 1) {
    process.stderr.write(`usage: node --import tsx ${t.script} (--image IMAGE | --source DIR | --dump FILE) [--out FILE]\n`);
    process.exit(2);
  }
  const { output, source } = run(t, values);
  const read = readArgparseDump(output);
  if (!read.ok) {
    process.stderr.write(`${read.problem}\n`);
    process.exit(1);
  }
  const day = new Date().toISOString().slice(0, 10);
  writeFileSync(values.out, formatArgparseDump(read.dump, `${t.serve}'s parser of ${t.engine} ${read.dump.engine_version}, dumped from ${source} on ${day} by ${t.script}`));
  process.stdout.write(`${values.out}: ${t.engine} ${read.dump.engine_version}, ${read.dump.actions.length} actions (Python ${read.dump.python ?? "?"})\n`);
}
