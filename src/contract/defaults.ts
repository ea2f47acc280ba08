import { parseDuration } from "../config/duration.js";

/** A default duration, said once: as a flag takes it (commander's default, shown by --help) and in milliseconds. */
export interface DefaultDuration {
  /** As written on the command line (`60m`): commander's default and what the help shows. */
  readonly text: string;
  readonly ms: number;
}

const duration = (text: string): DefaultDuration => ({ text, ms: parseDuration(text, "a default") });

/** Whole seconds, as docker stop's --time takes them. */
export const seconds = (d: DefaultDuration): number => Math.ceil(d.ms / 1000);

/**
 * The deploy code's defaults, each written here only: the flags' defaults and help, the daemon's
 * submissions without the flag, and the steps that have no flag (an adopted boot, a rollback).
 */
export const DEFAULTS = {
  /** `up --timeout`: a boot not ready by then is rolled back; also a supervisor's reboot of a kept plan. */
  upTimeout: duration("60m"),
  /**
   * `up --drain`: how long a lane's replaced deployment may finish its running requests; also an
   * adopted swap's, as the store does not keep the `--drain` the boot was given.
   */
  drain: duration("2m"),
  /** `down --grace`: SIGTERM, then this long, then SIGKILL; a lane swap stops what it replaces so too. */
  stopGrace: duration("10s"),
  /**
   * A rollback's grace: the containers of a boot that failed, was cancelled or can never serve
   * are stopped so (they serve nothing yet, so they get little time).
   */
  rollbackGrace: duration("3s"),
  /** `serve --restart-backoff`: the wait before a group's second restart in a row, doubled for each further one. */
  restartBackoff: duration("10s"),
} as const;
