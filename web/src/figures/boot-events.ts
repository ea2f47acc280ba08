/**
 * The boot events the time line reads, checked the way src/boot/up-events.ts checks them (its
 * EventSchema: the same fields, the same outline of the boot state) but only the four kinds the
 * page draws. Not that module's decodeEvent: importing it brings src/boot/up.ts' types, and with
 * them src/boot/readiness.ts, which needs Node's (the page is typechecked with the DOM's lib only).
 */
import { z } from "zod";
import { Interrupted } from "../../../src/config/abort.js";

const Loc = z.object({ file: z.string(), line: z.number(), col: z.number() });
const DiagnosticSchema = z.object({ severity: z.enum(["error", "warning"]), loc: Loc, message: z.string(), hint: z.exactOptional(z.string()) });

export const EncodedErrorSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("user"), message: z.string(), hint: z.exactOptional(z.string()), diagnostics: z.array(DiagnosticSchema) }),
  z.object({ kind: z.literal("remote"), node: z.string(), message: z.string(), detail: z.exactOptional(z.string()), hint: z.exactOptional(z.string()) }),
  z.object({ kind: z.literal("interrupted"), signal: z.string(), what: z.string() }),
  z.object({ kind: z.literal("bug"), message: z.string() }),
]);
export type PageEncodedError = z.infer<typeof EncodedErrorSchema>;

const t = z.number();
const BootEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("node"), node: z.string(), state: z.looseObject({ phase: z.string(), figures: z.record(z.string(), z.string()) }), t }),
  z.object({ type: z.literal("memory"), node: z.string(), sample: z.object({ totalKiB: z.number(), availableKiB: z.number() }), t }),
  z.object({ type: z.literal("result"), t }).loose(),
  z.object({ type: z.literal("error"), error: EncodedErrorSchema, t }),
]);
export type BootEvent = z.infer<typeof BootEventSchema>;

/** An event the time line draws, or undefined for any other (accepted, say, note, done, ...) or a malformed one. */
export function readBootEvent(value: unknown): BootEvent | undefined {
  const r = BootEventSchema.safeParse(value);
  return r.success ? r.data : undefined;
}

/** An error's message as the CLI words it (src/boot/up-events.ts decodeError, then its class). */
export function errorMessage(e: PageEncodedError): string {
  return e.kind === "interrupted" ? new Interrupted(e.signal, e.what).message : e.message;
}
