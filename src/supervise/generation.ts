import { PROGRESS_EVERY_MS } from "../contract/generation.js";

/**
 * Whether a serving deployment still generates, as a pure function of what was seen and when: the
 * daemon (./generation-watch.ts) feeds it each deployment's evidence of generation (tokens streamed
 * or completed through the gateway, its engine's own token counter going up, its own one-token
 * probes) and asks it when to probe and whether the deployment is wedged. Time comes only from the
 * events' `at`, on a clock that never goes back (the watch's performance.now()); wall time is the
 * watch's, for display only.
 *
 * An engine can answer /health and generate nothing (an EngineCore spinning in a decode hang):
 * /health is answered by the API server, not by the engine core. Only tokens say the engine
 * works, so a deployment whose probe got none, with no other evidence meanwhile, is wedged; a
 * second probe that fails too confirms it (the supervisor restarts only a confirmed wedge).
 */

/** How often a quiet deployment is probed, and how long a probe may take. */
export interface GenerationTiming {
  /** With no generation completed for this long (real traffic or a probe), a probe is sent. */
  readonly probeEveryMs: number;
  /** A probe that has not had its one token by then failed (on the probe's own timer). */
  readonly boundMs: number;
}

/** Per deployment, for one launch of it (a new launch starts anew). */
export interface GenerationState {
  /** When it was first seen serving: a deployment that never generated is judged from then. */
  readonly servingSince: number;
  /** The last evidence of generation (tokens through the gateway, the engine's counter, a probe's token). */
  readonly lastOk?: number;
  /** The probe in flight, since when. */
  readonly probing?: number;
  /**
   * The last probe that failed after the last generation (none since: it recovered), why, and how
   * many probes in a row failed so (2 or more: the wedge is confirmed).
   */
  readonly failed?: { readonly at: number; readonly why: string; readonly count: number };
  /** When the last probe ended, however it ended: the next one waits probeEveryMs from then. */
  readonly probed?: number;
}

export type GenerationEvent =
  /**
   * Evidence of generation: a streamed answer's chunk or a 200 answer with a token through the
   * gateway, the engine's generated-token counter going up, or a probe's token.
   */
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
  /** A second probe in a row failed too: the supervisor may restart it (the first only stops routing). */
  readonly confirmed: boolean;
}


export const startGeneration = (at: number): GenerationState => ({ servingSince: at });

/** A bound as the messages say it: whole seconds, or milliseconds under one. */
export const boundText = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);

/** Why a probe that was not answered failed. */
export const noAnswerWithin = (boundMs: number): string => `its probe of one token got no answer within ${boundText(boundMs)}`;

/**
 * Were tokens seen while the probe that began at `began` ran? They say more than its failure. The
 * gateway reports a stream's chunks PROGRESS_EVERY_MS apart, so a chunk that came just after the
 * probe began may be stamped up to that long before it; the previous probe's own token (stamped
 * at its end, `probed`) is no such chunk.
 */
function tokensWhileProbing(state: GenerationState, began: number): boolean {
  const ok = state.lastOk;
  if (ok === undefined) return false;
  return ok >= began || (ok >= began - PROGRESS_EVERY_MS && ok > (state.probed ?? Number.NEGATIVE_INFINITY));
}

/** One step of one deployment's record. */
export function noteGeneration(state: GenerationState, event: GenerationEvent): GenerationState {
  switch (event.kind) {
    case "generated": {
      // Evidence may arrive after a probe that failed meanwhile: the newest word wins.
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
      if (tokensWhileProbing(state, began ?? event.at)) return { ...rest, probed: event.at };
      const count = (state.failed?.count ?? 0) + 1;
      return { ...rest, probed: event.at, failed: { at: event.at, why: event.why, count } };
    }
  }
}

/** A probe's end that is no failure: its generation is one (noteGeneration), and the probe is over. */
export function probeSucceeded(state: GenerationState, at: number): GenerationState {
  const { probing: _done, ...rest } = noteGeneration(state, { kind: "generated", at });
  return { ...rest, probed: at };
}

/**
 * Is a probe due at `at`? None in flight, and nothing generated for probeEveryMs: since the last
 * generation, else since it was first seen serving, and since the last probe ended (a wedged
 * deployment keeps being probed that often, so that it is seen to recover). A first failure is
 * confirmed by a second probe at once: it has its own bound.
 */
export function probeDue(state: GenerationState, at: number, timing: GenerationTiming): boolean {
  if (state.probing !== undefined) return false;
  if (state.failed?.count === 1 && state.failed.at === state.probed) return at >= state.probed;
  const from = Math.max(state.lastOk ?? state.servingSince, state.probed ?? Number.NEGATIVE_INFINITY);
  return at - from >= timing.probeEveryMs;
}

/**
 * The rule: a deployment whose /health answers (the caller asks only of serving ones) is wedged
 * once a probe sent after the last generation failed, and confirmed once a second one in a row
 * failed too. A probe in flight is judged only by its own end (its own bound ends it), never by
 * the time on a tick.
 */
export function wedgedOf(state: GenerationState): Wedged | undefined {
  if (state.failed === undefined) return undefined;
  const since = state.lastOk ?? state.servingSince;
  return { since, generated: state.lastOk !== undefined, at: state.failed.at, why: state.failed.why, confirmed: state.failed.count >= 2 };
}

/** The wedged state in words (its `since` on the wall clock): the gateway's 503, the log, the supervisor's failure. */
export function wedgedMessage(deployment: string, w: Wedged): string {
  const since = new Date(w.since).toISOString();
  return `deployment ${deployment} is wedged since ${since}: /health answers but ${w.generated ? "no generation completed since then" : "it completed no generation since it was first seen serving then"} (${w.why})`;
}
