import { createHash, timingSafeEqual } from "node:crypto";

const digest = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

/** Keys from a key file: one per line; blank lines and `#` comments are skipped. */
export function parseKeyFile(text: string): string[] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** The key a client sent: `Authorization: Bearer KEY` (what OpenAI clients send) or `x-api-key`. */
export function presentedKey(authorization: string | undefined, xApiKey: string | string[] | undefined): string | undefined {
  const m = authorization === undefined ? null : /^Bearer\s+(.+)$/i.exec(authorization.trim());
  if (m) return m[1];
  return typeof xApiKey === "string" ? xApiKey : undefined;
}

/**
 * A check that takes the same time whatever the key: equal-length digests are compared with
 * timingSafeEqual, and every configured key is compared, even after a match.
 */
export function keyChecker(keys: readonly string[]): (presented: string | undefined) => boolean {
  const digests = keys.map(digest);
  return (presented) => {
    const d = digest(presented ?? "");
    let ok = false;
    for (const k of digests) ok = timingSafeEqual(k, d) || ok;
    return ok && presented !== undefined;
  };
}
