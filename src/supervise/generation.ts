/**
 * Whether a serving deployment still generates, as a pure function of what was seen and when: the
 * daemon (./generation-watch.ts) feeds it each deployment's real completions through the gateway
 * and its own one-token probes, and asks it when to probe and whether the deployment is wedged.
 * Time comes only from the events' `at`.
 *
 * An engine can answer /health and generate nothing (an EngineCore spinning in a decode hang):
 * /health is answered by the API server, not by the engine core. Only a completed generation says
 * the engine works, so a deployment that completed none within its bound is wedged.
 */

/** How often a quiet deployment is probed, and how long a probe may take. */
export interface GenerationTiming {
  /** With no generation completed for this long (real traffic or a probe), a probe is sent. */
  readonly probeEveryMs: number;
  /** A probe that has not completed its one token by then failed: the deployment is wedged. */
  readonly boundMs: number;
}

/** Per deployment, for one launch of it (a new launch starts anew). */
export interface GenerationState {
  /** When it was first seen serving: a deployment that never generated is judged from then. */
  readonly servingSince: number;
  /** The last generation completed (a real answer with a token, or a probe's). */
  readonly lastOk?: number;
  /** The probe in flight, since when. */
  readonly probing?: number;
  /** The last probe that failed after the last generation (none since: it recovered), and why. */
  readonly failed?: { readonly at: number; readonly why: string };
  /** When the last probe ended, however it ended: the next one waits probeEveryMs from then. */
  readonly probed?: number;
}

export type GenerationEvent =
  /** A generation completed: a 200 answer with at least one token, through the gateway or a probe. */
  | { readonly kind: "generated"; readonly at: number }
  | { readonly kind: "probe-started"; readonly at: number }
  /** A probe failed: no answer within the bound, an error status, or an answer with no token. */
  | { readonly kind: "probe-failed"; readonly at: number; readonly why: string }
  /**
   * A probe the engine refused as a request (a 4xx: a key it does not take, a name it does not
   * serve): its API works, and nothing is learnt of its generation. Neither a failure nor a success.
   */
  | { readonly kind: "probe-refused"; readonly at: number };

/** A deployment that completed no generation within its bound: since when it generated nothing, and why its probe failed. */
export interface Wedged {
  /** Its last completed generation, or when it was first seen serving (it never generated). */
  readonly since: number;
  /** Whether `since` is a generation, or only when it was first seen serving. */
  readonly generated: boolean;
  /** When the probe that proved it failed. */
  readonly at: number;
  readonly why: string;
}

export const startGeneration = (at: number): GenerationState => ({ servingSince: at });

/** A bound as the messages say it: whole seconds, or milliseconds under one. */
export const boundText = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);

/** Why a probe that was not answered failed. */
export const noAnswerWithin = (boundMs: number): string => `its probe of one token got no answer within ${boundText(boundMs)}`;

/** One step of one deployment's record. */
export function noteGeneration(state: GenerationState, event: GenerationEvent): GenerationState {
  switch (event.kind) {
    case "generated": {
      // A real answer may end after a probe that failed meanwhile: the newest word wins.
      const lastOk = Math.max(state.lastOk ?? event.at, event.at);
      const failed = state.failed !== undefined && state.failed.at > lastOk ? state.failed : undefined;
      const { failed: _old, ...rest } = state;
      return { ...rest, lastOk, ...(failed === undefined ? {} : { failed }) };
    }
    case "probe-started":
      return { ...state, probing: event.at };
    case "probe-refused": {
      const { probing: _done, ...rest } = state;
      return { ...rest, probed: event.at };
    }
    case "probe-failed": {
      const { probing: began, ...rest } = state;
      // A generation completed after the probe began says more than the probe's failure.
      if (state.lastOk !== undefined && state.lastOk >= (began ?? event.at)) return { ...rest, probed: event.at };
      return { ...rest, probed: event.at, failed: { at: event.at, why: event.why } };
    }
  }
}

/** A probe's end that is no failure: its generation is one (noteGeneration), and the probe is over. */
export function probeSucceeded(state: GenerationState, at: number): GenerationState {
  const { probing: _done, ...rest } = noteGeneration(state, { kind: "generated", at });
  return { ...rest, probed: at };
}

/**
 * Is a probe due at `at`? None in flight, and nothing completed for probeEveryMs: since the last
 * generation, else since it was first seen serving, and since the last probe ended (a wedged
 * deployment keeps being probed that often, so that it is seen to recover).
 */
export function probeDue(state: GenerationState, at: number, timing: GenerationTiming): boolean {
  if (state.probing !== undefined) return false;
  const from = Math.max(state.lastOk ?? state.servingSince, state.probed ?? Number.NEGATIVE_INFINITY);
  return at - from >= timing.probeEveryMs;
}

/**
 * The rule: a deployment whose /health answers (the caller asks only of serving ones) is wedged
 * once a probe sent after the last generation failed. A probe still in flight past its bound is a
 * failure already (the shell aborts it then, so its failure is on its way).
 */
export function wedgedOf(state: GenerationState, at: number, timing: GenerationTiming): Wedged | undefined {
  const since = state.lastOk ?? state.servingSince;
  const generated = state.lastOk !== undefined;
  if (state.failed !== undefined) return { since, generated, at: state.failed.at, why: state.failed.why };
  if (state.probing !== undefined && at - state.probing >= timing.boundMs) {
    return { since, generated, at: state.probing + timing.boundMs, why: noAnswerWithin(timing.boundMs) };
  }
  return undefined;
}

/** The wedged state in words: the gateway's 503, the log, the supervisor's failure. */
export function wedgedMessage(deployment: string, w: Wedged): string {
  const since = new Date(w.since).toISOString();
  return `deployment ${deployment} is wedged since ${since}: /health answers but ${w.generated ? "no generation completed since then" : "it completed no generation since it was first seen serving then"} (${w.why})`;
}
