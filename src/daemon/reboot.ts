import type { Plan } from "../plan/plan.js";
import type { StateStore } from "../store/store.js";
import { DEFAULT_LEASE_MS } from "../claims/claims.js";
import type { ClusterSession } from "../nodes/session.js";
import { progressEvents, type UpEvent } from "../boot/up-events.js";
import { bootKept } from "../app/up-use-case.js";
import type { UpOutcome } from "../boot/up-events.js";
import { DEFAULTS } from "../contract/defaults.js";

/**
 * The daemon's restart of a kept plan, through the one `up` use case (src/app/up-use-case.ts
 * bootKept): its words and progress become the boot's events (`emit`), which the daemon's boot
 * registry keeps for `attach` as it does for a submitted `up`. It may take as long as `up` gives a
 * boot by default. Throws when it fails, after its rollback.
 */
export function bootAgain(
  plan: Plan,
  session: ClusterSession,
  signal: AbortSignal,
  store: StateStore,
  emit: (e: UpEvent) => void,
  now: () => Date = () => new Date(),
  /** The daemon stops: the boot is left to the next daemon, which adopts it (src/daemon/adopt.ts), as `up`'s boots are. */
  detach?: AbortSignal,
  /** The old group's removal, under way: see UpOptions.recreating. */
  recreating?: Promise<void>,
): Promise<UpOutcome> {
  const say = (text: string): void => emit({ type: "say", text, t: now().getTime() });
  return bootKept(
    plan,
    session,
    { store, say, progress: progressEvents(emit, () => now().getTime()), signal, now, leaseMs: DEFAULT_LEASE_MS, timeoutMs: DEFAULTS.upTimeout.ms, push: true, ...(detach === undefined ? {} : { detach }) },
    `launcher serve (restart of ${plan.deployment})`,
    recreating,
  );
}
