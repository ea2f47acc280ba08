/**
 * Body capture for the activity log (off unless the daemon is told a size): at most `maxBytes` of
 * a request's or answer's body, as text, with every key taken out. Headers are never captured (the
 * Authorization header with them); what a body itself may carry is removed here:
 * - the value of a JSON property named as a credential (authorization, api_key, ...);
 * - a `Bearer TOKEN` anywhere;
 * - the keys the gateway knows for this request (the client's and the engine's), wherever they are.
 */

/**
 * The most a record keeps of one body, whatever the daemon is told: the activity log's ring holds
 * 1000 records, so bodies cost at most 32 MiB of memory (the store's rows are fewer with bodies:
 * src/daemon/live-sources.ts).
 */
export const MAX_CAPTURE_BYTES = 16 * 1024;

const REDACTED = "[redacted]";
// A property value cut by the window's end (no closing quote) is taken to the end.
const CREDENTIAL_FIELD = /"(authorization|proxy-authorization|api[-_]?key|x-api-key|secret|client[-_]secret|password|token|access[-_]token|refresh[-_]token)"(\s*:\s*)"(?:[^"\\]|\\.)*(?:"|\\?$)/gi;
const BEARER = /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi;

/** `text` with every credential this module knows of replaced. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text.replace(CREDENTIAL_FIELD, `"$1"$2"${REDACTED}"`).replace(BEARER, `Bearer ${REDACTED}`);
  for (const s of secrets) if (s !== "") out = out.split(s).join(REDACTED);
  return out;
}

/**
 * A client's key comes in a header, and Node refuses headers past 16 KiB in all (doc/api/cli.md
 * --max-http-header-size: "Defaults to 16 KiB"): no client key is longer.
 */
const LONGEST_CLIENT_KEY = 16 * 1024;

/**
 * How much of a body to hold for a capture of `maxBytes`: what is kept, plus room for the longest
 * secret (a client's key, or `engineKey`) and a margin, so that a key cut where the capture ends
 * is whole, and found, in what is held.
 */
export function captureWindow(maxBytes: number, engineKey?: string): number {
  return Math.max(0, Math.min(maxBytes, MAX_CAPTURE_BYTES)) + Math.max(LONGEST_CLIENT_KEY, Buffer.byteLength(engineKey ?? "")) + 1024;
}

/**
 * The first `maxBytes` of a body as redacted text. Redaction runs over a window longer than what
 * is kept (by the longest secret and a margin), so that a key cut at the end of what is kept
 * was whole, and found, in the window.
 */
export function capturedBody(body: Buffer, maxBytes: number, secrets: readonly string[]): string {
  const keep = Math.max(0, Math.min(maxBytes, MAX_CAPTURE_BYTES));
  const longest = secrets.reduce((a, x) => (Buffer.byteLength(x) > Buffer.byteLength(a) ? x : a), "");
  const window = redact(body.subarray(0, captureWindow(maxBytes, longest)).toString("utf8"), secrets);
  const bytes = Buffer.from(window, "utf8");
  // A character cut in two at the end is dropped rather than shown as U+FFFD.
  return bytes.length <= keep ? window : bytes.subarray(0, keep).toString("utf8").replace(/\uFFFD$/, "");
}

/** The first bytes of a stream of chunks, copied (chunks are the engine's buffers), up to `maxBytes` in all. */
export class BodyPrefix {
  readonly #parts: Buffer[] = [];
  #room: number;

  constructor(maxBytes: number) {
    this.#room = maxBytes;
  }

  add(chunk: Buffer): void {
    if (this.#room <= 0) return;
    const part = Buffer.from(chunk.subarray(0, this.#room));
    this.#parts.push(part);
    this.#room -= part.length;
  }

  bytes(): Buffer {
    return Buffer.concat(this.#parts);
  }
}
