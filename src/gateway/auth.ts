import { createHash, timingSafeEqual } from "node:crypto";
import { UserError } from "../config/errors.js";

const digest = (s: string): Buffer => createHash("sha256").update(s, "utf8").digest();

/** A key made of nothing (or only blanks) is never a key, wherever it comes from. */
const blank = (key: string): boolean => key.trim() === "";

/** Keys from a key file: one per line, trimmed; blank lines and `#` comments are skipped. */
export function parseKeyFile(text: string): string[] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

export interface KeySources {
  /** Every `--api-key` given, as given. */
  readonly flags: readonly string[];
  /** `$LAUNCHER_API_KEY`, undefined when unset. */
  readonly env: string | undefined;
  /** The key file's path and text, when `--api-key-file` was given. */
  readonly file?: { readonly path: string; readonly text: string };
  /** What the keys are called in the errors (default API_KEY_WORDS); `env` is the variable read into `env`. */
  readonly words?: KeyWords;
}

/** How the errors of a set of keys name their variable and their file. */
export interface KeyWords {
  readonly env: string;
  readonly file: string;
}

/** The inference keys' words. */
export const API_KEY_WORDS: KeyWords = { env: "LAUNCHER_API_KEY", file: "API key file" };

/**
 * The keys the gateway accepts. Never a blank one: an empty `--api-key` (what `--api-key "$KEY"`
 * gives when KEY is unset) or a `$LAUNCHER_API_KEY` that holds no key is a user error, as the
 * user meant to set a key and did not; blank entries between commas and blank lines are skipped.
 * No message repeats a key.
 */
export function collectKeys(sources: KeySources): string[] {
  const words = sources.words ?? API_KEY_WORDS;
  const keys: string[] = [];
  for (const k of sources.flags) {
    if (blank(k)) throw new UserError("--api-key was given an empty key (probably an unset variable: --api-key \"$KEY\" with KEY unset)", "set the variable, or pass --api-key-file FILE");
    keys.push(k.trim());
  }
  if (sources.env !== undefined) {
    const fromEnv = sources.env.split(",").map((k) => k.trim()).filter((k) => k !== "");
    if (fromEnv.length === 0) throw new UserError(`${words.env} is set but holds no key (probably set from an unset variable)`, "set it to KEY[,KEY...], or unset it");
    keys.push(...fromEnv);
  }
  if (sources.file !== undefined) {
    const fromFile = parseKeyFile(sources.file.text);
    if (fromFile.length === 0) throw new UserError(`the ${words.file} ${sources.file.path} holds no key`, "one key per line; # starts a comment");
    keys.push(...fromFile);
  }
  return keys;
}

/** The key a client sent: `Authorization: Bearer KEY` (what OpenAI clients send) or `x-api-key`. */
export function presentedKey(authorization: string | undefined, xApiKey: string | string[] | undefined): string | undefined {
  const m = authorization === undefined ? null : /^Bearer\s+(.+)$/i.exec(authorization.trim());
  if (m) return m[1]?.trim();
  return typeof xApiKey === "string" ? xApiKey.trim() : undefined;
}

/**
 * A check that takes the same time whatever the key: equal-length digests are compared with
 * timingSafeEqual, and every configured key is compared, even after a match. A blank key is
 * refused on both sides: configuring one is a bug of the caller (it throws), presenting one
 * never matches.
 */
export function keyChecker(keys: readonly string[]): (presented: string | undefined) => boolean {
  if (keys.some(blank)) throw new Error("keyChecker: a configured API key is blank");
  const digests = keys.map(digest);
  return (presented) => {
    const d = digest(presented ?? "");
    let ok = false;
    for (const k of digests) ok = timingSafeEqual(k, d) || ok;
    return ok && presented !== undefined && !blank(presented);
  };
}
