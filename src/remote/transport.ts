import { RemoteError } from "../config/errors.js";
import { spawn } from "node:child_process";
import { readLines } from "./lines.js";

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ExecOptions {
  readonly stdin?: string;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
  /** The most characters of stdout and stderr together that are kept (default EXEC_MAX_CHARS): past it the command is killed. */
  readonly maxChars?: number;
}

/**
 * A one-shot command's output is collected whole, so it is bounded: a node's or a container's
 * output is untrusted (README, threat model). Launcher's own scripts print far less; a command
 * past it is killed and answers 124 with the cut said on stderr.
 */
export const EXEC_MAX_CHARS = 64 * 1024 * 1024;

/** A way to run commands on one node. argv is quoted once, inside the transport, never by callers. */
export interface Transport {
  readonly node: string;
  exec(argv: readonly string[], options?: ExecOptions): Promise<ExecResult>;
  /** Output lines (stdout and stderr) of a long-running command, until it ends or `signal` aborts. */
  stream(argv: readonly string[], options?: { signal?: AbortSignal }): AsyncIterable<string>;
  /** The command with raw pipes: bytes in, bytes out. */
  spawn(argv: readonly string[]): RawProcess;
}

/** The node itself could not be reached (as opposed to a command on it that failed). */
export class UnreachableError extends RemoteError {
  constructor(node: string, detail: string) {
    super(node, "unreachable", detail);
    this.name = "UnreachableError";
  }
}

/**
 * Whether the programs this process starts (ssh above all) run in a process group and session of
 * their own. A terminal that closes sends SIGHUP to its whole foreground process group, and Ctrl-C
 * SIGINT: `launcher serve` outlives both, and so must the log streams of the boots it watches; it
 * ends its children itself when it stops. Set once, by that command.
 */
let ownGroup = false;
export function childrenOutliveTheTerminal(): void {
  ownGroup = true;
}
// Node: "if options.detached is set to true, the child process will be made the leader of a new
// process group and session" (child_process docs). ssh runs with BatchMode: it never asks a tty.
const spawnOptions = (): { stdio: ["pipe", "pipe", "pipe"]; detached: boolean } => ({ stdio: ["pipe", "pipe", "pipe"], detached: ownGroup });

export const SSH_FAILED = 255;
const TIMED_OUT = 124;

/**
 * The one place that decides that a node could not be reached: ssh(1) "exits with the exit
 * status of the remote command or with 255 if an error occurred" (openssh-portable ssh.1,
 * EXIT STATUS), and a command we had to kill for its time (124, see runLocal) got no answer.
 */
export function unreachable(transport: Transport, r: ExecResult): UnreachableError | undefined {
  if (r.code !== SSH_FAILED && r.code !== TIMED_OUT) return undefined;
  const tail = outputTail(r).split("\n").slice(-2).join(" ");
  return new UnreachableError(transport.node, r.code === TIMED_OUT ? `no answer in time${tail === "" ? "" : ` (${tail})`}` : tail || `ssh exit ${r.code}`);
}

/** `exec`, and a RemoteError naming the node, the step and the output's tail when it fails. */
export async function execChecked(transport: Transport, argv: readonly string[], what: string, timeoutMs = 60_000): Promise<string> {
  const r = await transport.exec(argv, { timeoutMs });
  if (r.code !== 0) throw unreachable(transport, r) ?? new RemoteError(transport.node, `${what} failed (exit ${r.code})`, outputTail(r));
  return r.stdout;
}

/** The last lines a failed command printed: its stderr, else its stdout. */
export const outputTail = (r: ExecResult): string => (r.stderr.trim() || r.stdout.trim()).split("\n").slice(-8).join("\n");

