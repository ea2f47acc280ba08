/*
 * A JSON checker over bytes (RFC 8259's grammar): whether a body is JSON, how deep it nests, and
 * where its top-level "model" member's value is, without building a string or an object of it.
 * JSON.parse of the decoded text would cost the body's size twice more (the string, the objects)
 * and stringify once more for the lane rewrite. It accepts what `JSON.parse(buf.toString("utf8"))`
 * accepts: bytes of 0x80 and above only inside strings (the decoder turns bad UTF-8 there into
 * U+FFFD, which a string may hold, and it never swallows an ASCII byte, WHATWG Encoding
 * "UTF-8 decoder"), so the structure is the same bytewise. A property test holds the two alike.
 */

export type JsonScan =
  | { readonly kind: "json"; readonly model: { readonly start: number; readonly end: number } | undefined }
  | { readonly kind: "too-deep" }
  | { readonly kind: "invalid"; readonly at: number; readonly why: string };

class Invalid {
  constructor(
    readonly at: number,
    readonly why: string,
  ) {}
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const isDigit = (b: number | undefined): boolean => b !== undefined && b >= 0x30 && b <= 0x39;
const isHex = (b: number | undefined): boolean => b !== undefined && (isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
// The escapes a JSON string may hold after a backslash: " \ / b f n r t (u is checked apart).
const SIMPLE_ESCAPES = new Set([0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74]);
const LITERALS: readonly (readonly [number, Uint8Array])[] = [
  [0x74, Buffer.from("true")],
  [0x66, Buffer.from("false")],
  [0x6e, Buffer.from("null")],
];
const MODEL_KEY = Buffer.from('"model"');

function describe(b: number | undefined): string {
  if (b === undefined) return "unexpected end";
  return b >= 0x21 && b <= 0x7e ? `unexpected ${JSON.stringify(String.fromCharCode(b))}` : `unexpected byte 0x${b.toString(16).padStart(2, "0")}`;
}

function skipSpace(b: Uint8Array, i: number): number {
  let j = i;
  for (let c = b[j]; c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; c = b[++j]);
  return j;
}

/** The index after the string that opens at `i` (a quote). */
function scanString(b: Uint8Array, i: number): number {
  for (let j = i + 1; j < b.length; j++) {
    const c = b[j] as number;
    if (c === QUOTE) return j + 1;
    if (c < 0x20) throw new Invalid(j, "a control character inside a string");
    if (c !== BACKSLASH) continue;
    const e = b[++j];
    if (e === 0x75) {
      if (!(isHex(b[j + 1]) && isHex(b[j + 2]) && isHex(b[j + 3]) && isHex(b[j + 4]))) throw new Invalid(j, "a \\u escape without four hex digits");
      j += 4;
    } else if (e === undefined || !SIMPLE_ESCAPES.has(e)) throw new Invalid(j, "an invalid escape");
  }
  throw new Invalid(b.length, "an unterminated string");
}

function digits(b: Uint8Array, i: number): number {
  let j = i;
  while (isDigit(b[j])) j++;
  if (j === i) throw new Invalid(i, `${describe(b[i])} where a digit belongs`);
  return j;
}

/** The index after the number at `i`: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
function scanNumber(b: Uint8Array, i: number): number {
  let j = b[i] === MINUS ? i + 1 : i;
  j = b[j] === 0x30 ? j + 1 : digits(b, j);
  if (b[j] === 0x2e) j = digits(b, j + 1);
  if (b[j] === 0x65 || b[j] === 0x45) j = digits(b, b[j + 1] === 0x2b || b[j + 1] === MINUS ? j + 2 : j + 1);
  return j;
}

/** The index after the scalar value (string, number, literal) at `i`. */
function scanScalar(b: Uint8Array, i: number): number {
  const c = b[i];
  if (c === QUOTE) return scanString(b, i);
  if (c === MINUS || isDigit(c)) return scanNumber(b, i);
  const literal = LITERALS.find(([first]) => first === c)?.[1];
  if (literal === undefined) throw new Invalid(i, `${describe(c)} where a value belongs`);
  for (let k = 0; k < literal.length; k++) if (b[i + k] !== literal[k]) throw new Invalid(i + k, describe(b[i + k]));
  return i + literal.length;
}

/** Whether the key b[start, end) (quotes included) reads as "model", escapes decoded. */
function isModelKey(b: Uint8Array, start: number, end: number): boolean {
  const raw = b.subarray(start, end);
  if (Buffer.compare(raw, MODEL_KEY) === 0) return true;
  // "mod\u0065l" is "model" to every JSON reader; only short keys with escapes are worth decoding.
  return end - start <= 64 && raw.includes(BACKSLASH) && JSON.parse(Buffer.from(raw).toString("utf8")) === "model";
}

/** Where a key ends and whether it is the top-level "model": the key at `i`, then its colon and spaces. */
function scanKey(b: Uint8Array, i: number, depth: number): { next: number; model: boolean } {
  if (b[i] !== QUOTE) throw new Invalid(i, `${describe(b[i])} where a key belongs`);
  const end = scanString(b, i);
  const colon = skipSpace(b, end);
  if (b[colon] !== COLON) throw new Invalid(colon, `${describe(b[colon])} where ":" belongs`);
  return { next: skipSpace(b, colon + 1), model: depth === 1 && isModelKey(b, i, end) };
}

/**
 * One pass, an explicit stack (no recursion: a million brackets cost no call stack), stopping at
 * the first error or the first level past `maxDepth`.
 */
export function scanJson(b: Uint8Array, maxDepth: number): JsonScan {
  const stack: number[] = [];
  let model: { start: number; end: number } | undefined;
  let modelStart = -1;
  let i = skipSpace(b, 0);
  try {
    for (;;) {
      // A value starts at i.
      const c = b[i];
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (stack.length >= maxDepth) return { kind: "too-deep" };
        stack.push(c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY);
        i = skipSpace(b, i + 1);
        if (b[i] !== stack.at(-1)) {
          if (c === OPEN_OBJECT) {
            const key = scanKey(b, i, stack.length);
            i = key.next;
            if (key.model) modelStart = i;
          }
          continue;
        }
        stack.pop();
        i++;
      } else i = scanScalar(b, i);
      // A value ended at i: close what it ends, up to the next value or the end.
      for (;;) {
        if (modelStart !== -1 && stack.length === 1) {
          model = { start: modelStart, end: i };
          modelStart = -1;
        }
        i = skipSpace(b, i);
        const close = stack.at(-1);
        if (close === undefined) {
          if (i !== b.length) throw new Invalid(i, `${describe(b[i])} after the end of the JSON value`);
          return { kind: "json", model };
        }
        if (b[i] === close) {
          stack.pop();
          i++;
          continue;
        }
        if (b[i] !== COMMA) throw new Invalid(i, `${describe(b[i])} where "," or "${String.fromCharCode(close)}" belongs`);
        i = skipSpace(b, i + 1);
        if (close === CLOSE_OBJECT) {
          const key = scanKey(b, i, stack.length);
          i = key.next;
          if (key.model) modelStart = i;
        }
        break;
      }
    }
  } catch (e) {
    if (e instanceof Invalid) return { kind: "invalid", at: e.at, why: e.why };
    throw e;
  }
}
