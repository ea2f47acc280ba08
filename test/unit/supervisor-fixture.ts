import type { BootRegistry } from "../../src/supervise/boots.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { Supervisor } from "../../src/supervise/supervisor.js";
import type { UpEvent } from "../../src/boot/up-events.js";
import type { UpOutcome } from "../../src/boot/up-events.js";
import type { StateStore } from "../../src/store/store.js";

/**
 * A supervisor for a unit test, of the deployments `store` keeps, on `session`: a restart's boot
 * waits for the old group's removal (as up's first container does), then runs `boot`; its restarts
 * in `boots`, the clock the real one, a minute's backoff.
 */
export function supervisorOf(store: StateStore, session: ClusterSession, boots: BootRegistry, boot: (emit: (e: UpEvent) => void, signal: AbortSignal) => Promise<UpOutcome>, refresh: () => void = () => undefined): Supervisor {
  return new Supervisor({
    store,
    session: async () => session,
    boot: async (_plan, _session, signal, emit, _detach, recreating) => {
      await recreating;
      return boot(emit, signal);
    },
    boots,
    refresh,
    log: () => undefined,
    now: Date.now,
    timing: { confirmMs: 2000, backoffMs: 60_000, maxBackoffMs: 60_000, resetAfterMs: 600_000 },
  });
}
