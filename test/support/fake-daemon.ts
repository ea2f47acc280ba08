/**
 * `launcher serve`'s supervision and adoption over a FakeCluster, in this process: the real
 * Supervisor (src/supervise/supervisor.ts), its restarts booted by the daemon's own call
 * (src/daemon/reboot.ts bootAgain) in a real BootRegistry, adoption at start (src/daemon/adopt.ts), the
 * gateway's route table made by the daemon's RouteCache, and a real store. What the daemon gets
 * from a `launcher status --watch --json` process, it reads here by calling that command's
 * function (src/nodes/status.ts clusterStatus) on the fake nodes; docker's die events come from
 * the fake nodes through src/supervise/deaths.ts as the daemon follows them.
 *
 * Usage:
 *   const fc = await FakeCluster.start();
 *   const store = new Store(path.join(dir, "launcher.db"));
 *   const d = await FakeDaemon.start(fc, store);                 // adopts, first poll, then supervises
 *   const run = d.submit(fc.plan(RECIPE, { restart: { mode: "on-failure", max: 1 } }));  // a boot in the daemon (up --detach)
 *   await run.ended;                                               // its last event: the result, or the error
 *   fc.node("n2").exit("launcher-r-r1", 137);                     // a rank dies: die event, then polls
 *   await d.until("restarted", () => store.restarts("r", 5)[0]?.outcome === "ready");
 *   d.answer("served");                                            // what the gateway answers for a name
 *   await d.stop();                                                // leaves boots in progress, as a stopping daemon does
 */
import { bootAgain } from "../../src/daemon/reboot.js";
import { adoptBoots } from "../../src/daemon/adopt.js";
import type { UpEvent } from "../../src/boot/up-events.js";
import { RouteCache } from "../../src/daemon/route-cache.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import type { Resolution } from "../../src/gateway/routes.js";
import { clusterStatus } from "../../src/nodes/status.js";
import type { Plan } from "../../src/plan/plan.js";
import type { StateStore } from "../../src/store/store.js";
import { BootRegistry, type BootEntry } from "../../src/supervise/boots.js";
import { watchDeaths } from "../../src/supervise/deaths.js";
import { DEFAULT_TIMING } from "../../src/supervise/supervise.js";
import { Supervisor } from "../../src/supervise/supervisor.js";
import type { FakeCluster } from "./fake-cluster.js";
import { until } from "./until.js";

export interface FakeDaemonOptions {
  /** serve --restart-backoff (default 1 s, as the rig's daemons run). */
  readonly backoffMs?: number;
  /** serve --poll (default 100 ms). */
  readonly pollMs?: number;
}

/** The longest a stopping daemon waits for its boots to let go (src/daemon/daemon.ts DETACH_MS). */
const DETACH_MS = 5_000;

export class FakeDaemon {
  /** What the daemon logged (its `launcher serve:` lines without the prefix), in order. */
  readonly logs: string[] = [];
  readonly registry = new BootRegistry(Date.now);
  readonly supervisor: Supervisor;
  private readonly routes: RouteCache;
  private snap: Snapshot = { deployments: [], strangers: [], unreachable: [] };
  private reading: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private timers: NodeJS.Timeout[] = [];
  private deaths: Promise<void> | undefined;

  private constructor(
    readonly fc: FakeCluster,
    readonly store: StateStore,
    options: FakeDaemonOptions,
  ) {
    const cluster = fc.cluster.name;
    this.supervisor = new Supervisor({
      store,
      session: async (c) => (c === cluster ? fc.session : undefined),
      // As src/daemon/supervision.ts supervisorFor wires it.
      boot: (plan, session, signal, emit, detach, recreating) => bootAgain(plan, session, signal, store, emit, undefined, detach, recreating),
      boots: this.registry,
      refresh: () => void this.poll(),
      log: (l) => void this.logs.push(l),
      now: Date.now,
      timing: { ...DEFAULT_TIMING, backoffMs: options.backoffMs ?? 1000 },
    });
    this.routes = new RouteCache({ store, discovery: { snapshot: () => this.snap, refreshSoon: () => void this.poll() }, supervisor: this.supervisor, now: Date.now, tableMade: () => undefined, snapshotSeen: () => undefined });
  }

