import * as z from "zod";
import { START_ORDERS } from "../engine/adapter.js";
import type { Plan } from "./plan.js";

/**
 * A plan as the store keeps it (written by `up` once the deployment is ready, read by the daemon's
 * supervisor to boot the same containers again). Versioned: a store written by a later launcher
 * with another shape is refused here, not half-read.
 */
const SAVED_PLAN_VERSION = 1;

const nodeSchema = z.looseObject({
  rank: z.number().int(),
  node: z.string().min(1),
  container: z.string().min(1),
  labels: z.record(z.string(), z.string()),
  argv: z.array(z.string()).min(1),
});
const planSchema = z.looseObject({
  deployment: z.string().min(1),
  cluster: z.string(),
  endpoint: z.string(),
  served_model: z.string(),
  recipe_hash: z.string(),
  recipe: z.looseObject({ id: z.string(), engine: z.string(), docker_image: z.string() }),
  nodes: z.array(nodeSchema).min(1),
  start_order: z.array(z.string()),
  // A plan kept before it was written says its order by start_order alone: its head first or last.
  start: z.enum(START_ORDERS).optional(),
});
const savedSchema = z.object({ version: z.literal(SAVED_PLAN_VERSION), plan: planSchema });

export const encodeSavedPlan = (plan: Plan): string => JSON.stringify({ version: SAVED_PLAN_VERSION, plan });

/** The plan, or what is wrong with the saved text. */
export function decodeSavedPlan(text: string): { ok: true; plan: Plan } | { ok: false; problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { ok: false, problem: `not JSON: ${(e as Error).message}` };
  }
  const r = savedSchema.safeParse(json);
  if (!r.success) return { ok: false, problem: r.error.issues.slice(0, 3).map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
  // The fields checked above are the ones a boot reads first; the rest is what `up` wrote itself.
  const plan = r.data.plan;
  const start = plan.start ?? (plan.start_order[0] === plan.nodes.find((n) => n.rank === 0)?.node ? "head first" : "workers first");
  return { ok: true, plan: { ...plan, start } as unknown as Plan };
}
