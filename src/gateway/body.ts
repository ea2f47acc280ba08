import { Readable } from "node:stream";
import { scanJson } from "./json-scan.js";

/**
 * How deep a request body's JSON may nest. Real requests stay far below (a chat message with
 * content parts is 5 deep, a tool's JSON schema a few dozen); the engines' own JSON readers give
 * up somewhere above 200, and recursive readers overflow their stack between 1,000 and 10,000.
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;

/** Form bodies (audio uploads) go to the engine untouched, streamed; every other body is JSON. */
const FORM_TYPES = ["multipart/form-data", "application/x-www-form-urlencoded"];

/** The media type of a Content-Type header, lower case, without its parameters. */
const mediaOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";

/** A form body: streamed to the engine as it arrives, never read by the gateway (it names no model). */
export const isFormBody = (contentType: string | undefined): boolean => FORM_TYPES.includes(mediaOf(contentType));

/** A streamed body passed the most one request may send: the stream fails with it, and its upstream request with that. */
export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body larger than ${limit} bytes`);
    this.name = "BodyTooLargeError";
  }
}

/**
 * `from`'s bytes, passed on as they come until more than `limit` have: then the stream fails with
 * BodyTooLargeError (its `errored`), which aborts the upstream request that reads it. `from` is
 * left unread, not destroyed: its socket still has the 413 to carry.
 */
export function capped(from: Readable, limit: number): Readable {
  async function* bytes(): AsyncGenerator<Buffer> {
    let n = 0;
    for await (const c of from.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > limit) throw new BodyTooLargeError(limit);
      yield c;
    }
  }
  return Readable.from(bytes(), { objectMode: false });
}

/** Model names longer than this are no served name: such a request is refused unread. */
export const MAX_MODEL_NAME_BYTES = 1024;

/** The top-level `model` member of a JSON object body: where its value is, and its name when it is a string. */
export interface ModelField {
  /** The value's bytes: body[start, end) (a string with its quotes). */
  readonly start: number;
  readonly end: number;
  /** The string, when the value is one of at most MAX_MODEL_NAME_BYTES; undefined: not a string. */
  readonly name: string | undefined;
  /** A string longer than MAX_MODEL_NAME_BYTES (not decoded). */
  readonly tooLong: boolean;
}

export type BodyReading =
  | { readonly kind: "json"; readonly model: ModelField | undefined }
  | { readonly kind: "raw" }
  | { readonly kind: "invalid"; readonly code: "json_too_deep" | "invalid_json"; readonly message: string };

/**
 * What a request body is, whatever its Content-Type says: clients that leave the header out (or
 * send `text/plain`) still mean JSON, and the model in it must route and be rewritten. One pass
 * over the bytes (./json-scan.ts) checks that it is JSON no deeper than `maxDepth` and finds its
 * `model`; nothing is parsed into objects or strings, so a 50 MB body costs its own bytes only.
 */
export function readRequestBody(raw: Uint8Array, contentType: string | undefined, maxDepth = MAX_JSON_DEPTH): BodyReading {
  if (raw.length === 0 || isFormBody(contentType)) return { kind: "raw" };
  const scanned = scanJson(raw, maxDepth);
  if (scanned.kind === "too-deep") return { kind: "invalid", code: "json_too_deep", message: `the request body nests deeper than ${maxDepth} levels` };
  if (scanned.kind === "invalid") return { kind: "invalid", code: "invalid_json", message: `the request body is not valid JSON: ${scanned.why} at byte ${scanned.at}` };
  if (scanned.model === undefined) return { kind: "json", model: undefined };
  const { start, end } = scanned.model;
  const isString = raw[start] === QUOTE;
  const tooLong = isString && end - start - 2 > MAX_MODEL_NAME_BYTES;
  // A short string: JSON.parse decodes its escapes exactly as the engine will.
  const name = isString && !tooLong ? (JSON.parse(Buffer.from(raw.buffer, raw.byteOffset + start, end - start).toString("utf8")) as string) : undefined;
  return { kind: "json", model: { start, end, name, tooLong } };
}

/**
 * The body with its model's value replaced by `served` (a JSON string), as parts that share the
 * original's bytes: nothing is copied. JSON.parse keeps the last of repeated keys, and so do the
 * engines' readers (Python's json): the one replaced is the last.
 */
export function rewriteModel(raw: Buffer, model: ModelField, served: string): Buffer[] {
  return [raw.subarray(0, model.start), Buffer.from(JSON.stringify(served)), raw.subarray(model.end)];
}
