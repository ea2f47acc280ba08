import * as z from "zod";

/**
 * Where the daemon's control API lives, its routes and the answers that are not a boot's events
 * (those are src/boot/up-events.ts's; src/daemon/protocol.ts has the rest and re-exports these):
 * beside the OpenAI routes under /v1, never mixed with them, so the gateway can hand it over
 * before it looks at an inference key. Only zod here: the page's bundle imports this file.
 */
export const CONTROL_PREFIX = "/launcher/v1/";

const C = CONTROL_PREFIX;

export const CONTROL_PATHS = {
  /** POST: submit a boot; the answer streams its events (one JSON object per line) to its end. GET: the boots. */
  boots: `${C}boots`,
  /** DELETE: cancel a boot in progress (its rollback runs); the answer is its final event. */
  boot: (name: string): string => `${C}boots/${encodeURIComponent(name)}`,
  /** GET: a boot's events from its start, then each new one until its end. */
  events: (name: string): string => `${C}boots/${encodeURIComponent(name)}/events`,
  /** POST (body StopRequestSchema, may be empty): `launcher down` of a deployment the daemon sees; the answer is StopAnswerSchema. */
  stop: (name: string): string => `${C}deployments/${encodeURIComponent(name)}/stop`,
} as const;

/** The patterns the server routes, with `{name}` for a boot's or a deployment's name. */
export const CONTROL_ROUTES = {
  boots: `${C}boots`,
  boot: `${C}boots/{name}`,
  events: `${C}boots/{name}/events`,
  stop: `${C}deployments/{name}/stop`,
} as const;

/** The longest grace between SIGTERM and kill a stop may ask for (an hour: a drain is never longer). */
export const MAX_STOP_GRACE_SECONDS = 3600;

/**
 * `POST stop`'s body; an empty body is `{}` (the page sends none). `grace_seconds`: SIGTERM to kill
 * (default the CLI's, 10 s). `cluster`: the cluster's name, for a name discovery sees on two.
 * `bare`: the path's name is a command line's bare target (`launcher down NAME`), resolved as down
 * resolves it (a name that fits several deployments is refused; a lane of that name is emptied);
 * without it the name is a deployment's (`deployment/NAME`).
 */
export const StopRequestSchema = z.strictObject({
  grace_seconds: z.number().int().min(0).max(MAX_STOP_GRACE_SECONDS).optional(),
  cluster: z.string().min(1).max(256).optional(),
  bare: z.boolean().optional(),
});
export type StopRequest = z.infer<typeof StopRequestSchema>;

/** A container a stop removed on a node. */
const StoppedContainerSchema = z.object({ container: z.string(), deployment: z.string(), was_running: z.boolean() });

/**
 * What a stop did on one node: `removed` its containers (at least one), `nothing` there to stop,
 * or `unreachable` with why: what runs there was NOT stopped (never reported as stopped).
 */
export const StopNodeSchema = z.discriminatedUnion("outcome", [
  z.object({ node: z.string(), outcome: z.literal("removed"), containers: z.array(StoppedContainerSchema).min(1) }),
  z.object({ node: z.string(), outcome: z.literal("nothing") }),
  z.object({ node: z.string(), outcome: z.literal("unreachable"), reason: z.string() }),
]);
export type StopNode = z.infer<typeof StopNodeSchema>;

/** A boot of the deployment the daemon was running, cancelled first (its rollback ran). */
export const CancelledBootSchema = z.object({
  /** rolled_back: the boot ended on the cancel; ready: it had become ready before the cancel reached it. */
  outcome: z.enum(["rolled_back", "ready"]),
  message: z.string(),
  /** The rollback's report lines (`rolled back: ...`, `NOT stopped on NODE ...`). */
  rollback: z.array(z.string()),
  /** The boot's final event as the control API streams it (src/boot/up-events.ts decodes it). */
  event: z.looseObject({ type: z.string(), t: z.number() }),
});

/** `POST stop`'s answer: what is so after it, nothing more. */
export const StopAnswerSchema = z.object({
  deployment: z.string(),
  cluster: z.string(),
  /**
   * No node that answered holds it, and no node that may run it failed to answer (the store then
   * records it stopped). False: something of it may still run (see `nodes` and `again`).
   */
  stopped: z.boolean(),
  /** The deployments the target named on the nodes that answered: this one, or none when nothing of it was left there. */
  deployments: z.array(z.string()),
  cancelled: CancelledBootSchema.optional(),
  /** Each node of the cluster, as the stop found it. */
  nodes: z.array(StopNodeSchema),
  /** The lane that served it and is now empty; absent: none was emptied. */
  lane: z.string().optional(),
  /** The command that finishes the job once every node answers; present only when a node did not answer. */
  again: z.string().optional(),
});
export type StopAnswer = z.infer<typeof StopAnswerSchema>;

/** The answer's JSON: only the contract's fields. */
export const encodeStop = (answer: StopAnswer): string => JSON.stringify(StopAnswerSchema.parse(answer));

/** An answer as a client reads it, or what is wrong with it. */
export function decodeStop(value: unknown): { ok: true; answer: StopAnswer } | { ok: false; problem: string } {
  const r = StopAnswerSchema.safeParse(value);
  if (!r.success) return { ok: false, problem: r.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(answer)"}: ${i.message}`).join("; ") };
  return { ok: true, answer: r.data };
}

/** A control API refusal's body: `code` is what a client tells refusals apart by; `hint`, what to do, when there is one. */
export const ControlErrorSchema = z.object({ error: z.object({ message: z.string(), type: z.string(), code: z.string(), hint: z.string().optional() }) });
