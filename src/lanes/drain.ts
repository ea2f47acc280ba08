import type { EngineAdapter } from "../engine/adapter.js";
import { engineAuthHeaders } from "../contract/engine-auth.js";
import { sumGauge } from "../engine/metrics-text.js";

/**
 * Requests the engine is running now, from its adapter's Prometheus gauge; undefined if unreadable.
 * `apiKey`: the key the engine demands, when it demands one.
 */
export async function requestsRunning(endpoint: string, engine: EngineAdapter, signal?: AbortSignal, apiKey?: string): Promise<number | undefined> {
  try {
    const res = await fetch(`${endpoint}${engine.metricsPath}`, {
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(2000)]) : AbortSignal.timeout(2000),
      headers: engineAuthHeaders(apiKey),
    });
    if (res.status !== 200) return undefined;
    return sumGauge(await res.text(), engine.runningRequestsMetric);
  } catch {
    return undefined;
  }
}

/**
 * Waits until a deployment that no longer gets new requests has finished the ones it runs, so
 * that stopping it cuts no answer short. Bounded by `timeoutMs`; an engine without metrics (or
 * without an adapter here: a newer launcher's container) is not waited for.
 */
export async function drain(
  endpoint: string,
  timeoutMs: number,
  signal: AbortSignal,
  engine: EngineAdapter | undefined,
  apiKey?: string,
  sleep = (ms: number) => new Promise((r) => setTimeout(r, ms)),
): Promise<{ drained: boolean; running: number }> {
  if (engine === undefined) return { drained: true, running: 0 };
  const deadline = Date.now() + timeoutMs;
  // A request routed just before the switch may still be on its way to the engine.
  await sleep(Math.min(500, timeoutMs));
  for (let i = 0; ; i++) {
    const running = await requestsRunning(endpoint, engine, signal, apiKey);
    if (running === undefined || running === 0) return { drained: true, running: 0 };
    if (Date.now() >= deadline || signal.aborted || i > 10_000) return { drained: false, running };
    await sleep(250);
  }
}
