import { engineAuthHeaders } from "../contract/engine-auth.js";

/**
 * How long to wait before asking again after the n-th answer that was not ready yet (0: the
 * first): 20 ms, doubling, at most 200 ms. The API usually comes up within moments of the line
 * that woke the check, so the first retries are soon; a slow one is not asked more than 5 times a
 * second. The head's log saying its API is up wakes the wait sooner (ReadyRetry).
 */
export const readyRetryMs = (n: number): number => Math.min(200, 20 * 2 ** Math.min(n, 4));

/**
 * The wait between two readiness checks of a boot. The head's log turning ready (its API line)
 * ends a wait at once, but only on that line: the lines after it (uvicorn's access line for each
 * /health and chat check) leave the state ready, and waking on each would poll at log speed.
 */
export class ReadyRetry {
  private wake: (() => void) | undefined;
  private wasReady = false;

  /** The head's boot state after one of its log lines. */
  headState(ready: boolean): void {
    if (ready && !this.wasReady) this.wake?.();
    this.wasReady = ready;
  }

  /** Ends after readyRetryMs(tries), on the head's ready line, or when `failed` settles. */
  async wait(tries: number, failed: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const woken = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, readyRetryMs(tries));
      this.wake = resolve;
    });
    try {
      await Promise.race([failed, woken]).catch(() => undefined);
    } finally {
      clearTimeout(timer);
      this.wake = undefined;
    }
  }
}

/**
 * Ready means: the engine's health path (its adapter's) answers 200 and one streamed chat
 * completion returns a token. `apiKey`: the key the engine demands (its /v1 routes answer 401
 * without it).
 */
export async function checkReady(endpoint: string, model: string, signal: AbortSignal, healthPath: string, apiKey?: string): Promise<{ ok: true } | { ok: false; why: string }> {
  const auth = engineAuthHeaders(apiKey);
  try {
    const health = await fetch(`${endpoint}${healthPath}`, { signal, headers: auth });
    if (health.status !== 200) return { ok: false, why: `${healthPath} answered ${health.status}` };
    const res = await fetch(`${endpoint}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...auth },
      body: JSON.stringify({ model, stream: true, max_tokens: 1, messages: [{ role: "user", content: "ping" }] }),
      signal,
    });
    if (res.status !== 200 || res.body === null) return { ok: false, why: `chat completion answered ${res.status}` };
    const decoder = new TextDecoder();
    let text = "";
    for await (const chunk of res.body) {
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      if (/"content":\s*"[^"]/.test(text) || /"text":\s*"[^"]/.test(text)) {
        await res.body.cancel().catch(() => undefined);
        return { ok: true };
      }
      if (text.includes("[DONE]")) break;
    }
    return { ok: false, why: "the streamed chat completion returned no token" };
  } catch (e) {
    return { ok: false, why: (e as Error).message };
  }
}
