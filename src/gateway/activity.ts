import { createHash } from "node:crypto";
import type { ActivityRecord } from "../contract/read-api.js";
import { PROGRESS_EVERY_MS } from "../contract/generation.js";

/**
 * A client key's id in the activity log: the first 8 hex digits of its SHA-256. Short enough to
 * read, enough to tell a lab's few keys apart, and no way back to the key (it is never kept).
 */
export function keyId(key: string): string {
  let id = ids.get(key);
  if (id === undefined) {
    id = createHash("sha256").update(key).digest("hex").slice(0, 8);
    // A lab has a few keys; a gateway without keys takes any string, so what is kept stays bounded.
    if (ids.size >= KEY_IDS_KEPT) ids.clear();
    ids.set(key, id);
  }
  return id;
}

/** Ids already worked out, by key: the key is in the gateway's memory anyway, and hashing it per request is not needed. */
const ids = new Map<string, string>();
const KEY_IDS_KEPT = 64;

/** What the gateway learns of one request on its way through (src/gateway/server.ts fills it in). */
export interface RequestTrail {
  deployment?: string;
  /** The routed deployment's cluster (never in a record: it tells generatedBy whose engine answered). */
  cluster?: string;
  /** Why it failed, in the gateway's own words: the code of its error answer, or how the stream ended. */
  error?: string;
  ttftMs?: number;
  tokensIn?: number;
  tokensOut?: number;
  tokensPerSecond?: number;
  /** The captured bodies, redacted (only with body capture on). */
  requestBody?: string;
  responseBody?: string;
  /**
   * With body capture on: the request's body as the client sent it, the answer's first bytes, and
   * the engine's key to take out of them. Never in a record: activityRecord copies the fields above only.
   */
  raw?: { request?: Buffer; response?: Buffer; engineKey?: string };
}

/** One request as the activity log keeps it. */
export interface AnsweredRequest {
  /** When it arrived, ms since the epoch. */
  readonly t: number;
  readonly model: string;
  readonly lane: string;
  /** The HTTP status answered; 0: the client went away before its request was whole. */
  readonly status: number;
  /** The client's key as presented, read here only for its id. */
  readonly key: string | undefined;
  readonly trail: RequestTrail;
}

/**
 * The record of one answered request. A failure (no answer, a 4xx or 5xx, a stream cut short)
 * says why: the gateway's own code when it answered or cut it, `engine_error` when the engine
 * itself answered with an error.
 */
export function activityRecord(a: AnsweredRequest): ActivityRecord {
  const { trail } = a;
  const failed = a.status === 0 || a.status >= 400 || trail.error !== undefined;
  // Built field by field (no entries/filter): it is made on the request path.
  const r: { -readonly [K in keyof ActivityRecord]: ActivityRecord[K] } = { t: a.t, model: a.model, status: a.status };
  if (a.lane !== "") r.lane = a.lane;
  if (trail.deployment !== undefined) r.deployment = trail.deployment;
  if (a.key !== undefined) r.key_id = keyId(a.key);
  if (trail.ttftMs !== undefined) r.ttft_ms = trail.ttftMs;
  if (trail.tokensIn !== undefined) r.tokens_in = trail.tokensIn;
  if (trail.tokensOut !== undefined) r.tokens_out = trail.tokensOut;
  if (trail.tokensPerSecond !== undefined) r.tokens_per_second = trail.tokensPerSecond;
  if (failed) r.error = trail.error ?? "engine_error";
  if (trail.requestBody !== undefined) r.request_body = trail.requestBody;
  if (trail.responseBody !== undefined) r.response_body = trail.responseBody;
  return r;
}

/**
 * The deployment that completed a real generation with this answer: a 200 that ended whole with at
 * least one token counted (the activity record's tokens_out), or undefined. What the daemon's
 * generation watch takes as "it generates" (src/supervise/generation.ts), never read from text.
 */
export function generatedBy(status: number, trail: RequestTrail): { readonly cluster: string; readonly deployment: string } | undefined {
  if (status !== 200 || trail.error !== undefined || trail.cluster === undefined || trail.deployment === undefined) return undefined;
  return (trail.tokensOut ?? 0) >= 1 ? { cluster: trail.cluster, deployment: trail.deployment } : undefined;
}

/**
 * One streamed answer's progress, told to `generated`: its first chunk, then the first chunk after
 * each PROGRESS_EVERY_MS (a busy stream sends tens a second), on a clock that never goes back.
 */
export function progressOf(target: { readonly cluster: string; readonly deployment: string }, generated: (cluster: string, deployment: string) => void, now: () => number = () => performance.now()): () => void {
  let told = Number.NEGATIVE_INFINITY;
  return () => {
    const t = now();
    if (t - told < PROGRESS_EVERY_MS) return;
    told = t;
    generated(target.cluster, target.deployment);
  };
}
