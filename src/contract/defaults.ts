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
 * The defaults of deploying and serving (up, down, serve, claims, restarts), each written here
 * only: the flags' defaults and help, the daemon's submissions without the flag, and the steps
 * that have no flag (an adopted boot, a rollback). The measuring commands' own (bench, eval) stay
 * with their code in src/measure/.
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
  /** How far restartBackoff's doubling goes (src/supervise/supervise.ts SuperviseTiming). */
  restartBackoffMax: duration("5m"),
  /** A deployment that served this long since its last restart starts its backoff anew. */
  restartResetAfter: duration("10m"),
  /** How far apart two polls must see an unhealthy engine or a silent node before its group is recreated. */
  restartConfirm: duration("2s"),
  /**
   * `serve --probe-every`: with no generation completed through the gateway for this long, the
   * daemon sends a serving deployment a one-token request of its own (src/supervise/generation.ts).
   * A minute: a wedged engine is found within about a minute and a half, and an idle deployment
   * spends one token a minute on it.
   */
  probeEvery: duration("60s"),
  /**
   * `serve --probe-bound`: the longest a probe may take to complete its one token before its
   * deployment is wedged. One token's prefill and decode take well under a second on a working
   * engine; half a minute leaves room for a busy one (a probe waits its turn in the batch),
   * retries quick failures (a dropped connection) within it, and still names a wedge soon.
   */
  probeBound: duration("30s"),
  /** `$LAUNCHER_CLAIM_LEASE`: how long a node claim outlives its last renewal (src/claims/claims.ts). */
  claimLease: duration("60s"),
  /** `serve --poll`: how often the daemon reads the clusters' labels. */
  poll: duration("2s"),
  /** `serve --upstream-timeout`: the longest wait for an engine's first byte (a long non-streamed generation). */
  upstreamTimeout: duration("60m"),
  /** `serve --idle-timeout`: the longest silence from an engine in the middle of an answer. */
  idleTimeout: duration("10m"),
} as const;

/** `serve --listen` and `export systemd --listen`: the daemon's address, loopback only. */
export const DEFAULT_LISTEN = "127.0.0.1:8080";
