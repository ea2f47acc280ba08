import { engineApiMethods } from "../../src/engine/registry.js";
import { GatewayMetrics } from "../../src/gateway/metrics.js";
import type { KnownDeployment, RouteTable } from "../../src/gateway/routes.js";
import type { GatewayOptions } from "../../src/gateway/server.js";

/** A gateway's options for a unit test: no keys, fresh metrics, 10 s timeouts; `over` wins. */
export function gatewayOptions(over: Partial<GatewayOptions> & { routes: () => RouteTable }): GatewayOptions {
  return {
    metrics: new GatewayMetrics(),
    health: () => ({}),
    staleness: () => undefined,
    engineKey: () => undefined,
    apiMethods: engineApiMethods(),
    upstreamFailed: () => undefined,
    headersTimeoutMs: 10_000,
    bodyTimeoutMs: 10_000,
    maxBodyBytes: 1 << 20,
    requestTimeoutMs: 10_000,
    ...over,
  };
}

/** A serving one-rank deployment of practice-2x in lane main at `endpoint`; `over` wins. */
export function deployment(endpoint: string, over: Partial<KnownDeployment> = {}): KnownDeployment {
  return {
    cluster: "c",
    deployment: "practice-2x",
    recipe: "practice-2x",
    recipe_hash: "h",
    served_model: "practice",
    endpoint,
    status: "serving",
    phase: "serving",
    uptime_seconds: 100,
    missing: [],
    unreachable: [],
    lane: "main",
    ranks: [{ rank: 0, node: "n1", container: "launcher-practice-2x-r0", state: "running", started_at: "t" }],
    ...over,
  };
}
