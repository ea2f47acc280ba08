import { BootEventWireSchema } from "../contract/boot-events.js";
import type { Diagnostic } from "../config/diagnostic.js";
import { RemoteError, UserError, type Blamed } from "../config/errors.js";
import type { BootState } from "../engine/boot-log.js";
import { Interrupted } from "../config/abort.js";
import type { Progress } from "../nodes/progress.js";
import { describeSample, type MemorySample } from "../memory/memory-watch.js";
import type { SwapMode } from "../store/store.js";
import type { UpResult } from "./up.js";

/** A boot in a lane: what it replaced, and how (src/lanes/lane.ts). */
export type LaneUpResult = UpResult & { readonly deployment: string; readonly mode: SwapMode; readonly replaced: readonly string[] };

/** What an `up` ends with: the deployment it booted, in a lane or not. */
export type UpOutcome = (UpResult & { readonly deployment: string }) | LaneUpResult;

/**
 * What an `up` says while it runs, as events: the one contract between the use case and whoever
 * shows it. In the CLI without a daemon the events are shown as they happen; through the daemon
 * they go over the control API as one JSON object per line, and the client shows them with the
 * same renderer (src/cli/boot-view.ts), so that the output is the same either way. `t` is the
 * daemon's clock (ms since the epoch), so that the elapsed times shown are the boot's own.
 */
export type UpEvent =
  | { readonly type: "accepted"; readonly deployment: string; readonly cluster: string; readonly lane?: string; readonly t: number }
  | { readonly type: "say"; readonly text: string; readonly t: number }
  | { readonly type: "warn"; readonly text: string; readonly t: number }
  | { readonly type: "diagnostics"; readonly diagnostics: readonly Diagnostic[]; readonly t: number }
  | { readonly type: "note"; readonly text: string; readonly t: number }
  | { readonly type: "node"; readonly node: string; readonly state: BootState; readonly t: number }
  | { readonly type: "memory"; readonly node: string; readonly sample: MemorySample; readonly t: number }
  | { readonly type: "done"; readonly t: number }
  | { readonly type: "result"; readonly outcome: UpOutcome; readonly t: number }
  | { readonly type: "error"; readonly error: EncodedError; readonly t: number };

/** The events that end a boot's stream: nothing follows them. */
export const FINAL_EVENTS: ReadonlySet<UpEvent["type"]> = new Set(["result", "error"]);

/** An error as it crosses the wire, decoded back into the same class so that the one error funnel words it alike. */
export type EncodedError =
  | { readonly kind: "user"; readonly message: string; readonly hint?: string; readonly diagnostics: readonly Diagnostic[] }
  | { readonly kind: "remote"; readonly node: string; readonly message: string; readonly detail?: string; readonly hint?: string; readonly blamed?: Blamed }
  | { readonly kind: "interrupted"; readonly signal: string; readonly what: string }
  | { readonly kind: "bug"; readonly message: string };

export function encodeError(e: unknown): EncodedError {
  if (e instanceof Interrupted) return { kind: "interrupted", signal: e.signalName, what: e.what };
  if (e instanceof UserError) return { kind: "user", message: e.message, ...(e.hint === undefined ? {} : { hint: e.hint }), diagnostics: e.diagnostics };
  if (e instanceof RemoteError) return { kind: "remote", node: e.node, message: e.message, ...(e.detail === undefined ? {} : { detail: e.detail }), ...(e.hint === undefined ? {} : { hint: e.hint }), ...(e.blamed === undefined ? {} : { blamed: e.blamed }) };
  return { kind: "bug", message: e instanceof Error ? e.message : String(e) };
}

export function decodeError(e: EncodedError): Error {
  switch (e.kind) {
    case "interrupted":
      return new Interrupted(e.signal, e.what);
    case "user":
      return new UserError(e.message, e.hint, e.diagnostics);
    case "remote":
      return new RemoteError(e.node, e.message, e.detail, e.hint, e.blamed);
    case "bug":
      return new Error(e.message);
  }
}

const MEMORY_EVENT_MS = 1000;

export const encodeEvent = (e: UpEvent): string => `${JSON.stringify(e)}\n`;

/** One line of the stream, or undefined when it is not an event this launcher knows. */
export function decodeEvent(line: string): UpEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  const parsed = BootEventWireSchema.safeParse(value);
  return parsed.success ? (parsed.data as unknown as UpEvent) : undefined;
}

/**
 * A Progress that turns what the boot reports into events. The boot reports every log line; what
 * is shown of a node is its phase and figures, so an event is sent only when those change, and
 * without the log lines: a daemon keeps every event of a boot for `attach`, and an hour of an
 * engine's log is not worth keeping there (the rollback's report carries the lines that matter).
 */
export function progressEvents(emit: (e: UpEvent) => void, now: () => number): Progress {
  const shown = new Map<string, string>();
  // The guard samples several times a second: a node's memory is sent when its shown figure
  // changes, at most once a second, so that an hour's boot keeps a bounded number of events.
  const memoryShown = new Map<string, { text: string; t: number }>();
  return {
    memory: (node, sample) => {
      const text = describeSample(sample);
      const t = now();
      const last = memoryShown.get(node);
      if (last !== undefined && (last.text === text || t - last.t < MEMORY_EVENT_MS)) return;
      memoryShown.set(node, { text, t });
      emit({ type: "memory", node, sample, t });
    },
    node: (node, state) => {
      const key = JSON.stringify([state.phase, state.figures, state.ready]);
      if (shown.get(node) === key) return;
      shown.set(node, key);
      emit({ type: "node", node, state: { phase: state.phase, figures: state.figures, ready: state.ready, lastLines: [] }, t: now() });
    },
    note: (text) => emit({ type: "note", text, t: now() }),
    done: () => emit({ type: "done", t: now() }),
  };
}
