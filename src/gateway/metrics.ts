import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** The daemon's Prometheus metrics, per model name and lane. */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: "launcher_gateway_requests_total", help: "Requests answered, by model, lane and HTTP status.", labelNames: ["model", "lane", "code"], registers: [this.registry] });
  readonly errors = new Counter({ name: "launcher_gateway_errors_total", help: "Requests that failed, by model, lane and kind (unknown_model, unavailable, upstream, auth, client_abort, too_large).", labelNames: ["model", "lane", "kind"], registers: [this.registry] });
  readonly inFlight = new Gauge({ name: "launcher_gateway_in_flight_requests", help: "Requests being proxied now.", labelNames: ["model", "lane"], registers: [this.registry] });
  readonly ttft = new Histogram({
    name: "launcher_gateway_time_to_first_token_seconds",
    help: "From the request's arrival to the first streamed chunk from the engine.",
    labelNames: ["model", "lane"],
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly tokensPerSecond = new Histogram({
    name: "launcher_gateway_tokens_per_second",
    help: "Output tokens per second of each completed generation (streamed chunks after the first, or usage.completion_tokens).",
    labelNames: ["model", "lane"],
    buckets: [1, 5, 10, 20, 40, 80, 160, 320, 640, 1280],
    registers: [this.registry],
  });
  readonly tokens = new Counter({ name: "launcher_gateway_output_tokens_total", help: "Output tokens passed through.", labelNames: ["model", "lane"], registers: [this.registry] });
  readonly deployments = new Gauge({ name: "launcher_gateway_deployments", help: "Deployments discovered on the clusters, by status.", labelNames: ["status"], registers: [this.registry] });
  /** The daemon's generation watch (src/supervise/generation-watch.ts), per serving deployment. */
  readonly wedged = new Gauge({ name: "launcher_gateway_deployment_wedged", help: "1 while a serving deployment answers /health but completed no generation within its probe's bound (not routed to), else 0.", labelNames: ["cluster", "deployment"], registers: [this.registry] });
  readonly lastGeneration = new Gauge({
    name: "launcher_gateway_deployment_last_generation_timestamp_seconds",
    help: "When a serving deployment last completed a generation (a real answer with a token, or the daemon's one-token probe), in seconds since the epoch; absent until it completed one.",
    labelNames: ["cluster", "deployment"],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "launcher_gateway_" });
  }

  /** A deployment's generation as the watch last saw it; undefined: no longer watched (its series go). */
  generation(cluster: string, deployment: string, state: { readonly lastOk: number | undefined; readonly wedged: boolean } | undefined): void {
    const labels = { cluster, deployment };
    if (state === undefined) {
      this.wedged.remove(labels);
      this.lastGeneration.remove(labels);
      return;
    }
    this.wedged.set(labels, state.wedged ? 1 : 0);
    if (state.lastOk !== undefined) this.lastGeneration.set(labels, state.lastOk / 1000);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
