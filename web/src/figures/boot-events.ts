/**
 * The boot events the time line reads: the contract's wire schema (src/contract/boot-events.ts,
 * the one the daemon's own decoder uses), kept to the four kinds the page draws.
 */
import { BootEventWireSchema, type BootEventWire, type EncodedErrorSchema } from "../../../src/contract/boot-events.js";
import type { z } from "zod";
import { Interrupted } from "../../../src/config/abort.js";

export type PageEncodedError = z.infer<typeof EncodedErrorSchema>;

const DRAWN = ["node", "memory", "result", "error"] as const;
export type BootEvent = Extract<BootEventWire, { type: (typeof DRAWN)[number] }>;

const drawn = (e: BootEventWire): e is BootEvent => (DRAWN as readonly string[]).includes(e.type);

/** An event the time line draws, or undefined for any other (accepted, say, note, done, ...) or a malformed one. */
export function readBootEvent(value: unknown): BootEvent | undefined {
  const r = BootEventWireSchema.safeParse(value);
  return r.success && drawn(r.data) ? r.data : undefined;
}

/** An error's message as the CLI words it (src/boot/up-events.ts decodeError, then its class). */
export function errorMessage(e: PageEncodedError): string {
  return e.kind === "interrupted" ? new Interrupted(e.signal, e.what).message : e.message;
}
