/**
 * The daemon's gateway over a FakeCluster, for unit tests of what a client sees while launcher's
 * real code boots, swaps and loses deployments on fake nodes.
 *
 * Usage:
 *   const fc = await FakeCluster.start({ nodes: 4 });
 *   const store = new Store(file);                    // what `up` writes (lanes, launches)
 *   const gw = await FakeGateway.start(fc, file);     // the daemon's own connection to that file
 *   await gw.poll();                       // one discovery poll (what `status --watch --json` prints)
 *   const a = await gw.chat("main");       // { status, code, message, retryAfter, model }
 *   await gw.close();
 *
 * The route table is the daemon's own: src/nodes/status.ts clusterStatus over the fake nodes,
 * through the status line's encoding and decoding (the wire between a watcher and src/daemon/
 * discovery.ts), vouched for by the store as discovery does (src/claims/ownership.ts vouchFrom),
 * into src/daemon/route-cache.ts RouteCache, served by src/gateway/server.ts createGateway. A
 * change to the store (a lane) asks for a poll at once, as the daemon's does (refreshSoon).
 * The gateway reads the store through a connection of its own, as the daemon does: the route
 * cache notices a write by SQLite's data_version, which moves only for another connection's
 * writes (https://www.sqlite.org/pragma.html#pragma_data_version).
 */
import type { AddressInfo } from "node:net";
import { vouchFrom } from "../../src/claims/ownership.js";
import { decodeStatusLine, encodeStatusLine } from "../../src/contract/deployment.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { RouteCache } from "../../src/daemon/route-cache.js";
import { routeTable, type KnownDeployment, type Resolution, type RouteTable } from "../../src/gateway/routes.js";
import { createGateway, type Gateway } from "../../src/gateway/server.js";
import { clusterStatus } from "../../src/nodes/status.js";
import { Store } from "../../src/store/store.js";
import { gatewayOptions } from "../unit/gateway-fixture.js";
import type { FakeCluster } from "./fake-cluster.js";

/** What a client got for one chat request. */
export interface Answer {
  readonly status: number;
  /** The OpenAI error code of a refusal (model_booting, lane_switching, ...); undefined on 200. */
  readonly code?: string;
  readonly message?: string;
  readonly retryAfter: string | null;
  /** The `model` of the engine's first chunk: the served model that answered. */
  readonly model?: string;
}

/** A lane's model, its deployment and status, as GET /v1/models lists it. */
export interface ListedModel {
  readonly id: string;
  readonly deployment?: string;
  readonly status?: string;
}

export class FakeGateway {
  private current: Snapshot = { deployments: [], strangers: [], unreachable: [] };
  private polling: Promise<void> = Promise.resolve();

  private constructor(
    private readonly fc: FakeCluster,
    private readonly gateway: Gateway,
    /** The connection this gateway opened (closed with it); undefined: the caller's. */
    private readonly store: Store | undefined,
    readonly url: string,
  ) {}

  /**
   * The gateway over `fc`, reading the store at `file` through a connection of its own (as the
   * daemon reads what a `launcher up` process writes), or through `store` itself: the daemon's own
   * connection, which the boots it runs (up through the daemon, adopted boots) write through.
   */
  static async start(fc: FakeCluster, file: string | Store): Promise<FakeGateway> {
    let self: FakeGateway | undefined;
    const own = typeof file === "string";
    const store = own ? new Store(file) : file;
    const routes = new RouteCache({
      store,
      discovery: { snapshot: () => self?.current ?? { deployments: [], strangers: [], unreachable: [] }, refreshSoon: () => void self?.poll() },
      supervisor: { version: 0, restarting: () => [] },
      snapshotSeen: () => undefined,
      tableMade: () => undefined,
      now: Date.now,
    });
    const gateway = createGateway(gatewayOptions({ routes: () => routes.routes() }));
    await new Promise<void>((resolve) => gateway.server.listen(0, "127.0.0.1", resolve));
    const port = (gateway.server.address() as AddressInfo).port;
    self = new FakeGateway(fc, gateway, own ? store : undefined, `http://127.0.0.1:${port}`);
    self.vouch = vouchFrom(store, () => new Date());
    self.table = () => routes.routes();
    return self;
  }

  private vouch: (d: KnownDeployment) => string | undefined = () => undefined;
  private table: () => RouteTable = () => routeTable([], []);

  /** Where the gateway sends a request for `model` now: the route cache's table, as a request is routed. */
  resolve(model: string): Resolution {
    return this.table().resolve(model);
  }

  /** One discovery poll of the fake nodes; resolves once the gateway routes on it. Polls are taken one at a time. */
  poll(): Promise<void> {
    this.polling = this.polling.then(async () => {
      const line = decodeStatusLine(encodeStatusLine(await clusterStatus(this.fc.session, new Date())));
      const cluster = this.fc.cluster.name;
      const seen = line.deployments.map((d): KnownDeployment => ({ ...d, cluster }));
      this.current = {
        deployments: seen.filter((d) => this.vouch(d) === undefined),
        strangers: [],
        unreachable: line.unreachable.map((n) => `${cluster}/${n}`),
        at: new Date(line.at),
      };
    });
    return this.polling;
  }

  /** A chat request for `model` through the gateway, as a client sends it. */
  async chat(model: string): Promise<Answer> {
    const res = await fetch(`${this.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, max_tokens: 3, messages: [{ role: "user", content: "hi" }] }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    const retryAfter = res.headers.get("retry-after");
    if (res.status !== 200) {
      const e = (JSON.parse(text) as { error: { code: string; message: string } }).error;
      return { status: res.status, code: e.code, message: e.message, retryAfter };
    }
    const first = /^data: (.*)$/m.exec(text)?.[1] ?? "{}";
    const model_ = (JSON.parse(first) as { model?: string }).model;
    return { status: res.status, retryAfter, ...(model_ === undefined ? {} : { model: model_ }) };
  }

  /** GET /v1/models: each name the gateway routes. */
  async models(): Promise<ListedModel[]> {
    const res = await fetch(`${this.url}/v1/models`, { signal: AbortSignal.timeout(10_000) });
    return ((await res.json()) as { data: ListedModel[] }).data;
  }

  async close(): Promise<void> {
    await this.polling.catch(() => undefined);
    const closed = new Promise<void>((resolve) => this.gateway.server.close(() => resolve()));
    this.gateway.server.closeAllConnections();
    await closed;
    await this.gateway.close();
    this.store?.close();
  }
}