/** Runs a local program (ssh, or a command on this machine) and collects its output. */
export function runLocal(program: string, args: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, [...args], { ...spawnOptions(), ...(options.signal ? { signal: options.signal } : {}) });
    let stdout = "";
    let stderr = "";
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            child.kill("SIGKILL");
            child.stdout.destroy();
            child.stderr.destroy();
          }, options.timeoutMs);
    const limit = options.maxChars ?? EXEC_MAX_CHARS;
    let cut = false;
    const take = (d: string, into: "out" | "err"): void => {
      if (cut) return;
      if (stdout.length + stderr.length + d.length > limit) {
        cut = true;
        child.kill("SIGKILL");
        return;
      }
      if (into === "out") stdout += d;
      else stderr += d;
    };
    child.stdout.setEncoding("utf8").on("data", (d: string) => take(d, "out"));
    child.stderr.setEncoding("utf8").on("data", (d: string) => take(d, "err"));
    child.on("error", (e) => {
      if (timer) clearTimeout(timer);
      if ((e as NodeJS.ErrnoException).name === "AbortError") resolve({ code: 130, stdout, stderr: `${stderr}aborted\n` });
      else reject(e);
    });
    child.on("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      if (cut) resolve({ code: 124, stdout, stderr: `${stderr}launcher: the output passed ${limit} characters; the command was stopped\n` });
      else resolve({ code: code ?? (signal === "SIGKILL" && options.timeoutMs !== undefined ? 124 : 128), stdout, stderr });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(options.stdin ?? "");
  });
}

/**
 * Lines of a local program's stdout and stderr, interleaved as they come. Its stdin stays open
 * (an empty pipe) for as long as the lines are read, and is closed when the reader goes away (or
 * this process dies): a remote command can watch it to end with its reader (see docker.ts logs).
 */
/**
 * The queue length at which a stream stops reading from its program. Not a hard cap: the chunk
 * being split when it is reached is split to its end (one per pipe, stdout and stderr, each at most
 * the pipe's highWaterMark, 64 KiB), so the queue holds at most 1000 lines plus the lines of those
 * two chunks, up to 2 x 65,536 more when they are all newlines. Memory is bounded all the same:
 * 1000 lines of at most LINE_MAX (16 KiB, ./lines.ts) characters and their cut note, about 16 MiB,
 * plus two chunks' worth of characters however they are split.
 */
export const STREAM_QUEUE_LINES = 1000;

export async function* streamLocal(program: string, args: readonly string[], signal?: AbortSignal): AsyncIterable<string> {
  const child = spawn(program, [...args], spawnOptions());
  child.stdin.on("error", () => undefined);
  // With ssh connection sharing the master holds our pipe ends too, so killing the client alone
  // would leave them open: close our side as well. Closing stdin is what reaches the node.
  const kill = (): void => {
    child.stdin.destroy();
    child.kill("SIGTERM");
    child.stdout.destroy();
    child.stderr.destroy();
  };
  signal?.addEventListener("abort", kill, { once: true });
  const queue: string[] = [];
  let open = 2;
  let wake: (() => void) | undefined;
  // Each line cut to LINE_MAX as it arrives (./lines.ts): a node's output is untrusted and unbounded.
  for (const s of [child.stdout, child.stderr]) {
    readLines(
      s,
      (l) => {
        queue.push(l);
        // A reader slower than the node: the pipe holds the rest (and the node's writer waits).
        // The chunk in hand still ends its split: see STREAM_QUEUE_LINES for the bound that makes.
        if (queue.length >= STREAM_QUEUE_LINES) for (const p of [child.stdout, child.stderr]) p.pause();
        wake?.();
      },
      () => {
        open--;
        wake?.();
      },
    );
  }
  try {
    while (open > 0 || queue.length > 0) {
      if (queue.length === 0) await new Promise<void>((r) => (wake = r));
      wake = undefined;
      while (queue.length > 0) yield queue.shift() as string;
      for (const p of [child.stdout, child.stderr]) p.resume();
    }
  } finally {
    signal?.removeEventListener("abort", kill);
    kill();
  }
}

/** A command running with raw byte pipes, for streams too big to hold (images, weights). */
export interface RawProcess {
  readonly stdin: NodeJS.WritableStream;
  readonly stdout: NodeJS.ReadableStream;
  /** Exit status and the stderr tail, once it has ended. */
  readonly done: Promise<{ code: number; stderr: string }>;
  kill(): void;
}

export function spawnLocal(program: string, args: readonly string[]): RawProcess {
  const child = spawn(program, [...args], spawnOptions());
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  child.stdin.on("error", () => undefined);
  const done = new Promise<{ code: number; stderr: string }>((resolve) => {
    child.on("error", (e) => resolve({ code: 127, stderr: `${stderr}${e.message}` }));
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stderr }));
  });
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    done,
    kill: () => {
      child.kill("SIGTERM");
      child.stdout.destroy();
      child.stderr.destroy();
    },
  };
}
