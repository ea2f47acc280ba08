import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { ByteBudget } from "./budget.js";
import { BodyPrefix } from "./capture.js";
import { engineAuthHeaders } from "../contract/engine-auth.js";
import { forwardHeaders, REQUEST_DROP, RESPONSE_DROP } from "./headers.js";

export interface ForwardResult {
  readonly status: number;
  /** Response started and then failed, or the client went away: nothing more can be sent. */
  readonly outcome: "done" | "client_abort" | "upstream_broke" | "upstream_unreachable";
  readonly error?: string;
  readonly firstChunkAt?: number;
  readonly endedAt?: number;
  readonly streamedChunks: number;
  readonly completionTokens?: number;
  /** The usage the engine reported: a whole answer's, or (with readStreamUsage) a stream's last usage chunk. */
  readonly usage?: Usage;
  /** The answer's first captureBytes, as sent (with captureBytes). */
  readonly captured?: Buffer;
}

/** OpenAI's `usage` of an answer, as far as it is numbers. */
export interface Usage {
  readonly prompt?: number;
  readonly completion?: number;
}

export interface ForwardOptions {
  readonly dispatcher: Dispatcher;
  readonly endpoint: string;
  /** The path and query to ask for: the canonical one the gateway routed on (./paths.ts). */
  readonly path: string;
  readonly body: UpstreamBody;
  /** Where the non-streamed answers kept for their usage reserve their bytes. */
  readonly answers: ByteBudget;
  /** Replaces the client's Content-Type (a JSON body sent without one). */
  readonly contentType?: string;
  readonly headersTimeoutMs: number;
  /** The key the deployment's engine demands (a secret: sent as a header, never in a URL or a message). */
  readonly engineKey?: string;
  readonly bodyTimeoutMs: number;
  readonly now: () => number;
  /**
   * Read a streamed answer's usage from its last chunks (sent when the client asked
   * stream_options.include_usage): only the activity log wants it, once per stream.
   */
  readonly readStreamUsage?: boolean;
  /** Keep a copy of the answer's first bytes, this many (the activity log's body capture). */
  readonly captureBytes?: number;
  /** Called with each chunk of a 200 event stream that carries an event: the engine is sending tokens. */
  readonly onStreamData?: () => void;
}

/** What goes upstream: nothing, bytes the gateway holds (parts sent in order, never joined), or a stream it passes on. */
export type UpstreamBody =
  | { readonly kind: "none" }
  | { readonly kind: "bytes"; readonly parts: readonly Buffer[] }
  | { readonly kind: "stream"; readonly from: Readable; readonly length: number | undefined };

/** The body as undici sends it, and its length when known (chunked otherwise). */
function dispatchBody(body: UpstreamBody): { body: Buffer | Readable | null; length: number | undefined } {
  if (body.kind === "none") return { body: null, length: undefined };
  if (body.kind === "stream") return { body: body.from, length: body.length };
  const length = body.parts.reduce((n, p) => n + p.length, 0);
  return { body: body.parts.length === 1 ? (body.parts[0] as Buffer) : Readable.from(body.parts), length };
}

/** All non-streamed answers kept at once for their usage; past it, an answer's tokens go uncounted. */
export const ANSWERS_BUDGET_BYTES = 32 * 1024 * 1024;

const DATA = Buffer.from("data: ");
const DONE = Buffer.from("data: [DONE]");
// Non-streamed answers are read for their usage only while small.
const KEEP_JSON_BYTES = 1 << 20;

function countEvents(chunk: Buffer): number {
  let n = 0;
  for (let i = chunk.indexOf(DATA); i !== -1; i = chunk.indexOf(DATA, i + DATA.length)) n++;
  if (chunk.includes(DONE)) n--;
  return n;
}

function usageOf(json: string): Usage | undefined {
  try {
    const u = (JSON.parse(json) as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null }).usage;
    if (typeof u !== "object" || u === null) return undefined;
    return { ...(typeof u.prompt_tokens === "number" ? { prompt: u.prompt_tokens } : {}), ...(typeof u.completion_tokens === "number" ? { completion: u.completion_tokens } : {}) };
  } catch {
    return undefined;
  }
}

const USAGE = Buffer.from('"usage"');
/** A stream's last chunks are read for usage only while this small (a usage event is ~200 bytes). */
const STREAM_TAIL_BYTES = 256 * 1024;

/**
 * The usage of a stream from its last two chunks: the last `data:` event that holds "usage" (an
 * OpenAI stream's usage chunk, vLLM's too, comes last, before `[DONE]`), undefined when none does.
 */
export function streamUsage(tail: readonly Buffer[]): Usage | undefined {
  if (!tail.some((c) => c.includes(USAGE)) || tail.reduce((n, c) => n + c.length, 0) > STREAM_TAIL_BYTES) return undefined;
  const text = Buffer.concat(tail).toString("utf8");
  const at = text.lastIndexOf('"usage"');
  const start = text.lastIndexOf("data:", at);
  if (start === -1) return undefined;
  const end = text.indexOf("\n", at);
  return usageOf(text.slice(start + "data:".length, end === -1 ? undefined : end));
}

/**
 * A non-streamed JSON answer kept for its usage: whole, or not at all once it passes
 * KEEP_JSON_BYTES or the room all kept answers share (its tokens then go uncounted).
 */
class KeptAnswer {
  #chunks: Buffer[] = [];
  #bytes = 0;
  #on = true;

  constructor(private readonly budget: ByteBudget) {}

