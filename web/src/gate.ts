import type { SessionRole } from "../../src/contract/read-api.js";

/**
 * What a session may do on the page. A read session (an inference key) sees every view and no
 * action button at all; the daemon refuses its actions anyway (src/daemon/web-session.ts), so this
 * is what the page shows, not what guards the cluster. Pure.
 */

export const ACTIONS = ["stop", "cancel", "swap", "start"] as const;
export type ActionKind = (typeof ACTIONS)[number];

/** The actions a role's page shows: none for a read session. */
export function actionsFor(role: SessionRole): ReadonlySet<ActionKind> {
  return role === "admin" ? new Set(ACTIONS) : new Set();
}

export const mayAct = (role: SessionRole | undefined, action: ActionKind): boolean => role !== undefined && actionsFor(role).has(action);
