import { engineAuthHeaders } from "../../contract/engine-auth.js";
import type { MetricsPoint, MetricsWindow } from "../../contract/read-api.js";
import { pointBetween, readEngineSample, type TimedSample } from "../../engine/engine-metrics.js";
import { adapterOf, type EngineRegistry } from "../../engine/registry.js";

/** A serving deployment whose engine is scraped: where its head answers, and the key its engine demands. */
export interface ScrapeTarget {
  readonly cluster: string;
  readonly deployment: string;
  readonly endpoint: string;
  /** Its engine (absent: the default engine). */
  readonly engine?: string;
  readonly apiKey?: string;
}

/** A new point of one deployment, as listeners hear it. */
export interface MetricsUpdate {
  readonly cluster: string;
  readonly deployment: string;
  readonly point: MetricsPoint;
}

/** Reads a URL's body as text, at most `maxBytes` of it, within `signal`; undefined when it cannot (any failure, a status but 200, a body past the cap). */
export type FetchText = (url: string, headers: Record<string, string>, signal: AbortSignal, maxBytes: number) => Promise<string | undefined>;

export interface ScraperOptions {
  /** The deployments serving now. */
  readonly targets: () => readonly ScrapeTarget[];
  readonly fetchText: FetchText;
  /** Milliseconds on a clock that never goes back (rates are taken on it). */
  readonly clock: () => number;
  /** The wall clock a point's `t` (ms since the epoch) is read from. */
  readonly wallClock: () => number;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** The largest /metrics body read. */
  readonly maxBytes: number;
  /** How far back a window reaches: it keeps windowMs / intervalMs points. */
  readonly windowMs: number;
  readonly engines?: EngineRegistry;
}

/** The daemon's defaults: a point every 5 s, the last hour of them. */
export const SCRAPE_INTERVAL_MS = 5_000;
export const SCRAPE_TIMEOUT_MS = 3_000;
export const SCRAPE_WINDOW_MS = 60 * 60 * 1000;
/** vLLM's /metrics is tens of KiB (histograms per engine core); far past that is not an engine's. */
export const SCRAPE_MAX_BYTES = 4 * 1024 * 1024;

interface Kept {
  last: TimedSample | undefined;
  points: MetricsPoint[];
}

const keyOf = (t: { readonly cluster: string; readonly deployment: string }): string => JSON.stringify([t.cluster, t.deployment]);

/**
 * Scrapes each serving deployment's engine metrics every interval and keeps a bounded window of
 * points per deployment (dropped once the deployment no longer serves). Time and HTTP come in
 * through its options, so a test drives `scrapeOnce` with fakes; `start` runs it on a timer.
 */
export class MetricsScraper {
  readonly #kept = new Map<string, Kept>();
  readonly #listeners = new Set<(u: MetricsUpdate) => void>();
  readonly #capacity: number;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;

  constructor(private readonly options: ScraperOptions) {
    this.#capacity = Math.max(1, Math.ceil(options.windowMs / options.intervalMs));
  }

  /** Every window now, oldest point first. */
  windows(): MetricsWindow[] {
    return [...this.#kept].map(([key, k]) => {
      const [cluster, deployment] = JSON.parse(key) as [string, string];
      return { cluster, deployment, points: [...k.points] };
    });
  }

  /** Calls `f` with each new point; returns the unsubscribe. */
  subscribe(f: (u: MetricsUpdate) => void): () => void {
    this.#listeners.add(f);
    return () => this.#listeners.delete(f);
  }

  /** Scrapes now, then every interval. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.scrapeOnce(), this.options.intervalMs);
    this.#timer.unref();
    void this.scrapeOnce();
  }

  /** Stops the timer and waits for a round in progress (each scrape is bounded by timeoutMs). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#round;
  }

  /** One round: every serving deployment scraped at once. A round still running (a slow engine) is not doubled. */
  scrapeOnce(): Promise<void> {
    this.#round ??= this.#scrapeAll().finally(() => {
      this.#round = undefined;
    });
    return this.#round;
  }

  async #scrapeAll(): Promise<void> {
    const targets = this.options.targets();
    const live = new Set(targets.map(keyOf));
    for (const key of this.#kept.keys()) if (!live.has(key)) this.#kept.delete(key);
    await Promise.all(targets.map((t) => this.#scrape(t)));
  }

  async #scrape(target: ScrapeTarget): Promise<void> {
    const adapter = adapterOf(target.engine, this.options.engines);
    const names = adapter?.engineMetrics;
    if (adapter === undefined || names === undefined) return;
    const { fetchText, timeoutMs, maxBytes, clock, wallClock } = this.options;
    const text = await fetchText(`${target.endpoint}${adapter.metricsPath}`, engineAuthHeaders(target.apiKey), AbortSignal.timeout(timeoutMs), maxBytes).catch(() => undefined);
    // A deployment gone while it was asked loses this point with its window in the next round.
    if (text === undefined) return;
    const key = keyOf(target);
    const sample = { at: clock(), figures: readEngineSample(text, names) };
    const kept = this.#kept.get(key) ?? { last: undefined, points: [] };
    this.#kept.set(key, kept);
    const point: MetricsPoint = { t: wallClock(), ...pointBetween(kept.last, sample) };
    kept.last = sample;
    kept.points.push(point);
    if (kept.points.length > this.#capacity) kept.points.splice(0, kept.points.length - this.#capacity);
    for (const f of this.#listeners) f({ cluster: target.cluster, deployment: target.deployment, point });
  }
}

/**
 * FetchText over Node's fetch: the body read chunk by chunk and given up (the request aborted)
 * once past `maxBytes`, so a body of any size costs at most that much.
 */
export const httpFetchText: FetchText = async (url, headers, signal, maxBytes) => {
  const res = await fetch(url, { headers, signal, redirect: "error" });
  if (res.status !== 200 || res.body === null) {
    await res.body?.cancel();
    return undefined;
  }
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      return undefined;
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString("utf8");
};
