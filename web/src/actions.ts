import { CONTROL_PATHS, decodeStop } from "../../src/contract/control-api.js";
import type { ActionKind } from "./gate.js";

/**
 * The page's actions as requests to the control API, as the CLI makes them (src/daemon/client.ts),
 * and what their answers say. Pure: the shell (./app.tsx) sends them with the session's CSRF
 * token and shows the outcome.
 */

export type Action =
  | { readonly kind: "stop"; readonly deployment: string; readonly cluster?: string }
  | { readonly kind: "cancel"; readonly deployment: string }
  | { readonly kind: "swap"; readonly lane: string; readonly recipe?: string }
  | { readonly kind: "start"; readonly recipe?: string; readonly lane?: string };

export interface ActionRequest {
  readonly method: "POST" | "DELETE";
  readonly path: string;
  /** A boot's submission (start, swap), or a stop's StopRequestSchema (src/contract/control-api.ts). */
  readonly body?: { readonly ref: string; readonly lane?: string } | { readonly cluster: string };
  /** The answer is a boot's events, one JSON object per line, to the boot's end. */
  readonly streams: boolean;
}

/** What an action needs chosen before it may be confirmed: a recipe for swap and start. */
export const needsRecipe = (a: Action): boolean => a.kind === "swap" || a.kind === "start";

/** The request of a confirmed action; undefined while it lacks its recipe. */
export function actionRequest(a: Action): ActionRequest | undefined {
  switch (a.kind) {
    case "stop":
      // The cluster named, so that a name two clusters run is stopped where the page showed it rather than refused.
      return a.cluster === undefined ? { method: "POST", path: CONTROL_PATHS.stop(a.deployment), streams: false } : { method: "POST", path: CONTROL_PATHS.stop(a.deployment), body: { cluster: a.cluster }, streams: false };
    case "cancel":
      return { method: "DELETE", path: CONTROL_PATHS.boot(a.deployment), streams: false };
    case "swap":
      return a.recipe === undefined || a.recipe === "" ? undefined : { method: "POST", path: CONTROL_PATHS.boots, body: { ref: a.recipe, lane: a.lane }, streams: true };
    case "start": {
      if (a.recipe === undefined || a.recipe === "") return undefined;
      const lane = a.lane?.trim() ?? "";
      return { method: "POST", path: CONTROL_PATHS.boots, body: lane === "" ? { ref: a.recipe } : { ref: a.recipe, lane }, streams: true };
    }
  }
}

/** The question the confirmation asks. */
export function actionQuestion(a: Action): string {
  const questions: Record<ActionKind, () => string> = {
    stop: () => `Stop deployment ${(a as { deployment: string }).deployment}? Its containers are removed from every node.`,
    cancel: () => `Cancel the boot of ${(a as { deployment: string }).deployment}? What it started is rolled back.`,
    swap: () => `Swap lane ${(a as { lane: string }).lane} to another recipe? Its clients are moved once the new one serves.`,
    start: () => "Start a recipe?",
  };
  return questions[a.kind]();
}

/** The verb an action's button and confirmation show. */
export const ACTION_VERBS: Readonly<Record<ActionKind, string>> = { stop: "Stop", cancel: "Cancel boot", swap: "Swap", start: "Start a recipe" };

export interface Outcome {
  readonly outcome: "ok" | "error" | "pending";
  readonly message: string;
  /** The deployment a boot runs, when its events named it. */
  readonly deployment?: string;
}

/** A refused request's message: the daemon's `{error: {message, hint?}}` (ControlErrorSchema's outline), else its status. */
export function refusalMessage(status: number, text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; hint?: unknown } };
    const hint = typeof parsed.error?.hint === "string" ? `: ${parsed.error.hint}` : "";
    if (typeof parsed.error?.message === "string") return `${parsed.error.message}${hint}`.slice(0, 2000);
  } catch {
    // Not JSON: the status says it.
  }
  return `the daemon answered HTTP ${status}`;
}