  add(chunk: Buffer): void {
    if (!this.#on) return;
    if (this.#bytes + chunk.length <= KEEP_JSON_BYTES && this.budget.tryReserve(chunk.length)) {
      this.#chunks.push(chunk);
      this.#bytes += chunk.length;
    } else this.drop();
  }

  /** The answer's usage (undefined: not kept, or none said); what it held is given back. */
  usage(): Usage | undefined {
    const usage = this.#on ? usageOf(Buffer.concat(this.#chunks).toString("utf8")) : undefined;
    this.drop();
    return usage;
  }

  drop(): void {
    this.budget.release(this.#bytes);
    this.#bytes = 0;
    this.#chunks = [];
    this.#on = false;
  }
}

/**
 * Sends one request upstream and streams the answer back chunk by chunk, with no buffering.
 * Never retries: once the engine has the request, a second try could generate twice. A client
 * that goes away aborts the upstream request, so the engine stops generating.
 */
export function forward(req: IncomingMessage, res: ServerResponse, options: ForwardOptions): Promise<ForwardResult> {
  // The client's own key was dropped (REQUEST_DROP): the engine gets the deployment's key, if any.
  const headers = { ...forwardHeaders(req.headers, REQUEST_DROP), ...engineAuthHeaders(options.engineKey) } as Record<string, string | string[]>;
  const upstream = dispatchBody(options.body);
  if (upstream.length !== undefined) headers["content-length"] = String(upstream.length);
  if (options.contentType !== undefined) headers["content-type"] = options.contentType;

  return new Promise<ForwardResult>((resolve) => {
    let controller: Dispatcher.DispatchController | undefined;
    let clientGone = false;
    let streamedChunks = 0;
    let firstChunkAt: number | undefined;
    let status = 0;
    let streaming = false;
    let kept: KeptAnswer | undefined;
    // A stream's last two chunks, by reference: where its usage chunk is.
    let before: Buffer | undefined;
    let last: Buffer | undefined;
    const captured = options.captureBytes === undefined ? undefined : new BodyPrefix(options.captureBytes);
    let settled = false;
    const finish = (r: Omit<ForwardResult, "streamedChunks" | "status">): void => {
      if (settled) return;
      settled = true;
      kept?.drop();
      res.off("close", onClose);
      resolve({ status, streamedChunks, ...(firstChunkAt === undefined ? {} : { firstChunkAt }), ...(captured === undefined ? {} : { captured: captured.bytes() }), ...r });
    };
    const onClose = (): void => {
      if (res.writableFinished) return;
      clientGone = true;
      controller?.abort(new Error("client closed the connection"));
      finish({ outcome: "client_abort" });
    };
    res.on("close", onClose);
    const resume = (): void => controller?.resume();

    // The raw dispatch API: each chunk goes from the engine's socket to the client's with no
    // stream machinery in between.
    options.dispatcher.dispatch(
      {
        origin: options.endpoint,
        path: options.path,
        method: (req.method ?? "GET") as Dispatcher.HttpMethod,
        headers,
        body: upstream.body,
        headersTimeout: options.headersTimeoutMs,
        bodyTimeout: options.bodyTimeoutMs,
      },
      {
        onRequestStart(c) {
          controller = c;
          if (clientGone) c.abort(new Error("client closed the connection"));
        },
        onResponseStart(_c, statusCode, upstreamHeaders) {
          status = statusCode;
          const out = forwardHeaders(upstreamHeaders, RESPONSE_DROP);
          const contentType = String(upstreamHeaders["content-type"] ?? "");
          streaming = contentType.startsWith("text/event-stream");
          if (!streaming && contentType.includes("json")) kept = new KeptAnswer(options.answers);
          // nginx and other proxies in front must not hold chunks back either.
          if (streaming) out["x-accel-buffering"] = "no";
          res.writeHead(statusCode, out);
          // The headers go out now even when no chunk follows soon (a long prefill), but corked
          // until the next tick, so that a chunk parsed from the same read of the engine's socket
          // (the usual case when many requests start at once) leaves in the same write: one
          // syscall, and one read for the client, instead of two. Node corks each res.write()
          // the same way (lib/_http_outgoing.js write_: "Auto-corking", uncorked by
          // connectionCorkNT on the next tick); flushHeaders() alone writes at once.
          res.cork();
          res.flushHeaders();
          process.nextTick(() => res.uncork());
        },
        onResponseData(c, chunk) {
          firstChunkAt ??= options.now();
          captured?.add(chunk);
          if (streaming) {
            const events = countEvents(chunk);
            streamedChunks += events;
            if (events > 0 && status === 200) options.onStreamData?.();
            if (options.readStreamUsage === true) {
              before = last;
              last = chunk;
            }
          } else kept?.add(chunk);
          if (!res.write(chunk)) {
            c.pause();
            res.once("drain", resume);
          }
        },
        onResponseEnd() {
          res.end();
          const usage = kept?.usage() ?? (last === undefined ? undefined : streamUsage(before === undefined ? [last] : [before, last]));
          const whole = kept === undefined ? undefined : usage?.completion;
          finish({ outcome: "done", endedAt: options.now(), ...(whole === undefined ? {} : { completionTokens: whole }), ...(usage === undefined ? {} : { usage }) });
        },
        onResponseError(_c, e) {
          if (clientGone) {
            finish({ outcome: "client_abort" });
            return;
          }
          if (status === 0) {
            finish({ outcome: "upstream_unreachable", error: (e as Error & { code?: string }).code ?? e.message });
            return;
          }
          // Headers are out: the only honest signal left is to cut the connection.
          res.destroy();
          finish({ outcome: "upstream_broke", error: e.message });
        },
      },
    );
  });
}
