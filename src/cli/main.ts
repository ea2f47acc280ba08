#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, type OutputConfiguration } from "commander";
import { registerDiff } from "./diff.js";
import { errorJson, reportError, UserError } from "../config/errors.js";
import { consoleOutput } from "./output.js";
import { packageVersion } from "./load.js";
import { CLOSED_OUTPUT_CODES, outlivesTheTerminal } from "./terminal.js";
import { registerPlan } from "./plan.js";
import { registerSchema } from "./schema.js";
import { registerValidate } from "./validate.js";
import { registerUp } from "./up.js";
import { registerDown } from "./down.js";
import { registerAttach } from "./attach.js";
import { registerExport } from "./export.js";
import { registerStatus } from "./status.js";
import { registerLogs } from "./logs.js";
import { registerDemo } from "./demo.js";
import { registerLanes } from "./lanes.js";
import { registerHistory } from "./history.js";
import { registerServe } from "./serve.js";
import { registerImages } from "./images.js";
import { registerDoctor } from "./doctor.js";
import { registerModels } from "./models.js";
import { registerExplain } from "./explain.js";
import { registerCluster } from "./cluster.js";
import { asksForJson, oneLineUsageErrors, type UsageError } from "./usage.js";
import { registerCompletion } from "./completion.js";
import { registerBench } from "./bench.js";
import { registerEval } from "./eval.js";
import { registerCompare } from "./compare.js";

/** Set once commander has picked the command: whether it was given --json (errors then print JSON too). */
let jsonRequested = false;
/** The usage error commander reported, if any (it throws a CommanderError after printing it). */
let usageFailure: UsageError | undefined;

/** `output` replaces where commander writes help and usage errors (tests capture them). */
export function buildProgram(output: Pick<OutputConfiguration, "writeOut" | "writeErr"> = {}): Command {
  const program = new Command()
    .name("launcher")
    .description("Serve large language models across a cluster of DGX Spark machines from one recipe.")
    .version(packageVersion())
    .configureOutput(output)
    .exitOverride()
    .hook("preAction", (_program, action) => {
      jsonRequested = action.optsWithGlobals<{ json?: boolean }>().json === true;
    });
  registerValidate(program, consoleOutput);
  registerPlan(program, consoleOutput);
  registerDiff(program, consoleOutput);
  registerSchema(program, consoleOutput);
  registerUp(program, consoleOutput);
  registerStatus(program, consoleOutput);
  registerLogs(program, consoleOutput);
  registerExplain(program, consoleOutput);
  registerAttach(program, consoleOutput);
  registerDown(program, consoleOutput);
  registerImages(program, consoleOutput);
  registerDoctor(program, consoleOutput);
  registerCluster(program, consoleOutput);
  registerModels(program, consoleOutput);
  registerServe(program, consoleOutput);
  registerLanes(program, consoleOutput);
  registerHistory(program, consoleOutput);
  registerCompare(program, consoleOutput);
  registerDemo(program, consoleOutput);
  registerExport(program, consoleOutput);
  registerBench(program, consoleOutput);
  registerEval(program, consoleOutput);
  registerCompletion(program, consoleOutput);
  oneLineUsageErrors(program, (u) => (usageFailure = u));
  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  try {
    await buildProgram().parseAsync([...argv], { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (e) {
    if (e instanceof CommanderError) {
      // The text went to stderr already; a command line that asked for JSON gets the error as JSON too.
      if (usageFailure !== undefined && asksForJson(argv)) process.stdout.write(`${JSON.stringify(errorJson(new UserError(usageFailure.line, usageFailure.hint)), null, 2)}\n`);
      return e.exitCode;
    }
    const code = reportError(
      e,
      (text) => process.stderr.write(`${text}\n`),
      jsonRequested ? (text) => process.stdout.write(`${text}\n`) : undefined,
    );
    // Interrupted by a signal: keep 130/143, as shells expect.
    return typeof process.exitCode === "number" && process.exitCode > 128 ? process.exitCode : code;
  }
}

/** What a writer whose reader went away exits with: 128 + SIGPIPE, as shells show it. */
export const EXIT_CLOSED_PIPE = 141;

/**
 * The reader of our output went away (`launcher lanes | head -1`): stop as SIGPIPE stops a C
 * program, quietly and without a stack. Node ignores SIGPIPE and reports EPIPE as an 'error'
 * event on the stream instead, which would crash. Work that rolls back on a signal (a boot, a
 * lane swap) is interrupted as by SIGTERM, so it rolls back before the process ends.
 */
function endQuietlyOnClosedPipe(): void {
  let closed = false;
  const onError = (e: NodeJS.ErrnoException): void => {
    // A daemon whose terminal closed goes on writing to nowhere: its log is lost, not its boots.
    if (outlivesTheTerminal() && e.code !== undefined && CLOSED_OUTPUT_CODES.has(e.code)) return;
    if (e.code !== "EPIPE" && e.code !== "ERR_STREAM_DESTROYED") throw e;
    if (closed) return;
    closed = true;
    if (process.listenerCount("SIGTERM") > 0) process.kill(process.pid, "SIGTERM");
    else process.exit(EXIT_CLOSED_PIPE);
  };
  process.stdout.on("error", onError);
  process.stderr.on("error", onError);
}

/** Whether this file is the program being run (through npm's bin symlink too), not a module imported by a test. */
function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  endQuietlyOnClosedPipe();
  process.exitCode = await main(process.argv.slice(2));
}
