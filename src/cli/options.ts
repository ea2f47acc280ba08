import { Option } from "commander";

/**
 * The options several commands share, declared once: the same flags, short forms and help text
 * wherever they appear (how --cluster's value is resolved is load.ts's business).
 */

export const CLUSTER_OPTION_DESCRIPTION = "cluster file or name (default: $LAUNCHER_CLUSTER, ./cluster.toml, then the default cluster in ~/.config/launcher)";

/** `-c, --cluster <file|name>`. */
export function clusterOption(): Option {
  return new Option("-c, --cluster <file|name>", CLUSTER_OPTION_DESCRIPTION);
}

/** `--json`: what the command prints, as one JSON object. */
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

