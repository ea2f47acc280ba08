import { UserError } from "../config/errors.js";
import { parseDuration } from "../config/duration.js";
import type { LogsSince } from "../remote/docker.js";

/**
 * `logs --since`: a duration back from now (`10m`) or an instant with its time zone
 * (`2026-12-03T05:00:00Z`); a date without a zone would be read in this machine's zone, so it is
 * refused rather than guessed.
 */
export function parseSince(text: string, flag: string): LogsSince {
  if (/^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:?\d{2})$/i.test(text)) {
    const ms = Date.parse(text);
    if (!Number.isNaN(ms)) return { unixSeconds: ms / 1000 };
  }
  try {
    return { agoSeconds: parseDuration(text, flag) / 1000 };
  } catch {
    throw new UserError(`${flag} ${JSON.stringify(text)} is neither a duration nor a time`, "write a duration back from now (10m, 1h30m) or a time with its zone (2026-12-03T05:00:00Z)");
  }
}

/** `down --grace`: a duration, or plain seconds as before, in whole seconds (docker stop's -t takes seconds). */
export function parseGraceSeconds(text: string, flag: string): number {
  return Math.ceil(parseDuration(text, flag) / 1000);
}
