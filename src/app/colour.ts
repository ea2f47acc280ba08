import { styleText } from "node:util";
import type { Severity } from "../config/diagnostic.js";
import type { DeploymentState, RankState } from "../contract/deployment.js";

type Style = Parameters<typeof styleText>[0];

/** Paints text, or leaves it as it is when colours are off. */
export type Paint = (style: Style, text: string) => string;

export const plain: Paint = (_style, text) => text;

/**
 * Colours only on a terminal that has them, and never when NO_COLOR is set to anything but the
 * empty string (https://no-color.org): a pipe, a file or a log collector gets plain text. styleText's
 * own check looks at process.stdout whatever stream the text goes to, so it is off and this decides
 * for the stream at hand.
 */
export function colourFor(stream: { isTTY?: boolean; hasColors?: () => boolean }, env: NodeJS.ProcessEnv = process.env): Paint {
  const on = stream.isTTY === true && (env.NO_COLOR ?? "") === "" && (stream.hasColors?.() ?? false);
  return on ? (style, text) => styleText(style, text, { validateStream: false }) : plain;
}

export const SEVERITY_STYLE: Record<Severity, Style> = { error: "red", warning: "yellow" };

/** A deployment's status in the colour it is read by: green serves, yellow waits, red needs a look. */
export const STATUS_STYLE: Record<DeploymentState, Style> = { serving: "green", booting: "yellow", degraded: "red", unreachable: "red" };

export const RANK_STYLE: Record<RankState, Style> = {
  created: "yellow",
  running: "green",
  paused: "yellow",
  restarting: "yellow",
  removing: "yellow",
  exited: "red",
  dead: "red",
  unreachable: "red",
};
