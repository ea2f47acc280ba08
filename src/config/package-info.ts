// What launcher knows of its own package, read from its package.json (one home: npm publishes
// that file's version, and its engines field is what npm warns by). Only Node's own modules are
// imported here: the bin entry reads this before it knows the runtime is new enough for the
// rest, so this file must load and run on an older Node too (it is plain ES2022 and node:fs).
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The package's own folder, for its bundled recipes and schemas (dist/launcher/ or src/cli/ is two below it). */
export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The package.json fields launcher reads; each is checked where it is used. */
function packageJson(root: string): Record<string, unknown> {
  const file = path.join(root, "package.json");
  const parsed: unknown = JSON.parse(readFileSync(file, "utf8"));
  // The package is broken, not the user's input: an internal error.
  if (typeof parsed !== "object" || parsed === null) throw new Error(`${file} is not a JSON object`);
  return parsed as Record<string, unknown>;
}

/** This launcher's version, as its package.json says. */
export function packageVersion(root: string = PACKAGE_ROOT): string {
  const version = packageJson(root).version;
  if (typeof version !== "string" || version === "") throw new Error(`${path.join(root, "package.json")} has no version`);
  return version;
}

/** The file the `launcher` command runs, relative to the package's folder (package.json "bin"). */
export function packageBin(root: string = PACKAGE_ROOT): string {
  const bin = packageJson(root).bin;
  const launcher = typeof bin === "object" && bin !== null ? (bin as Record<string, unknown>).launcher : undefined;
  if (typeof launcher !== "string" || launcher === "") throw new Error(`${path.join(root, "package.json")} has no bin.launcher`);
  return launcher;
}

/** A Node.js version as [major, minor, patch]. */
export type NodeVersion = readonly [number, number, number];

const olderThan = (a: NodeVersion, b: NodeVersion): boolean => (a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2]);

/**
 * The lowest Node.js an engines range admits, for the forms this package writes: alternatives
 * joined by "||", each ">=22.12", "^22.13.0", "~22.13" or "22.13.0" (npm's semver ranges, whose
 * lower bound each of these is). Undefined when any alternative is of another form: then this is
 * not checked here, and npm's own check (npm-install-checks' checkEngine) stays.
 */
export function engineMinimum(range: string): NodeVersion | undefined {
  const bounds = range.split("||").map((alternative) => {
    const m = /^\s*(?:>=|\^|~)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$/.exec(alternative);
    return m === null ? undefined : ([Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)] as const);
  });
  if (bounds.length === 0 || bounds.some((b) => b === undefined)) return undefined;
  return (bounds as NodeVersion[]).reduce((low, b) => (olderThan(b, low) ? b : low));
}

/** "v20.20.2" (process.version) as numbers; undefined when it does not read as one. */
export function parseNodeVersion(version: string): NodeVersion | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** "22.12" for [22, 12, 0], "22.12.1" for [22, 12, 1]. */
const shown = (v: NodeVersion): string => (v[2] === 0 ? `${v[0]}.${v[1]}` : v.join("."));

/**
 * The one line launcher says on a Node.js older than the lowest its package.json's engines admits,
 * before it loads anything that might fail there; undefined when this Node will do (or either
 * version does not read: npm's own check stays). A version between the alternatives (an odd,
 * unsupported line) is npm's to warn of, not refused here.
 */
export function tooOldNodeLine(running: string, engines: string | undefined): string | undefined {
  const needed = engines === undefined ? undefined : engineMinimum(engines);
  const have = parseNodeVersion(running);
  if (needed === undefined || have === undefined || !olderThan(have, needed)) return undefined;
  return `launcher needs Node.js ${shown(needed)} or later (this is Node.js ${running}): install Node.js 24 LTS, as the README's Install section says, and run launcher with it`;
}

/** package.json's engines.node, as written; undefined when it has none. */
export function enginesNode(root: string = PACKAGE_ROOT): string | undefined {
  const engines = packageJson(root).engines;
  const node = typeof engines === "object" && engines !== null ? (engines as Record<string, unknown>).node : undefined;
  return typeof node === "string" ? node : undefined;
}

/** A file's real path (links followed); undefined when it is not there. */
export function realPath(file: string): string | undefined {
  try {
    return realpathSync(file);
  } catch {
    return undefined;
  }
}
