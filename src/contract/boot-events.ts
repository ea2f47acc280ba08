import * as z from "zod";

/**
 * A boot's events on the wire: what the control API streams (NDJSON) and the read API's `boot`
 * events carry, one schema for every reader. src/boot/up-events.ts encodes them from its typed
 * UpEvent and decodes them back; the page (web/) reads them with this same schema, without the
 * boot's code. The boot state and the outcome are the daemon's own values, sent as they are:
 * checked for their outline only (a reader takes phase, figures and the outcome's fields).
 */

const Loc = z.object({ file: z.string(), line: z.number(), col: z.number() });
export const DiagnosticSchema = z.object({ severity: z.enum(["error", "warning"]), loc: Loc, message: z.string(), hint: z.string().exactOptional() });

/** An error as it crosses the wire (src/boot/up-events.ts encodeError / decodeError). */
export const EncodedErrorSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("user"), message: z.string(), hint: z.string().exactOptional(), diagnostics: z.array(DiagnosticSchema) }),
  z.object({
    kind: z.literal("remote"),
    node: z.string(),
    message: z.string(),
    detail: z.string().exactOptional(),
    hint: z.string().exactOptional(),
    /** The node (and rank) blamed, as values (`node` is the words naming them). */
    blamed: z.object({ node: z.string(), rank: z.number().int().exactOptional() }).exactOptional(),
  }),
  z.object({ kind: z.literal("interrupted"), signal: z.string(), what: z.string() }),
  z.object({ kind: z.literal("bug"), message: z.string() }),
]);

const BootStateSchema = z.looseObject({ phase: z.string(), figures: z.record(z.string(), z.string()), ready: z.boolean(), lastLines: z.array(z.string()) });
const OutcomeSchema = z.looseObject({ status: z.enum(["ready", "already-running"]), deployment: z.string(), endpoint: z.string(), served_model: z.string(), seconds: z.number() });
const t = z.number();

/** Every event a boot says, by `type`; `t` is ms since the epoch on the daemon's clock. */
export const BootEventWireSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("accepted"), deployment: z.string(), cluster: z.string(), lane: z.string().exactOptional(), t }),
  z.object({ type: z.literal("say"), text: z.string(), t }),
  z.object({ type: z.literal("warn"), text: z.string(), t }),
  z.object({ type: z.literal("diagnostics"), diagnostics: z.array(DiagnosticSchema), t }),
  z.object({ type: z.literal("note"), text: z.string(), t }),
  z.object({ type: z.literal("node"), node: z.string(), state: BootStateSchema, t }),
  z.object({ type: z.literal("memory"), node: z.string(), sample: z.object({ totalKiB: z.number(), availableKiB: z.number() }), t }),
  z.object({ type: z.literal("done"), t }),
  z.object({ type: z.literal("result"), outcome: OutcomeSchema, t }),
  z.object({ type: z.literal("error"), error: EncodedErrorSchema, t }),
]);
export type BootEventWire = z.infer<typeof BootEventWireSchema>;
