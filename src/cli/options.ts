import { Option } from "commander";
import { UserError } from "../config/errors.js";

/**
 * The options several commands share, declared once: the same flags, short forms and help text
 * wherever they appear (how --cluster's value is resolved is src/app/lookup.ts's business).
 */

export const CLUSTER_OPTION_DESCRIPTION = "cluster file or name (default: $LAUNCHER_CLUSTER, ./cluster.toml, then the default cluster in ~/.config/launcher)";

/** `-c, --cluster <file|name>`. */
export function clusterOption(): Option {
  return new Option("-c, --cluster <file|name>", CLUSTER_OPTION_DESCRIPTION);
}

/**
 * `--json`: what the command prints, as one JSON object. Every key of it is snake_case, a unit in
 * the key's tail (`total_kib`, `need_gib`, `start_ms`, `uptime_seconds`), as vLLM's result keys
 * are; a shape kept in camelCase inside launcher is printed through its JSON encoder (meminfoJson,
 * nodeFitJson). Keys that are data (environment variables, node names, fabric IPs) stay as they
 * are. test/unit/json-keys.test.ts walks the answers.
 */
export function jsonOption(description = "print as one JSON object"): Option {
  return new Option("--json", description);
}

/** `-o json` as kubectl users type it: the same as --json (text is the default, so json is the only choice). */
export function outputOption(): Option {
  return new Option("-o, --output <format>", "output format: json is --json").choices(["json"]).implies({ json: true });
}

/** `-f, --follow`. */
export function followOption(description: string): Option {
  return new Option("-f, --follow", description);
}

/** `-n, --tail <n>`. */
export function tailOption(description: string, preset: string): Option {
  return new Option("-n, --tail <n>", description).default(preset);
}

/** A count given to `flag` (`-n 50`, `--limit 5`): a whole number from `min`, or a usage error naming the flag. */
export function parseCount(text: string, flag: string, min = 0): number {
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UserError(`${flag} ${JSON.stringify(text)} is not a whole number${min > 0 ? ` from ${min}` : ""}`, `e.g. ${flag} ${Math.max(min, 5)}`);
  return n;
}
