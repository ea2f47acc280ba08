import { RemoteError } from "../config/errors.js";
import type { Plan } from "../plan/plan.js";
import { encodeSavedPlan } from "../plan/saved.js";
import type { StateStore } from "../store/store.js";
import type { Progress } from "./progress.js";
import type { ClusterSession } from "./session.js";
import { up, type UpOptions, type UpResult } from "./up.js";

/** `up`, with the boot written to the store: every phase of every node, the figures, the outcome. */
export async function recordedUp(plan: Plan, session: ClusterSession, options: UpOptions, store: StateStore, now: () => Date): Promise<UpResult> {
  const at = (): string => now().toISOString();
  const boot = {
    deployment: plan.deployment,
    recipe: plan.recipe.id,
    recipe_hash: plan.recipe_hash,
    ...(plan.lane === undefined ? {} : { lane: plan.lane }),
    cluster: plan.cluster,
    served_model: plan.served_model,
    endpoint: plan.endpoint,
    nodes: plan.nodes.map((n) => n.node),
  };
  // The boot counts from here, but is written only once a container runs: a preflight refusal is no boot.
  const startedAt = at();
  let bootId: number | undefined;
  const seen = new Map<string, string>();
  let engineVersion: string | undefined;
  const begin = (): number => store.beginBoot({ ...boot, started_at: startedAt, ...(engineVersion === undefined ? {} : { engine_version: engineVersion }) });
  const progress: Progress = {
    engine(version) {
      engineVersion = version;
    },
    node(node, state) {
      options.progress.node(node, state);
      // The first line seen means containers run: only then is this a boot worth remembering.
      bootId ??= begin();
      const key = `${state.phase} ${JSON.stringify(state.figures)}`;
      if (seen.get(node) === key) return;
      seen.set(node, key);
      store.bootPhase(bootId, node, state.phase, at(), state.figures);
    },
    note: (text) => options.progress.note(text),
    done: () => options.progress.done(),
  };
  try {
    const result = await up(plan, session, { ...options, progress });
    if (result.status === "ready") {
      bootId ??= begin();
      store.endBoot(bootId, "ready", at());
      store.deploymentReady({ ...boot, boot_id: bootId, ready_at: at() }, plan.api_key);
      // What the daemon's supervisor boots again when the group fails (src/deploy/supervisor.ts).
      store.savePlan(plan.cluster, plan.deployment, encodeSavedPlan(plan), at());
    }
    return result;
  } catch (e) {
    const outcome = options.signal.aborted ? "interrupted" : "failed";
    // An interrupt is history even before any container ran (during the push or the preflight):
    // the user asked for this boot and stopped it. A refusal is not.
    if (outcome === "interrupted") bootId ??= begin();
    if (bootId !== undefined) {
      const failure = e instanceof RemoteError ? { node: e.node, error: e.message } : { node: "launcher", error: (e as Error).message };
      store.endBoot(bootId, outcome, at(), failure);
    }
    throw e;
  }
}