type DiagnosticOutline = { severity?: unknown; loc?: { file?: unknown; line?: unknown }; message?: unknown };
type EventOutline = { type?: unknown; deployment?: unknown; error?: { message?: unknown; hint?: unknown; diagnostics?: unknown }; outcome?: { deployment?: unknown } };

/** The most of a refusal's diagnostics shown beside its message. */
const SHOWN_DIAGNOSTICS = 3;

/** A user error's diagnostics (src/config/diagnostic.ts's shape), as `file:line: message`. */
function diagnosticsText(value: unknown): string {
  if (!Array.isArray(value)) return "";
  const said = (value as DiagnosticOutline[])
    .filter((d) => typeof d.message === "string")
    .slice(0, SHOWN_DIAGNOSTICS)
    .map((d) => `${typeof d.loc?.file === "string" ? `${d.loc.file}:${String(d.loc.line ?? "")}: ` : ""}${String(d.message)}`);
  return said.length === 0 ? "" : `: ${said.join("; ")}`;
}

/** Where a boot stands after the events read so far of its stream (one JSON object per line). */
export function outcomeOfEvents(lines: readonly string[]): Outcome {
  let deployment: string | undefined;
  let last: EventOutline | undefined;
  for (const line of lines) {
    if (line.trim() === "") continue;
    try {
      last = JSON.parse(line) as EventOutline;
    } catch {
      continue;
    }
    if (last.type === "accepted" && typeof last.deployment === "string") deployment = last.deployment;
  }
  const named = deployment === undefined ? {} : { deployment };
  if (last?.type === "error") {
    const hint = typeof last.error?.hint === "string" ? ` (${last.error.hint})` : "";
    return { outcome: "error", message: `${typeof last.error?.message === "string" ? last.error.message : "the boot failed"}${diagnosticsText(last.error?.diagnostics)}${hint}`, ...named };
  }
  if (last?.type === "result") return { outcome: "ok", message: `${deployment ?? "the deployment"} serves`, ...named };
  if (deployment !== undefined) return { outcome: "ok", message: `accepted: ${deployment} boots`, ...named };
  return { outcome: "pending", message: "submitted" };
}

/** The `type` of a cancel's answer (the boot's final event), when it is an object that has one. */
function finalType(text: string): unknown {
  try {
    return (JSON.parse(text) as EventOutline | null)?.type;
  } catch {
    return undefined;
  }
}

/** A finished stop or cancel's outcome, from its answer. */
export function outcomeOfAnswer(a: Action, status: number, text: string): Outcome {
  if (status < 200 || status > 299) return { outcome: "error", message: refusalMessage(status, text) };
  if (a.kind === "cancel") {
    // A boot's final event: `error` (it was interrupted, and rolled back) or `result`, when it had
    // become ready before the cancel reached it, so it serves (as `launcher down` says: src/cli/down.ts).
    if (finalType(text) === "result") return { outcome: "ok", message: `the boot of ${a.deployment} had become ready before the cancel reached it; it serves` };
    const ended = outcomeOfEvents([text]);
    return ended.outcome === "error" ? { outcome: "ok", message: `the boot of ${a.deployment} was cancelled: ${ended.message}` } : { outcome: "ok", message: `the boot of ${a.deployment} was cancelled` };
  }
  if (a.kind !== "stop") return { outcome: "ok", message: "done" };
  return stopOutcome(a.deployment, text);
}

/** A stop's answer: stopped, or what may still run (a node that did not answer) and the command that finishes it. */
function stopOutcome(deployment: string, text: string): Outcome {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const decoded = decodeStop(value);
  if (!decoded.ok) return { outcome: "error", message: `the daemon's answer to the stop is not one this page reads (${decoded.problem})` };
  const s = decoded.answer;
  if (s.stopped) return { outcome: "ok", message: `${s.deployment} was stopped${s.lane === undefined ? "" : `; lane ${s.lane} is empty`}` };
  const lost = s.nodes.flatMap((n) => (n.outcome === "unreachable" ? [`${n.node} (${n.reason})`] : []));
  return { outcome: "error", message: `${s.deployment} may still run on ${lost.join(", ") || "a node that did not answer"}${s.again === undefined ? "" : `: run ${s.again} once it answers`}` };
}

