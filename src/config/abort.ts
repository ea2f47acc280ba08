import { UserError } from "./errors.js";

/**
 * The user stopped the command (Ctrl-C, SIGTERM, SIGHUP). A UserError, so the one error funnel
 * prints it without a stack; the exit status (130/143/129) is set where the signal was caught.
 */
export class Interrupted extends UserError {
  constructor(
    readonly signalName: string,
    /** What was happening and what was (not) done, said after the signal's name. */
    readonly what = "",
    hint?: string,
  ) {
    super(`interrupted (${signalName})${what === "" ? "" : `: ${what}`}`, hint);
    this.name = "Interrupted";
  }
}

/** The Interrupted error an aborted signal carries (withInterrupts aborts with one), with `what` added. */
export function interruption(signal: AbortSignal, what = ""): Interrupted {
  const reason: unknown = signal.reason;
  return new Interrupted(reason instanceof Interrupted ? reason.signalName : "aborted", what);
}

/** Throws the interruption when `signal` has aborted: the check between two steps. */
export function checkInterrupted(signal: AbortSignal, what: string): void {
  if (signal.aborted) throw interruption(signal, what);
}

/**
 * `work`, or the interruption as soon as `signal` aborts, whichever comes first. For steps that
 * start nothing on the nodes (reads, probes): what they still run ends by itself, within their
 * own timeouts.
 */
export function abortable<T>(work: Promise<T>, signal: AbortSignal, what: string): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(interruption(signal, what));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(interruption(signal, what));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/**
 * The daemon running a boot stopped (SIGTERM, SIGINT) and left the boot on the nodes, as a kill -9
 * would: nothing was rolled back and nothing recorded as its end, because the next daemon adopts
 * the boot from the store and the containers' labels (src/daemon/adopt.ts) and ends it there.
 */
export class Detached extends UserError {
  constructor(readonly deployment: string) {
    super(
      `launcher serve stopped while ${deployment} was booting: its containers go on booting on the nodes, unwatched`,
      `the next launcher serve --control adopts the boot (launcher attach ${deployment} then follows it); launcher down ${deployment} removes it`,
    );
    this.name = "Detached";
  }
}
