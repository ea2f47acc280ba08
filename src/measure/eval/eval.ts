import { randomUUID } from "node:crypto";
import { engineAuthHeaders } from "../../contract/engine-auth.js";
import type { EvalItemResult, EvalRun, EvidenceStore, RunSubject } from "../../contract/evidence.js";
import { UserError } from "../../config/errors.js";
import { grade } from "./grade.js";
import type { ChatMessage, EvalItem } from "./set.js";
import { servingTarget, type ServingTarget, type TargetFacts } from "../serving-target.js";
import type { ClusterSession } from "../../nodes/session.js";
import { inPool } from "../../config/pool.js";

/** A set as read: its items, and the file it came from with its SHA-256 (two runs of one set are known alike). */
export interface LoadedSet {
  readonly path: string;
  readonly sha256: string;
  readonly items: readonly EvalItem[];
}

export interface EvalSettings {
  /** Sent with every request; 0 (greedy) by default, as an eval must not depend on sampling luck. */
  readonly temperature: number;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** The answer's length bound; absent: the engine's default. */
  readonly maxTokens?: number;
  /** Per-request fields of the chat completions body (chat_template_kwargs, reasoning_effort), sent with every item. */
  readonly requestOptions: Readonly<Record<string, unknown>>;
  /** One request's time bound, in milliseconds. */
  readonly requestTimeoutMs: number;
}

export const DEFAULT_EVAL: Omit<EvalSettings, "requestOptions"> = { temperature: 0, concurrency: 8, requestTimeoutMs: 600_000 };

/** One chat completion's answer text (the message's `content`), or a thrown error saying why not. */
export type Ask = (body: Readonly<Record<string, unknown>>, signal: AbortSignal) => Promise<string>;

export interface EvalProgress {
  readonly done: number;
  readonly total: number;
  readonly correct: number;
  readonly failed: number;
}

export interface EvalDeps {
  readonly ask: Ask;
  readonly store: Pick<EvidenceStore, "saveEvalRun">;
  readonly now: () => Date;
  readonly newId?: () => string;
  readonly progress?: (p: EvalProgress) => void;
  readonly signal?: AbortSignal;
}

/**
 * The chat completions body of one item. Temperature is always sent: an engine's default is not
 * 0 (vLLM's ChatCompletionRequest takes temperature None as the model's generation config or 1.0,
 * vllm/entrypoints/openai/protocol.py to_sampling_params). `chat_template_kwargs` (a dict passed
 * to the chat template) and `reasoning_effort` ("low" | "medium" | "high") are top-level fields of
 * that same request (protocol.py ChatCompletionRequest), so the options go in as they are; the
 * fields launcher sets come last and win.
 */
export function chatBody(model: string, messages: readonly ChatMessage[], s: EvalSettings): Record<string, unknown> {
  return {
    ...s.requestOptions,
    model,
    messages,
    temperature: s.temperature,
    ...(s.maxTokens === undefined ? {} : { max_tokens: s.maxTokens }),
    stream: false,
  };
}

/** What an error body or a failed fetch says, in one bounded line. */
function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 300 ? `${flat.slice(0, 300)}...` : flat;
}

/** The message an OpenAI-style error body carries (`{"error":{"message"}}` or `{"error":"..."}`), else the body. */
function errorMessage(body: string): string {
  try {
    const e = (JSON.parse(body) as { error?: unknown }).error;
    if (typeof e === "string") return e;
    if (e !== null && typeof e === "object" && typeof (e as { message?: unknown }).message === "string") return (e as { message: string }).message;
  } catch {
    // not JSON: the body itself says it
  }
  return body;
}

