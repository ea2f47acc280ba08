import { AsyncLocalStorage } from "node:async_hooks";
import type { Transport } from "./transport.js";

/**
 * A timed trace of one `up` (`launcher up --trace`): every phase, check and SSH round trip as a
 * span with its start (ms since the trace began) and duration. The one typed home of the trace's
 * shape: the CLI prints it, a bench reads it.
 */
export interface Span {
  readonly name: string;
  /** The node it ran on, when it ran on one. */
  readonly node?: string;
  /** Ms since the trace began. */
  readonly start_ms: number;
  /** Ms it took; 0 for a mark (a moment: the head's ready line). */
  readonly ms: number;
}

export interface TraceRecord {
  readonly spans: readonly Span[];
  /** Spans between the first and the last MAX_SPANS / 2, not kept (a long boot's middle). */
  readonly dropped: number;
  /** How long the process ran before the trace began (ms): Node's own start and loading launcher's modules. */
  readonly process_ms?: number;
  /** The process's own CPU time (user + system, ms) until the trace ended: launcher's, not the nodes' or their engines'. */
  readonly cpu_ms?: number;
}

/**
 * A boot may run an hour: the spans kept are bounded, and the rest are counted. The first half
 * kept are the first spans (the checks, the starts); the second half the last ones, a ring, so the
 * ready line and the claims' release survive a long boot's middle.
 */
export const MAX_SPANS = 2000;
const HALF = MAX_SPANS / 2;

/** Span bookkeeping alone, on an injected clock (ms), so that it is tested without waiting. */
export class Trace {
  /** The clock's reading when the trace began. */
  readonly origin: number;
  private readonly first: Span[] = [];
  private readonly last: Span[] = [];
  // Where the ring `last` writes next, once full.
  private next = 0;
  private over = 0;

  constructor(private readonly clock: () => number) {
    this.origin = clock();
  }

  /** Starts a span; what it returns ends it (once: a second call changes nothing). */
  begin(name: string, node?: string): () => void {
    const start = this.clock();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.add({ name, ...(node === undefined ? {} : { node }), start_ms: start - this.origin, ms: this.clock() - start });
    };
  }

  /** A moment, as a span of no length. */
  mark(name: string, node?: string): void {
    this.add({ name, ...(node === undefined ? {} : { node }), start_ms: this.clock() - this.origin, ms: 0 });
  }

  /** The spans by their start (ties: the longer, enclosing one first). */
  record(): TraceRecord {
    const spans = [...this.first, ...this.last].sort((a, b) => a.start_ms - b.start_ms || b.ms - a.ms);
    return { spans, dropped: this.over };
  }

  private add(span: Span): void {
    if (this.first.length < HALF) this.first.push(span);
    else if (this.last.length < HALF) this.last.push(span);
    else {
      this.last[this.next] = span;
      this.next = (this.next + 1) % HALF;
      this.over++;
    }
  }
}

const secs = (ms: number): string => (ms / 1000).toFixed(3);

/** The trace as text lines: start offset, duration, node and name, in start order. */
export function formatTrace(record: TraceRecord): string[] {
  const lines = record.spans.map((s) => `  +${secs(s.start_ms).padStart(7)} s ${s.ms === 0 ? "      -  " : `${secs(s.ms).padStart(7)} s`}  ${(s.node ?? "").padEnd(10)} ${s.name}`);
  const own = record.process_ms === undefined || record.cpu_ms === undefined ? [] : [`  launcher's own process: ${secs(record.process_ms)} s before the trace began (Node's start, launcher's modules); ${secs(record.cpu_ms)} s of CPU in all`];
  return ["trace of this up (start offset, duration, node, span):", ...lines, ...(record.dropped > 0 ? [`  (${record.dropped} more spans not kept)`] : []), ...own];
}

/**
 * The trace of the `up` running in this async context. AsyncLocalStorage follows every await and
 * callback started from `runTraced` (Node docs, async_context.md "Class: AsyncLocalStorage"), so the
 * SSH transport and the checks add spans without a tracer passed through each signature, and two
 * boots of one daemon never mix their spans. No trace: every helper below only runs `fn`.
 */
const current = new AsyncLocalStorage<Trace>();

export const runTraced = <T>(trace: Trace | undefined, fn: () => Promise<T>): Promise<T> => (trace === undefined ? fn() : current.run(trace, fn));

/** Runs `fn` as a span of the current trace, if any; the span ends however `fn` ends. */
export async function traced<T>(name: string, node: string | undefined, fn: () => Promise<T>): Promise<T> {
  const end = current.getStore()?.begin(name, node);
  try {
    return await fn();
  } finally {
    end?.();
  }
}

/** A moment of the current trace, if any. */
export const traceMark = (name: string, node?: string): void => current.getStore()?.mark(name, node);

// Programs whose first argument is a subcommand, not a value (docker's reference: "docker COMMAND").
const WITH_SUBCOMMAND: ReadonlySet<string> = new Set(["docker"]);
// A name as a script's first word or a subcommand spells it: no value (a path, a key) passes.
const NAME = /^[A-Za-z_][A-Za-z0-9_-]*/;

/**
 * How an SSH command is named in a trace: its program and subcommand only, never an argument's
 * value (a trace is pasted into issues); `sh -c` by its script's first word, cut to 48 characters.
 */
export function commandName(argv: readonly string[]): string {
  const [program = "", first = ""] = argv;
  const word = (text: string): string => NAME.exec(text)?.[0] ?? "";
  const text = program === "sh" && first === "-c" ? `sh -c ${word((argv[2] ?? "").trim())}` : WITH_SUBCOMMAND.has(program) && NAME.exec(first)?.[0] === first ? `${program} ${first}` : program;
  return text.length > 48 ? `${text.slice(0, 47)}…` : text.trim();
}

/** The transport with each `exec` a span of the current trace (one SSH round trip, named by commandName). */
export function tracedTransport(t: Transport): Transport {
  return {
    node: t.node,
    exec: (argv, options) => (current.getStore() === undefined ? t.exec(argv, options) : traced(`ssh ${commandName(argv)}`, t.node, () => t.exec(argv, options))),
    stream: (argv, options) => t.stream(argv, options),
    spawn: (argv) => t.spawn(argv),
  };
}
