/**
 * How deep a request body's JSON may nest. Real requests stay far below (a chat message with
 * content parts is 5 deep, a tool's JSON schema a few dozen); the engines' own JSON readers give
 * up somewhere above 200, and the gateway's own `JSON.stringify` (the lane-alias rewrite) overflows
 * the stack between 1,000 and 10,000 (V8's `JSON.parse` is iterative and does not).
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * True when the text nests objects/arrays deeper than `max`. One pass over the bytes with a
 * counter, no recursion, stopping at the first level too deep; brackets inside strings do not
 * count. UTF-8 is safe to scan bytewise: `"`, `\`, `[`, `{` never occur inside a multi-byte
 * character. Not a validator: malformed text is left to `JSON.parse`.
 */
export function jsonDepthExceeds(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) depth--;
  }
  return false;
}

/** Form bodies (audio uploads) go to the engine untouched; every other body is JSON. */
const FORM_TYPES = ["multipart/form-data", "application/x-www-form-urlencoded"];

export type BodyReading =
  | { readonly kind: "json"; readonly value: unknown }
  | { readonly kind: "raw" }
  | { readonly kind: "invalid"; readonly code: "json_too_deep" | "invalid_json"; readonly message: string };

/**
 * What a request body is, whatever its Content-Type says: clients that leave the header out (or
 * send `text/plain`) still mean JSON, and the model in it must route and be rewritten. The depth
 * scan runs first, so that nothing downstream (parse, rewrite, the engine) meets a body too deep.
 */
export function readRequestBody(raw: Uint8Array, contentType: string | undefined, maxDepth = MAX_JSON_DEPTH): BodyReading {
  const media = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (raw.length === 0 || FORM_TYPES.includes(media)) return { kind: "raw" };
  if (jsonDepthExceeds(raw, maxDepth)) return { kind: "invalid", code: "json_too_deep", message: `the request body nests deeper than ${maxDepth} levels` };
  try {
    return { kind: "json", value: JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString("utf8")) as unknown };
  } catch (e) {
    return { kind: "invalid", code: "invalid_json", message: `the request body is not valid JSON: ${(e as Error).message}` };
  }
}