/** The Ask of an OpenAI-compatible endpoint: POST {url}/v1/chat/completions, non-streaming. */
export function httpAsk(target: Pick<ServingTarget, "url" | "apiKey">): Ask {
  return async (body, signal) => {
    const res = await fetch(`${target.url.replace(/\/+$/, "")}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...engineAuthHeaders(target.apiKey) },
      body: JSON.stringify(body),
      signal,
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${oneLine(errorMessage(text))}`);
    const content = (JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    // null content: the model said nothing outside its reasoning (it ran out of tokens there); an empty answer, graded as such.
    if (content === null || content === undefined) return "";
    if (typeof content !== "string") throw new Error(`the answer's content is not text: ${oneLine(JSON.stringify(content))}`);
    return content;
  };
}

/** Why a request failed, in words (an abort by the timeout says so). */
function failure(e: unknown, timeoutMs: number): string {
  const err = e as Error;
  if (err.name === "TimeoutError") return `no answer within ${timeoutMs / 1000} s`;
  const cause = (err as { cause?: Error }).cause;
  return oneLine(cause?.message === undefined ? err.message : `${err.message}: ${cause.message}`);
}

/**
 * Asks every item of `set` of `target` and grades the answers: `X/N`, each item's answer and
 * grade, stored. A request that fails is an item answered wrongly, with its error kept (the score
 * never hides it). Interrupted (`deps.signal`), nothing is stored and the abort is thrown.
 */
export async function evalServing(target: ServingTarget, set: LoadedSet, settings: EvalSettings, deps: EvalDeps): Promise<EvalRun> {
  const startedAt = deps.now().toISOString();
  const tally = { done: 0, correct: 0, failed: 0 };
  const items = await inPool(set.items, settings.concurrency, deps.signal, async (item): Promise<EvalItemResult> => {
    // A timer of our own, not AbortSignal.timeout: that one's timer does not keep the process
    // alive (it is unref'd), and a request must end by its bound whatever else is pending.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new DOMException("request timed out", "TimeoutError")), settings.requestTimeoutMs);
    const signal = deps.signal === undefined ? timeout.signal : AbortSignal.any([deps.signal, timeout.signal]);
    const base = { id: item.id, expected: item.expected, grader: item.grader };
    let result: EvalItemResult;
    try {
      const answer = await deps.ask(chatBody(target.model, item.messages, settings), signal);
      result = { ...base, answer, correct: grade(item.grader, item.expected, answer) };
    } catch (e) {
      // Interrupted by the user: the run ends here, not as N failed items.
      deps.signal?.throwIfAborted();
      result = { ...base, correct: false, error: failure(e, settings.requestTimeoutMs) };
    } finally {
      clearTimeout(timer);
    }
    tally.done++;
    if (result.correct) tally.correct++;
    if (result.error !== undefined) tally.failed++;
    deps.progress?.({ ...tally, total: set.items.length });
    return result;
  });
  const run: EvalRun = {
    id: (deps.newId ?? randomUUID)(),
    started_at: startedAt,
    ended_at: deps.now().toISOString(),
    subject: target.subject,
    set: { path: set.path, sha256: set.sha256, items: set.items.length },
    temperature: settings.temperature,
    // Everything else every request carried (max_tokens too): two runs compare only alike.
    request_options: { ...settings.requestOptions, ...(settings.maxTokens === undefined ? {} : { max_tokens: settings.maxTokens }) },
    items,
    correct: tally.correct,
    total: set.items.length,
  };
  deps.store.saveEvalRun(run);
  return run;
}

/**
 * How evalTarget reaches a target: the head of the deployment it names, or a gateway for model
 * TARGET. A gateway route with the cluster's session also reads what serves TARGET there, for the
 * stored subject.
 */
export type EvalRoute =
  | { readonly kind: "direct"; readonly session: ClusterSession }
  | { readonly kind: "gateway"; readonly url: string; readonly apiKey?: string; readonly session?: ClusterSession };

export interface EvalShell extends Omit<EvalDeps, "ask" | "store"> {
  readonly route: EvalRoute;
  readonly store: TargetFacts & Pick<EvidenceStore, "saveEvalRun">;
  /** Told what serves the target once it is known, before the first request. */
  readonly started?: (serving: ServingTarget) => void;
  readonly warn?: (line: string) => void;
}

/** A gateway routes by model name: TARGET is sent as the model, whatever is known of what serves it. */
export function gatewayTarget(route: Extract<EvalRoute, { kind: "gateway" }>, target: string, subject: RunSubject = { target }): ServingTarget {
  return { url: route.url, model: target, ...(route.apiKey === undefined ? {} : { apiKey: route.apiKey }), subject };
}

/**
 * Through a gateway: the subject is read from the cluster's labels when the session is given; a
 * target the cluster does not resolve (the gateway may serve other clusters) is said and the run
 * kept under its name alone.
 */
async function viaGateway(route: Extract<EvalRoute, { kind: "gateway" }>, target: string, shell: EvalShell): Promise<ServingTarget> {
  if (route.session === undefined) return gatewayTarget(route, target);
  try {
    return gatewayTarget(route, target, (await servingTarget(route.session, shell.store, target, "eval")).subject);
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    shell.warn?.(`${e.message}: the run is stored under the name ${target} alone, without its deployment and recipe`);
    return gatewayTarget(route, target);
  }
}

/**
 * `launcher eval TARGET`'s use case (and `compare --run`'s eval port): TARGET (a deployment, lane,
 * recipe or served model name) resolved on its route, its set asked and graded, the run stored.
 */
export async function evalTarget(target: string, set: LoadedSet, settings: EvalSettings, shell: EvalShell): Promise<EvalRun> {
  const serving = shell.route.kind === "gateway" ? await viaGateway(shell.route, target, shell) : await servingTarget(shell.route.session, shell.store, target, "eval");
  shell.started?.(serving);
  return evalServing(serving, set, settings, { ...shell, ask: httpAsk(serving), store: shell.store });
}
