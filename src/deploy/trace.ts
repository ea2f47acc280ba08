import { AsyncLocalStorage } from "node:async_hooks";
import type { Transport } from "../remote/transport.js";

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
  readonly startMs: number;
  /** Ms it took; 0 for a mark (a moment: the head's ready line). */
  readonly ms: number;
}

export interface TraceRecord {
  readonly spans: readonly Span[];
  /** Spans past MAX_SPANS, not kept (a long boot's memory-guard samples, say). */
  readonly dropped: number;
}

/** A boot may run an hour: the spans kept are bounded, and the rest are counted. */
export const MAX_SPANS = 2000;

/** Span bookkeeping alone, on an injected clock (ms), so that it is tested without waiting. */
export class Trace {
  private readonly origin: number;
  private readonly kept: Span[] = [];
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
      this.add({ name, ...(node === undefined ? {} : { node }), startMs: start - this.origin, ms: this.clock() - start });
    };
  }

  /** A moment, as a span of no length. */
  mark(name: string, node?: string): void {
    this.add({ name, ...(node === undefined ? {} : { node }), startMs: this.clock() - this.origin, ms: 0 });
  }

  /** The spans by their start (ties: the longer, enclosing one first). */
  record(): TraceRecord {
    const spans = [...this.kept].sort((a, b) => a.startMs - b.startMs || b.ms - a.ms);
    return { spans, dropped: this.over };
  }

  private add(span: Span): void {
    if (this.kept.length >= MAX_SPANS) this.over++;
    else this.kept.push(span);
  }
}

const secs = (ms: number): string => (ms / 1000).toFixed(3);

/** The trace as text lines: start offset, duration, node and name, in start order. */
export function formatTrace(record: TraceRecord): string[] {
  const lines = record.spans.map((s) => `  +${secs(s.startMs).padStart(7)} s ${s.ms === 0 ? "      -  " : `${secs(s.ms).padStart(7)} s`}  ${(s.node ?? "").padEnd(10)} ${s.name}`);
  return ["trace of this up (start offset, duration, node, span):", ...lines, ...(record.dropped > 0 ? [`  (${record.dropped} more spans not kept)`] : [])];
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

/**
 * How an SSH command is named in a trace: its program and first words, never its arguments' values
 * (a script's first line for `sh -c`), cut to 48 characters.
 */
export function commandName(argv: readonly string[]): string {
  const words = argv[0] === "sh" && argv[1] === "-c" ? ["sh -c", (argv[2] ?? "").trim().split("\n")[0] ?? ""] : argv.slice(0, 3);
  const text = words.join(" ").replace(/\s+/g, " ");
  return text.length > 48 ? `${text.slice(0, 47)}…` : text;
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
