import type { Command } from "commander";
import { EXIT_USER, UserError } from "../config/errors.js";
import { readTextFile, readTextStdin } from "../config/read-file.js";
import { explainLog, formatExplanation } from "../boot/explain.js";
import { ENGINES, engineAdapter } from "../engine/registry.js";
import type { Output } from "../app/output.js";
import { jsonOption, outputOption } from "./options.js";

/** A boot log with tqdm bars and tracebacks runs to a few MB; anything far beyond is not one boot. */
const MAX_LOG_BYTES = 64 * 1024 * 1024;

export function registerExplain(program: Command, io: Output): void {
  program
    .command("explain")
    .description("read a saved engine log (raw, docker logs --timestamps, or launcher logs) and say how far the boot got, why it failed and what to do")
    .argument("[file]", "the log file; - or nothing reads standard input")
    // The registry's first engine is the default (no engine is named outside src/engine).
    .option("--engine <name>", "the engine that wrote the log", Object.keys(ENGINES)[0] ?? "")
    .addOption(jsonOption("print one JSON object")).addOption(outputOption())
    .action(async (file: string | undefined, opts: { engine: string; json?: boolean }) => {
      const adapter = engineAdapter(opts.engine);
      if (adapter === undefined) throw new UserError(`--engine ${opts.engine} is not an engine launcher knows`, `engines: ${Object.keys(ENGINES).join(", ")}`);
      const text =
        file === undefined || file === "-"
          ? await readTextStdin("log", MAX_LOG_BYTES, "give the log file: launcher explain FILE, or pipe it: launcher logs NAME | launcher explain -")
          : readTextFile(file, "log", MAX_LOG_BYTES);
      const e = explainLog(adapter, text);
      if (opts.json) {
        io.json({ engine: e.engine, phase: e.phase, ready: e.ready, failed: e.failed, fatal: e.fatal, cause: e.cause, hint: e.hint, figures: e.figures, phases: e.phases });
      } else {
        for (const l of formatExplanation(e)) io.out(l);
      }
      // A log of a failed boot is the answer the user asked for, not an error of launcher: exit 1 without an error message.
      if (e.failed) process.exitCode = EXIT_USER;
    });
}
