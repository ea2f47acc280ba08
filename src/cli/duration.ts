import { UserError } from "../config/errors.js";
import type { LogsSince } from "../remote/docker.js";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `90s`, `20m`, `1h`, `1h30m` or plain seconds, in milliseconds. */
export function parseDuration(text: string, flag: string): number {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) {
    throw new UserError(`${flag} ${JSON.stringify(text)} is not a duration`, "write e.g. 90s, 20m, 1h or 1h30m");
  }
  return parts.reduce((ms, p) => ms + Number(p[1]) * (UNITS[p[2] as string] ?? 0), 0);
}

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