  /** Starts as src/daemon/daemon.ts Daemon.start does: adopts the boots a dead daemon left, reads the nodes once, then supervises. */
  static async start(fc: FakeCluster, store: StateStore, options: FakeDaemonOptions = {}): Promise<FakeDaemon> {
    const d = new FakeDaemon(fc, store, options);
    adoptBoots({
      store,
      registry: d.registry,
      clusters: [fc.cluster.name],
      session: async (c) => (c === fc.cluster.name ? fc.session : undefined),
      log: (l) => void d.logs.push(l),
      now: () => new Date(),
      restartAdopted: (plan, attempt, failure, ended) => d.supervisor.adoptedRestart(plan, attempt, failure, ended),
    });
    await d.poll();
    const every = options.pollMs ?? 100;
    d.timers.push(setInterval(() => void d.poll(), every), setInterval(() => d.supervisor.tick(), 100));
    d.deaths = watchDeaths(fc.session, (death) => d.supervisor.died(fc.cluster.name, death), (l) => void d.logs.push(`supervise: ${l}`), d.stopping.signal);
    return d;
  }

  /**
   * A boot of `plan` run in the daemon's registry, as an `up --detach` submitted to it runs
   * (claims, starts, watch and record through the `up` use case, src/app/up-use-case.ts bootKept;
   * no lane swap): `attach` follows it, `down` cancels it, a stopping daemon leaves it to the next.
   */
  submit(plan: Plan): BootEntry {
    return this.registry.start({ deployment: plan.deployment, cluster: plan.cluster, ...(plan.lane === undefined ? {} : { lane: plan.lane }) }, (emit, signal, detach) =>
      bootAgain(plan, this.fc.session, signal, this.store, emit, undefined, detach),
    );
  }

  /** `launcher down NAME` through the daemon's control API: its boot cancelled (src/daemon/control.ts DELETE boot). */
  down(deployment: string): Promise<UpEvent> {
    const entry = this.registry.find(deployment);
    if (entry === undefined || !entry.running) throw new Error(`no boot of ${deployment} runs in the fake daemon`);
    return entry.cancel("launcher down");
  }

  /** What the gateway answers for `model` now. */
  answer(model: string): Resolution {
    return this.routes.routes().resolve(model);
  }

  /** The supervisor's state of `deployment` (the daemon's /health), or undefined once forgotten. */
  supervision(deployment: string): string | undefined {
    return this.supervisor.describe()[`${this.fc.cluster.name}/${deployment}`];
  }

  /** One discovery read of every node, begun after this call (a read asked for while one runs is made once, after it). */
  poll(): Promise<void> {
    if (this.stopping.signal.aborted) return Promise.resolve();
    if (this.reading === undefined) {
      this.reading = this.read().finally(() => (this.reading = undefined));
      return this.reading;
    }
    this.queued ??= this.reading.then(() => {
      this.queued = undefined;
      return this.poll();
    });
    return this.queued;
  }

  /** Resolves once `check` answers true, polled every 20 ms; fails after `ms`, naming `what` and the daemon's log. */
  until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
    return until(what, check, ms, () => `; the fake daemon logged:\n${this.logs.join("\n")}`);
  }

  /** Stops as src/daemon/daemon.ts Daemon.stop does: boots in progress left to the next daemon, supervision stopped. */
  async stop(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    for (const b of this.registry.list().filter((x) => x.running)) this.logs.push(`leaving the boot of ${b.identity.deployment} to the next launcher serve`);
    await this.registry.detachAll("launcher serve stopping", DETACH_MS).catch(() => undefined);
    await this.halt();
  }

  /**
   * As SIGKILL: it stops reading and supervising at once and writes nothing more (a daemon keeps no
   * state but its store and the nodes' labels). Only while none of its boots runs: in this process
   * a boot would go on.
   */
  async kill(): Promise<void> {
    const running = this.registry.list().filter((x) => x.running);
    if (running.length > 0) throw new Error(`the fake daemon cannot be killed while it boots ${running.map((b) => b.identity.deployment).join(", ")}: stop() it`);
    await this.halt();
  }

  /** No more polls, reads, supervision or death events; what was under way has ended. */
  private async halt(): Promise<void> {
    this.stopping.abort();
    for (const t of this.timers) clearInterval(t);
    await this.queued;
    await this.reading;
    await this.supervisor.stop();
    await this.deaths;
  }

  private async read(): Promise<void> {
    const at = new Date();
    let s: Awaited<ReturnType<typeof clusterStatus>>;
    try {
      s = await clusterStatus(this.fc.session, at);
    } catch (e) {
      // As discovery does when a status read fails: said, and the last snapshot kept.
      this.logs.push(`discovery: cannot read ${this.fc.cluster.name}: ${(e as Error).message}`);
      return;
    }
    if (this.stopping.signal.aborted) return;
    const deployments = s.deployments.map((d) => ({ ...d, cluster: this.fc.cluster.name }));
    this.snap = { deployments, strangers: [], unreachable: s.unreachable, at };
    this.supervisor.observe(deployments, at.getTime());
  }
}
