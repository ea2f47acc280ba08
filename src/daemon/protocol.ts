import * as z from "zod";
import { decodeError, type UpEvent } from "../boot/up-events.js";
import { BootSummarySchema, type BootSummary, type DaemonBootState } from "../contract/read-api.js";

/**
 * The daemon's control API (on `launcher serve --control`), one typed home for its answers (its
 * routes and stop's answer are src/contract/control-api.ts's, re-exported here): the server
 * (src/daemon/control.ts) and the client (./client.ts) both use these. Its
 * request, `up` as submitted, lives with `up`'s preparation (src/app/up-submission.ts), which the
 * CLI runs too.
 * Beside the OpenAI routes under /v1, never mixed with them: a key that may chat is not a key that
 * may launch containers.
 */

// The routes are the contract's (the page imports them without this file's node-side imports).
export { CONTROL_PATHS, CONTROL_ROUTES } from "../contract/control-api.js";

export const NDJSON = "application/x-ndjson";

/** The daemon the CLI finds on this machine when none is named: written by `launcher serve --control`. */
export const LocalDaemonSchema = z.object({
  url: z.string().max(2048),
  pid: z.number().int().positive(),
  host: z.string().max(1024),
  /** The control socket of the daemon's own user (src/daemon/control-socket.ts); absent: a daemon without one. */
  socket: z.string().max(4096).optional(),
});
export type LocalDaemon = z.infer<typeof LocalDaemonSchema>;

// A boot's summary is the read API's as well (its `GET boots` adds each boot's events): one home, there.
export { BootSummarySchema, DAEMON_BOOT_STATES, type BootSummary, type DaemonBootState } from "../contract/read-api.js";

export const BootListSchema = z.object({ boots: z.array(BootSummarySchema) });

/** A boot's summary, from its identity and its events (the last final event decides its state). */
export function summarizeBoot(identity: { readonly deployment: string; readonly cluster: string; readonly lane?: string }, events: readonly UpEvent[]): BootSummary {
  const first = events[0];
  const last = events.at(-1);
  const nodes: Record<string, string> = {};
  for (const e of events) if (e.type === "node") nodes[e.node] = e.state.phase;
  const state: DaemonBootState = last?.type === "result" ? "ready" : last?.type === "error" ? "failed" : "booting";
  return {
    deployment: identity.deployment,
    cluster: identity.cluster,
    ...(identity.lane === undefined ? {} : { lane: identity.lane }),
    running: state === "booting",
    state,
    started_at: new Date(first?.t ?? 0).toISOString(),
    nodes,
    ...(last?.type === "error" ? { error: decodeError(last.error).message } : {}),
  };
}
