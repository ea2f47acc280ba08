import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

// RFC 9110 7.6.1: meaningful for one connection only, never forwarded by a proxy.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);

function connectionTokens(value: string | string[] | undefined): Set<string> {
  const text = Array.isArray(value) ? value.join(",") : (value ?? "");
  return new Set(text.split(",").map((t) => t.trim().toLowerCase()).filter(Boolean));
}

/** The headers to pass on: hop-by-hop ones and those `Connection` names are dropped, plus `drop`. */
export function forwardHeaders(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>, drop: ReadonlySet<string>): OutgoingHttpHeaders {
  const named = connectionTokens(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    const key = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(key) || named.has(key) || drop.has(key)) continue;
    out[key] = v;
  }
  return out;
}

/**
 * Not forwarded upstream: the client's key is the gateway's, the length is set anew, and
 * `Expect: 100-continue` was already answered by this server (undici refuses to send it).
 */
export const REQUEST_DROP: ReadonlySet<string> = new Set(["host", "authorization", "x-api-key", "content-length", "expect", "cookie"]);
/**
 * Not passed back: an engine answers on the daemon's origin, where the page's session cookie
 * lives, so it sets none (nor, going up, does it get the browser's cookies: REQUEST_DROP).
 */
export const RESPONSE_DROP: ReadonlySet<string> = new Set(["set-cookie"]);
