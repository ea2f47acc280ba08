import { engineAuthHeaders } from "../gateway/headers.js";

/** Requests the engine is running now, from vLLM's Prometheus gauge; undefined if unreadable. */
export async function requestsRunning(endpoint: string, signal?: AbortSignal, apiKey?: string): Promise<number | undefined> {
  try {
    const res = await fetch(`${endpoint}/metrics`, {
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(2000)]) : AbortSignal.timeout(2000),
      headers: engineAuthHeaders(apiKey),
    });
    if (res.status !== 200) return undefined;
    let total: number | undefined;
    for (const line of (await res.text()).split("\n")) {
      const m = /^vllm:num_requests_running(?:\{[^}]*\})? ([\d.eE+-]+)$/.exec(line.trim());
      if (m) total = (total ?? 0) + Number(m[1]);
    }
    return total;
  } catch {
    return undefined;
  }
}

/**
 * Waits until a deployment that no longer gets new requests has finished the ones it runs, so
 * that stopping it cuts no answer short. Bounded by `timeoutMs`; an engine without metrics is
 * not waited for.
 */
export async function drain(
  endpoint: string,
  timeoutMs: number,
  signal: AbortSignal,
  sleep = (ms: number) => new Promise((r) => setTimeout(r, ms)),
  apiKey?: string,
): Promise<{ drained: boolean; running: number }> {
  const deadline = Date.now() + timeoutMs;
  // A request routed just before the switch may still be on its way to the engine.
  await sleep(Math.min(500, timeoutMs));
  for (let i = 0; ; i++) {
    const running = await requestsRunning(endpoint, signal, apiKey);
    if (running === undefined || running === 0) return { drained: true, running: 0 };
    if (Date.now() >= deadline || signal.aborted || i > 10_000) return { drained: false, running };
    await sleep(250);
  }
}
