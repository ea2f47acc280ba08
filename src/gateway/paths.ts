/**
 * The request path the gateway routes on and forwards, checked to be the one form an engine reads
 * the same way. The gateway matches routes on the raw path, and an engine's framework decodes and
 * resolves it again (Starlette matches the %-decoded path), so any path that a normaliser would
 * change could mean one route to the gateway and another to the engine: `/v1/../collective_rpc`,
 * `/v1/%2e%2e/x`, `/v1/chat%2Fcompletions`, `//v1/x`. Such a path is refused, never rewritten.
 */

export type PathVerdict =
  | { readonly ok: true; readonly path: string; readonly query: string }
  | { readonly ok: false; readonly code: "invalid_path"; readonly message: string };

/** Longer request paths are refused; no route is near this. */
export const MAX_PATH_CHARS = 2048;

// RFC 3986 section 2.3: unreserved characters, which percent-encoding must not be used for (a
// path with them encoded "changes under normalisation" to its decoded form).
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
// RFC 3986 section 3.3: pchar = unreserved / pct-encoded / sub-delims / ":" / "@", and "/" between segments.
const PATH_CHARS = /^[A-Za-z0-9\-._~%!$&'()*+,;=:@/]*$/;

const refuse = (path: string, why: string): PathVerdict => ({
  ok: false,
  code: "invalid_path",
  message: `the request path ${JSON.stringify(path.slice(0, 200))} ${why}: send the path in its plain form (no dot segments, no empty segments, no encoded "/", ".", or letters)`,
});

/** Each %XX of the path decoded to its character, or why the path cannot pass. */
function checkEscapes(path: string, encodedSlash: boolean): string | undefined {
  for (let i = path.indexOf("%"); i !== -1; i = path.indexOf("%", i + 1)) {
    const hex = path.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return `has a "%" that is not followed by two hex digits`;
    const c = String.fromCharCode(parseInt(hex, 16));
    if ((c === "/" && !encodedSlash) || c === "\\") return `encodes a path separator (%${hex})`;
    if (UNRESERVED.test(c)) return `encodes ${JSON.stringify(c)} (%${hex}), which a server decodes before routing`;
  }
  return undefined;
}

function decodesAsUtf8(path: string): boolean {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The request target's path and query when its path is canonical: absolute, no `.` or `..`
 * segment, no empty segment (`//`, a trailing `/`), no %-escape of an unreserved character or of
 * `/` or `\`, only the characters RFC 3986 allows in a path. Anything else is refused.
 * `encodedSlash`: a `%2F` may stand inside a segment (a model id such as `org/name` in a path the
 * gateway answers itself and never forwards).
 */
export function canonicalPath(target: string, encodedSlash = false): PathVerdict {
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? "" : target.slice(q);
  if (!path.startsWith("/")) return refuse(path, "is not an absolute path");
  if (path.length > MAX_PATH_CHARS) return refuse(path, `is longer than ${MAX_PATH_CHARS} characters`);
  if (!PATH_CHARS.test(path)) return refuse(path, "has characters a path may not carry unencoded");
  const escape = checkEscapes(path, encodedSlash);
  if (escape !== undefined) return refuse(path, escape);
  // Escapes of bytes that are not UTF-8 (%C3 alone, %FF): the gateway's own handlers decode the
  // path (decodeURIComponent throws URIError on them), and a framework that decodes them into
  // U+FFFD routes on a path the gateway never saw.
  if (!decodesAsUtf8(path)) return refuse(path, "has %-escapes that are not UTF-8");
  if (path === "/") return { ok: true, path, query };
  for (const seg of path.slice(1).split("/")) {
    if (seg === "") return refuse(path, "has an empty segment");
    if (seg === "." || seg === "..") return refuse(path, `has a ${JSON.stringify(seg)} segment`);
  }
  return { ok: true, path, query };
}
