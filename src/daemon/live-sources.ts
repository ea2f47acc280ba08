import { MAX_READ_LIMIT, withoutBodies, type ActivityRecord, type MetricsWindow, type ReadEvent } from "../contract/read-api.js";
import { ActivityLog, ACTIVITY_FLUSH_MS, ACTIVITY_KEEP_ROWS, ACTIVITY_RING } from "../gateway/activity-log.js";
import { MAX_CAPTURE_BYTES } from "../gateway/capture.js";
import { httpFetchText, MetricsScraper, SCRAPE_INTERVAL_MS, SCRAPE_MAX_BYTES, SCRAPE_TIMEOUT_MS, SCRAPE_WINDOW_MS, type FetchText, type ScrapeTarget } from "../measure/live/metrics-scraper.js";
import type { StateStore } from "../store/store.js";
import type { Snapshot } from "./discovery.js";

/** What the live sources push: a deployment's new metrics point, or a request through the gateway. */
export type LiveEvent = Extract<ReadEvent, { event: "metrics" | "activity" }>;

/**
 * The read API's live parts: each serving engine's metrics window, the gateway's activity log, and
 * one stream of both (`metrics` and `activity` events of src/contract/read-api.ts READ_EVENTS).
 */
export interface LiveSources {
  metrics(): MetricsWindow[];
  /** The newest requests, newest first (at most MAX_READ_LIMIT). */
  activity(limit: number): ActivityRecord[];
  subscribe(listener: (event: LiveEvent) => void): () => void;
  /** What the gateway calls with each answered request (GatewayOptions.activity). */
  readonly record: (record: ActivityRecord) => void;
  start(): void;
  stop(): Promise<void>;
}

/** The deployments of a discovery snapshot whose engines are scraped: the serving ones, with their engines' keys. */
export function scrapeTargets(snapshot: Pick<Snapshot, "deployments">, engineKey: (cluster: string, deployment: string) => string | undefined): ScrapeTarget[] {
  return snapshot.deployments
    .filter((d) => d.status === "serving")
    .map((d) => {
      const apiKey = engineKey(d.cluster, d.deployment);
      return { cluster: d.cluster, deployment: d.deployment, endpoint: d.endpoint, ...(d.engine === undefined ? {} : { engine: d.engine }), ...(apiKey === undefined ? {} : { apiKey }) };
    });
}

export interface LiveSourcesOptions {
  readonly snapshot: () => Pick<Snapshot, "deployments">;
  readonly store: Pick<StateStore, "engineKey" | "saveActivity" | "activity">;
  /** Defaults: Node's fetch, performance.now, Date.now and the intervals above. */
  readonly fetchText?: FetchText;
  readonly intervalMs?: number;
  /** The gateway's body capture (GatewayOptions.captureBodies): the store then keeps fewer rows. */
  readonly captureBodies?: number;
}

/** What the store's activity rows may hold of captured bodies: rows are dropped past it. */
export const ACTIVITY_BODY_BYTES = 256 * 1024 * 1024;

/** The rows the store keeps: fewer when each may carry two bodies, so that they stay within ACTIVITY_BODY_BYTES. */
export function activityRows(captureBodies: number | undefined): number {
  const perRow = 2 * Math.min(captureBodies ?? 0, MAX_CAPTURE_BYTES);
  return perRow === 0 ? ACTIVITY_KEEP_ROWS : Math.max(ACTIVITY_RING, Math.min(ACTIVITY_KEEP_ROWS, Math.floor(ACTIVITY_BODY_BYTES / perRow)));
}

export function liveSources(options: LiveSourcesOptions): LiveSources {
  const { store } = options;
  const scraper = new MetricsScraper({
    targets: () => scrapeTargets(options.snapshot(), (cluster, deployment) => store.engineKey(cluster, deployment)),
    fetchText: options.fetchText ?? httpFetchText,
    clock: () => performance.now(),
    wallClock: Date.now,
    intervalMs: options.intervalMs ?? SCRAPE_INTERVAL_MS,
    timeoutMs: SCRAPE_TIMEOUT_MS,
    maxBytes: SCRAPE_MAX_BYTES,
    windowMs: SCRAPE_WINDOW_MS,
  });
  const log = new ActivityLog({ store, ringSize: ACTIVITY_RING, keepRows: activityRows(options.captureBodies), flushMs: ACTIVITY_FLUSH_MS });
  return {
    metrics: () => scraper.windows(),
    activity: (limit) => log.recent(Math.min(limit, MAX_READ_LIMIT)),
    subscribe: (listener) => {
      const offMetrics = scraper.subscribe((u) => listener({ event: "metrics", data: u }));
      // Pushed to every reader: never the captured bodies, which only an admin reads (the route).
      const offActivity = log.subscribe((r) => listener({ event: "activity", data: withoutBodies(r) }));
      return () => {
        offMetrics();
        offActivity();
      };
    },
    record: (r) => log.add(r),
    start: () => {
      scraper.start();
      log.start();
    },
    stop: async () => {
      await scraper.stop();
      log.stop();
    },
  };
}
