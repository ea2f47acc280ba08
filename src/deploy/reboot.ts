import type { ImageFacts } from "../engine/image-contract.js";
import type { Plan } from "../plan/plan.js";
import type { StateStore } from "../store/store.js";
import { claimPlanNodes, DEFAULT_LEASE_MS } from "./claims.js";
import { recordedUp } from "./launch.js";
import type { Progress } from "./progress.js";
import type { ClusterSession } from "./session.js";

/** A boot the supervisor issues may take as long as one `up` gives it by default. */
const REBOOT_TIMEOUT_MS = 60 * 60_000;

/**
 * The daemon's one call into the `up` use case: boot a kept plan again as `up` boots it (node
 * claims, image push, preflight, starts, the watch, the rollback of its own containers on any
 * failure, the boot recorded in history), its progress as log lines. Throws when it fails.
 */
export async function bootAgain(
  plan: Plan,
  session: ClusterSession,
  signal: AbortSignal,
  store: StateStore,
  log: (line: string) => void,
  now: () => Date = () => new Date(),
  /** The daemon stops: the boot is left to the next daemon, which adopts it (src/deploy/adopt.ts), as `up`'s boots are. */
  detach?: AbortSignal,
): Promise<void> {
  const what = `launcher serve (restart of ${plan.deployment})`;
  const lost = new AbortController();
  const claims = await claimPlanNodes(session, plan, {
    command: what,
    leaseMs: DEFAULT_LEASE_MS,
    now,
    note: log,
    onLost: (message) => {
      log(message);
      lost.abort();
    },
  });
  const phases = new Map<string, string>();
  const progress: Progress = {
    // One line per phase a node enters, not per log line.
    node: (node, state) => {
      if (phases.get(node) === state.phase) return;
      phases.set(node, state.phase);
      log(`${plan.deployment}: ${node} ${state.phase}`);
    },
    note: (text) => log(`${plan.deployment}: ${text}`),
    done: () => undefined,
  };
  // What earlier boots read of an image (entrypoint, engine version) is kept by image ID, as for `up`.
  const images = { get: (id: string) => store.imageFacts(id), put: (id: string, facts: ImageFacts) => store.saveImageFacts(id, facts, now().toISOString()) };
  try {
    await recordedUp(plan, { ...session, images }, { timeoutMs: REBOOT_TIMEOUT_MS, signal: AbortSignal.any([signal, lost.signal]), progress, push: true, ...(detach === undefined ? {} : { detach }) }, store, now);
  } finally {
    await claims.release();
  }
}
