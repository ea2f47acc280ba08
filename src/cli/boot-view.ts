import { progressReporter, type Progress } from "../nodes/progress.js";
import { decodeError, type UpEvent } from "../boot/up-events.js";
import { upSummary } from "../app/up-use-case.js";
import type { UpOutcome } from "../boot/up-events.js";
import type { Output } from "../app/output.js";
import type { DaemonTarget } from "../daemon/client.js";
import { UserError } from "../config/errors.js";
import { withInterrupts } from "./interrupts.js";

/**
 * Shows a boot's events as `up` shows them: the same lines on stderr, the same progress, the same
 * answer on stdout (text or --json) and the same error, whether the events come from the use
 * case in this process or from a daemon (live, or replayed from the start by `attach`).
 */
export class BootView {
  private progress: Progress | undefined;
  /** The boot's clock: the last event's time, advanced by the local time since it came. */
  private lastT = 0;
  private lastLocal = 0;
  private final: UpEvent | undefined;
  /** The lane the boot puts its deployment in, as the accepted boot said. */
  private lane: string | undefined;

  constructor(
    private readonly io: Output,
    private readonly stream: NodeJS.WriteStream,
  ) {}

  show(e: UpEvent): void {
    this.lastT = e.t;
    this.lastLocal = Date.now();
    switch (e.type) {
      case "accepted":
        this.lane = e.lane;
        this.progress ??= progressReporter(this.stream, () => this.lastT + (Date.now() - this.lastLocal));
        return;
      case "say":
        this.io.err(e.text);
        return;
      case "warn":
        this.io.warn(e.text);
        return;
      case "diagnostics":
        this.io.diagnostics(e.diagnostics);
        return;
      case "note":
        this.reporter().note(e.text);
        return;
      case "node":
        this.reporter().node(e.node, e.state);
        return;
      case "memory":
        this.reporter().memory?.(e.node, e.sample);
        return;
      case "done":
        this.reporter().done();
        return;
      case "result":
      case "error":
        this.final = e;
        return;
    }
  }

  /** Ends the view: the progress stops redrawing (a client that detaches leaves it mid-boot). */
  close(): void {
    this.progress?.done();
  }

  /** Whether the boot's end was seen. */
  get ended(): boolean {
    return this.final !== undefined;
  }

  /** Prints the answer as `up` does, or throws the boot's error for the one error funnel. */
  finish(json: boolean): UpOutcome {
    const f = this.final;
    if (f?.type === "error") throw decodeError(f.error);
    if (f?.type !== "result") throw new Error("the boot's end was not seen");
    if (json) this.io.json(f.outcome);
    else this.io.out(upSummary(f.outcome, this.lane));
    return f.outcome;
  }

  private reporter(): Progress {
    this.progress ??= progressReporter(this.stream, () => this.lastT + (Date.now() - this.lastLocal));
    return this.progress;
  }
}

/**
 * Follows a boot that a daemon runs (`start` submits it or attaches to it) and shows it as `up`
 * does. Ctrl-C, SIGTERM or SIGHUP (a closed terminal) only detach: the boot goes on in the
 * daemon, and the exit status is the signal's. With `detach`, the command returns once the boot
 * is accepted, printing the deployment's name. A connection lost before the end is an error that
 * says the boot goes on and how to follow it again.
 */
export async function watchBoot(
  daemon: DaemonTarget,
  io: Output,
  json: boolean,
  detach: boolean,
  start: (onEvent: (e: UpEvent) => void, signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const view = new BootView(io, process.stderr);
  const accepted = new AbortController();
  let deployment: string | undefined;
  let interrupted = false;
  let lost: string | undefined;
  await withInterrupts(async (signal) => {
    const stop = AbortSignal.any([signal, accepted.signal]);
    const onEvent = (e: UpEvent): void => {
      if (e.type === "accepted") {
        deployment = e.deployment;
        if (detach) {
          accepted.abort();
          return;
        }
      }
      view.show(e);
    };
    try {
      await start(onEvent, stop);
    } catch (e) {
      // This client chose to stop (a signal, or --detach once accepted): the abort's reason, the
      // signal's Interrupted, is no error of the boot's.
      if (stop.aborted) return;
      // The daemon's refusal, or no daemon at all: said as such.
      if (e instanceof UserError) throw e;
      // Else the stream broke (the daemon went away, the network dropped): unless this client
      // chose to stop, that is a lost connection, said below.
      lost = (e as Error).message;
    } finally {
      interrupted = signal.aborted;
      view.close();
    }
  });
  if (view.ended) {
    view.finish(json);
    return;
  }
  if (deployment === undefined && interrupted) {
    io.err(`launcher: detached before the daemon at ${daemon.url} accepted the boot; it may run there (launcher status shows what runs)`);
    return;
  }
  if (deployment === undefined) throw new UserError(`the daemon at ${daemon.url} ended its answer before it accepted the boot${lost === undefined ? "" : ` (${lost})`}`, "look at the daemon's log");
  const follow = `launcher attach ${deployment} follows it, launcher down ${deployment} cancels it`;
  if (interrupted) {
    io.err(`launcher: detached from the boot of ${deployment}; it goes on in the daemon at ${daemon.url} (${follow})`);
    return;
  }
  if (detach) {
    if (json) io.json({ deployment, status: "accepted", daemon: daemon.url });
    else io.out(deployment);
    return;
  }
  throw new UserError(`lost the connection to the daemon at ${daemon.url}${lost === undefined ? "" : ` (${lost})`}; the boot of ${deployment} goes on there`, follow);
}
