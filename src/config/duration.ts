import { UserError } from "./errors.js";

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
