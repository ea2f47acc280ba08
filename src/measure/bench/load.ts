import { ChatStreamClock, SseMessages, type RequestOutcome } from "./stream.js";
import type { BenchPrompt } from "./workload.js";

/**
 * Where the load goes: one streamed chat completion per call. The shell's is HTTP
 * (src/measure/bench/bench.ts); tests give a scripted one. `chunks` yields the body's text as it arrives;
 * a refusal (not 200) is thrown as an Error whose message says what came back.
 */
export interface ChatEndpoint {
  chunks(body: Readonly<Record<string, unknown>>, signal: AbortSignal): AsyncIterable<string>;
}

/** What a level is allowed: the first bound reached ends it. */
export interface LevelBounds {
  readonly concurrency: number;
  /** Requests sent at most. */
  readonly requests: number;
  /** No request is sent after this many seconds from the level's start. */
  readonly durationS?: number;
  /** A request still streaming after this long is cut off and counted as failed. */
  readonly requestTimeoutS: number;
}

/** The level so far, for progress. */
export interface LevelProgress {
  readonly concurrency: number;
  readonly sent: number;
  readonly done: number;
  readonly failed: number;
  /** Stream messages with choices received so far (about one token each). */
  readonly chunks: number;
  readonly elapsedS: number;
}

export interface LevelRun {
  readonly outcomes: RequestOutcome[];
  readonly durationS: number;
}

/**
 * One concurrency level as `vllm bench serve --max-concurrency N --request-rate inf` runs it
 * (vllm/benchmarks/serve.py benchmark(): every request queued at once behind a semaphore of N,
 * the duration from before the first to after the last): here N workers each take the next
 * prompt until the requests or the duration run out. Every request asks for the usage counts
 * (`stream_options.include_usage`) as vLLM's chat request does. `now` is seconds on a monotonic
 * clock; `signal` interrupts the whole level (the requests in flight are cut off).
 */
export async function runLevel(
  endpoint: ChatEndpoint,
  prompts: readonly BenchPrompt[],
  model: string,
  outputLen: number,
  bounds: LevelBounds,
  now: () => number,
  signal: AbortSignal,
  onProgress: (p: LevelProgress) => void = () => undefined,
): Promise<LevelRun> {
  const start = now();
  const outcomes: RequestOutcome[] = [];
  let sent = 0;
  let done = 0;
  let failed = 0;
  let chunks = 0;
  const progress = (): void => onProgress({ concurrency: bounds.concurrency, sent, done, failed, chunks, elapsedS: now() - start });
  const more = (): boolean => !signal.aborted && sent < bounds.requests && (bounds.durationS === undefined || now() - start < bounds.durationS);

  async function one(index: number): Promise<RequestOutcome> {
    const prompt = prompts[index % prompts.length] as BenchPrompt;
    const body = {
      model,
      messages: prompt.messages,
      // As vLLM's chat request asks (an engine that stops early reports fewer tokens in `usage`).
      max_completion_tokens: prompt.output_len ?? outputLen,
      stream: true,
      stream_options: { include_usage: true },
    };
    const sentAt = now();
    const clock = new ChatStreamClock(sentAt);
    const sse = new SseMessages();
    const timeout = AbortSignal.timeout(bounds.requestTimeoutS * 1000);
    try {
      for await (const text of endpoint.chunks(body, AbortSignal.any([signal, timeout]))) {
        const at = now();
        for (const m of sse.add(text)) {
          if (clock.message(m, at)) chunks++;
        }
        progress();
      }
      return clock.outcome(start, prompt.planned_input);
    } catch (e) {
      const why = timeout.aborted ? `no end within the request timeout (${bounds.requestTimeoutS} s)` : signal.aborted ? "interrupted" : (e as Error).message;
      return { ok: false, start_s: sentAt - start, input_tokens: prompt.planned_input, error: why };
    }
  }

  async function worker(): Promise<void> {
    // Bounded: each turn sends one of at most `bounds.requests` requests.
    while (more()) {
      const index = sent++;
      const o = await one(index);
      outcomes[index] = o;
      done++;
      if (!o.ok) failed++;
      progress();
    }
  }

  await Promise.all(Array.from({ length: bounds.concurrency }, () => worker()));
  return { outcomes: outcomes.filter((o) => o !== undefined), durationS: now() - start };
}
