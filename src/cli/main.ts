#!/usr/bin/env node
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, type OutputConfiguration } from "commander";
import { errorJson, reportError, UserError } from "../config/errors.js";
import { consoleOutput, type Output } from "../app/output.js";
import { packageVersion, realPath } from "../config/package-info.js";
import { CLOSED_OUTPUT_CODES, outlivesTheTerminal } from "./terminal.js";
import { asksForJson, oneLineUsageErrors, type UsageError } from "./usage.js";
import { EXIT_CLOSED_PIPE } from "./closed-pipe.js";

export { EXIT_CLOSED_PIPE };

const THIS_FILE = fileURLToPath(import.meta.url);

/** Set once commander has picked the command: whether it was given --json (errors then print JSON too). */
let jsonRequested = false;
/** The usage error commander reported, if any (it throws a CommanderError after printing it). */
let usageFailure: UsageError | undefined;

type Register = (program: Command, io: Output) => void;

interface CommandEntry {
  /** What a command line names it by: its name, then its aliases. */
  readonly names: readonly string[];
  /** Its module, loaded only when it is registered: a command costs no other command its start. */
  readonly load: () => Promise<Register>;
  /** It reads every other command (completion's script lists them all). */
  readonly needsAll?: true;
}

/** Every command, in the order help lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  { names: ["validate"], load: async () => (await import("./validate.js")).registerValidate },
  { names: ["plan"], load: async () => (await import("./plan.js")).registerPlan },
  { names: ["diff"], load: async () => (await import("./diff.js")).registerDiff },
  { names: ["schema"], load: async () => (await import("./schema.js")).registerSchema },
  { names: ["up"], load: async () => (await import("./up.js")).registerUp },
  { names: ["status", "ps"], load: async () => (await import("./status.js")).registerStatus },
  { names: ["logs"], load: async () => (await import("./logs.js")).registerLogs },
  { names: ["explain"], load: async () => (await import("./explain.js")).registerExplain },
  { names: ["attach"], load: async () => (await import("./attach.js")).registerAttach },
  { names: ["down"], load: async () => (await import("./down.js")).registerDown },
  { names: ["images"], load: async () => (await import("./images.js")).registerImages },
  { names: ["doctor"], load: async () => (await import("./doctor.js")).registerDoctor },
  { names: ["nodes"], load: async () => (await import("./nodes.js")).registerNodes },
  { names: ["cluster"], load: async () => (await import("./cluster.js")).registerCluster },
  { names: ["models"], load: async () => (await import("./models.js")).registerModels },
  { names: ["serve"], load: async () => (await import("./serve.js")).registerServe },
  { names: ["lanes"], load: async () => (await import("./lanes.js")).registerLanes },
  { names: ["top"], load: async () => (await import("./top.js")).registerTop },
  { names: ["dashboard"], load: async () => (await import("./dashboard.js")).registerDashboard },
  { names: ["history"], load: async () => (await import("./history.js")).registerHistory },
  { names: ["compare"], load: async () => (await import("./compare.js")).registerCompare },
  { names: ["demo"], load: async () => (await import("./demo.js")).registerDemo },
  { names: ["export"], load: async () => (await import("./export.js")).registerExport },
  { names: ["bench"], load: async () => (await import("./bench.js")).registerBench },
  { names: ["eval"], load: async () => (await import("./eval.js")).registerEval },
  { names: ["completion"], load: async () => (await import("./completion.js")).registerCompletion, needsAll: true },
];

/**
 * The commands a command line needs registered: the one its first word names, else every one
 * (root help, no command, an unknown command and its "did you mean", `help CMD`, completion).
 * Commander dispatches on the first operand (commander 14 lib/command.js _parseCommand:
 * `this._findCommand(operands[0])`), and the root takes no option with a value, so a first word
 * that names a command is the command that runs; anything else is answered with all of them.
 */
export function commandsFor(argv: readonly string[]): readonly CommandEntry[] {
  const named = COMMANDS.find((c) => c.names.includes(argv[0] ?? ""));
  return named === undefined || named.needsAll === true ? COMMANDS : [named];
}

/** The program with `registers` added, in their order. */
function programWith(registers: readonly Register[], output: Pick<OutputConfiguration, "writeOut" | "writeErr">): Command {
  const program = new Command()
    .name("launcher")
    .description("Serve large language models across a cluster of DGX Spark machines from one recipe.")
    .version(packageVersion())
    .configureOutput(output)
    .exitOverride()
    .hook("preAction", (_program, action) => {
      jsonRequested = action.optsWithGlobals<{ json?: boolean }>().json === true;
    });
  for (const register of registers) register(program, consoleOutput);
  oneLineUsageErrors(program, (u) => (usageFailure = u));
  return program;
}

/** The program with the commands `argv` needs (see commandsFor), their modules loaded now. */
export async function loadProgram(argv: readonly string[], output: Pick<OutputConfiguration, "writeOut" | "writeErr"> = {}): Promise<Command> {
  return programWith(await Promise.all(commandsFor(argv).map((c) => c.load())), output);
}

/**
 * Every command's register function, loaded when this module is imported by another (a test) and
 * not run as the CLI: buildProgram stays synchronous for them. The CLI loads only what it uses.
 */
const allRegisters: readonly Register[] = isTheCli() ? [] : await Promise.all(COMMANDS.map((c) => c.load()));

/** Every command. `output` replaces where commander writes help and usage errors (tests capture them). */
export function buildProgram(output: Pick<OutputConfiguration, "writeOut" | "writeErr"> = {}): Command {
  if (allRegisters.length === 0) throw new Error("buildProgram is for a module that imports the CLI; the CLI itself uses loadProgram");
  return programWith(allRegisters, output);
}

export async function main(argv: readonly string[]): Promise<number> {
  try {
    await (await loadProgram(argv)).parseAsync([...argv], { from: "user" });
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
  return script !== undefined && realPath(script) !== undefined && realPath(script) === realPath(THIS_FILE);
}

/** Whether the program being run is the CLI: this file, or the bin entry beside it that imports it. */
function isTheCli(): boolean {
  const script = process.argv[1];
  const bin = path.join(path.dirname(THIS_FILE), `bin${path.extname(THIS_FILE)}`);
  return isEntryPoint() || (script !== undefined && realPath(script) !== undefined && realPath(script) === realPath(bin));
}

/** Runs the CLI on `argv` as the process's own command line: its exit code is the process's. */
export async function runCli(argv: readonly string[]): Promise<void> {
  endQuietlyOnClosedPipe();
  process.exitCode = await main(argv);
}

if (isEntryPoint()) await runCli(process.argv.slice(2));
