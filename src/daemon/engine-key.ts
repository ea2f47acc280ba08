import { UserError } from "../config/errors.js";
import { adapterOf } from "../engine/registry.js";
import type { Plan } from "../plan/plan.js";

/**
 * How a recipe gives `engine` a key, as its adapter declares it: the one wording of the daemon's
 * refusal (engineKeyRefusal) and the gateway's 503 (src/gateway/server.ts, engine_key_missing).
 */
export function addEngineKeyHow(engine: string | undefined): string {
  const where = adapterOf(engine)?.flags.apiKey;
  // Its first flag is the full spelling: the others are aliases (abbreviations) the engine also reads.
  return where === undefined ? "an API key for its engine" : `${where.flags[0] ?? "its API key flag"} KEY to its args (or ${where.env} to its [env])`;
}

/**
 * A daemon whose gateway has API keys takes no boot of a recipe whose engine demands no key: the
 * gateway would refuse to route it anyway (src/gateway/server.ts, engine_key_missing), and its
 * engine, listening on the cluster's network, would answer anyone who goes around the gateway.
 * The refusal, or undefined when the plan's engine has a key.
 */
export function engineKeyRefusal(plan: Pick<Plan, "api_key" | "deployment"> & { readonly recipe: Pick<Plan["recipe"], "file" | "engine" | "id"> }): UserError | undefined {
  if (plan.api_key !== undefined) return undefined;
  const how = addEngineKeyHow(plan.recipe.engine);
  return new UserError(
    `${plan.recipe.file}: recipe ${plan.recipe.id} sets no API key for its engine, and this daemon's gateway has API keys: the engine of ${plan.deployment} would answer anyone on the cluster's network who goes around the gateway, so the gateway does not route it and the daemon does not boot it`,
    `add ${how} in ${plan.recipe.file}, with a key of its own (not a gateway key), then launcher up again`,
  );
}
