/**
 * One streamed chat completion, timed as `vllm bench serve` times it
 * (vllm/benchmarks/lib/endpoint_request_func.py): SSE messages are cut at blank lines as its
 * StreamedResponseHandler cuts them, and async_request_openai_chat_completions takes TTFT at the
 * first message with `choices`, one ITL per later message with `choices` (from the previous such
 * message's arrival), the latency at the last message with `choices` ("Only token chunks advance
 * the request end; the trailing usage chunk carries no token", at vLLM 02cfb534), and the output
 * tokens from the `usage` message (`stream_options.include_usage`). Pure: the caller gives each
 * chunk's arrival time, so tests give exact clocks.
 */

/** What one request gave: seconds from its start, tokens from the engine's `usage`. */
export type RequestOutcome =
  | {
      readonly ok: true;
      /** When it was sent, seconds from the level's start (for the peak figures and progress). */
      readonly start_s: number;
      readonly ttft_s: number;
      readonly itl_s: readonly number[];
      readonly latency_s: number;
      readonly input_tokens: number;
      readonly output_tokens: number;
    }
  | { readonly ok: false; readonly start_s: number; readonly input_tokens: number; readonly error: string };

/** SSE framing as vLLM's StreamedResponseHandler: complete `data:` lines, across chunk borders. */
export class SseMessages {
  private buffer = "";

  add(text: string): string[] {
    const messages: string[] = [];
    this.buffer += text;
    for (let cut = this.buffer.indexOf("\n\n"); cut >= 0; cut = this.buffer.indexOf("\n\n")) {
      const message = this.buffer.slice(0, cut).trim();
      this.buffer = this.buffer.slice(cut + 2);
      for (const line of message.split(/\r?\n/)) if (line.startsWith("data:")) messages.push(line);
    }
    return messages;
  }
}

interface Usage {
  readonly prompt_tokens?: unknown;
  readonly completion_tokens?: unknown;
}
interface ChunkShape {
  readonly choices?: readonly { readonly delta?: { readonly content?: unknown; readonly reasoning_content?: unknown } }[];
  readonly usage?: Usage | null;
}

const count = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : undefined);

/** The clock of one streamed chat completion; times in seconds on any one clock. */
export class ChatStreamClock {
  private ttft: number | undefined;
  private recent: number;
  private readonly itl: number[] = [];
  private outputTokens: number | undefined;
  private promptTokens: number | undefined;
  /** Chunks that carried text: the output count when the engine sends no `usage`. */
  private textChunks = 0;
  private bad: string | undefined;

  constructor(private readonly start: number) {
    this.recent = start;
  }

  /** One `data:` message (as SseMessages gives it) that arrived at `at`; true when it carried choices (a token, about). */
  message(line: string, at: number): boolean {
    const payload = line.slice("data:".length).trim();
    if (payload === "[DONE]" || this.bad !== undefined) return false;
    let data: ChunkShape;
    try {
      data = JSON.parse(payload) as ChunkShape;
    } catch {
      this.bad = `a stream message is not JSON: ${payload.slice(0, 120)}`;
      return false;
    }
    // `null`, a number, an array: no chunk. vLLM's bench fails the request on one too: it calls
    // data.get("choices") on every message (vllm/benchmarks/lib/endpoint_request_func.py), which
    // raises on anything but a dict, and a request that raised counts as failed.
    if (data === null || typeof data !== "object" || Array.isArray(data)) {
      this.bad = `a stream message is not a JSON object: ${payload.slice(0, 120)}`;
      return false;
    }
    const choices = Array.isArray(data.choices) ? data.choices : [];
    if (choices.length > 0) {
      if (this.ttft === undefined) this.ttft = at - this.start;
      else this.itl.push(at - this.recent);
      const delta = choices[0]?.delta;
      const text = delta?.content ?? delta?.reasoning_content;
      if (typeof text === "string" && text !== "") this.textChunks++;
      this.recent = at;
    } else if (data.usage) {
      this.outputTokens = count(data.usage.completion_tokens);
      this.promptTokens = count(data.usage.prompt_tokens);
    }
    return choices.length > 0;
  }

  /**
   * The request's outcome. A stream without one chunk of choices failed (vLLM's completions
   * request says "Never received a valid chunk to calculate TTFT"); `plannedInput`: the prompt's
   * length as sent, when the engine gives no `usage`.
   */
  outcome(startOfLevel: number, plannedInput: number): RequestOutcome {
    const start_s = this.start - startOfLevel;
    const input_tokens = this.promptTokens ?? plannedInput;
    if (this.bad !== undefined) return { ok: false, start_s, input_tokens, error: this.bad };
    if (this.ttft === undefined) return { ok: false, start_s, input_tokens, error: "never received a chunk with choices to time the first token" };
    return { ok: true, start_s, ttft_s: this.ttft, itl_s: this.itl, latency_s: this.recent - this.start, input_tokens, output_tokens: this.outputTokens ?? this.textChunks };
  }
}
